package broker

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"maps"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func (b *Broker) registerLoop(ctx context.Context) {
	b.registerAll(ctx, false)
	t := time.NewTicker(b.cfg.RegisterInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.registerAll(ctx, true)
		case <-b.registerNow:
			b.registerAll(ctx, false)
		case <-b.treg.now:
			b.registerTopics(ctx)
		}
	}
}

// fullEvery is how many periodic registrations in a row may be digests
// (QUERY_DATA_VERSION answered "unchanged") before a full one is sent
// anyway, as a safety net.
const fullEvery = 10

// registerAll registers with every configured name server. A periodic
// registration first asks each name server that took an earlier one
// whether it holds the broker's current data version (QUERY_DATA_VERSION,
// which also counts as the broker's heartbeat there, in Java's name server
// as in ours) and sends the whole topic table only when it does not: a
// heartbeat costs the same at 100 topics and at 100,000.
func (b *Broker) registerAll(ctx context.Context, periodic bool) {
	role := b.Role()
	if len(b.cfg.Namesrv) == 0 || role.Hidden {
		return
	}
	b.treg.mu.Lock()
	if periodic {
		b.treg.periods++
		if b.treg.periods >= fullEvery {
			periodic, b.treg.periods = false, 0
		}
	}
	held := maps.Clone(b.treg.announced)
	b.treg.mu.Unlock()
	dv := b.topics.dataVersion()
	// In parallel, as Java's registerBrokerAll does: a name server that
	// is slow to answer (one whose failover controller waits to apply a
	// new epoch, or one cut off by a partition) does not hold back the
	// others, nor the next round: a name server whose registration is
	// still waiting is skipped until it answers or times out.
	for _, ns := range b.cfg.Namesrv {
		if _, busy := b.regBusy.LoadOrStore(ns, true); busy {
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer b.doneAt(ns)
			if v, known := held[ns]; periodic && known && v == dv && b.unchangedAt(ctx, ns, role, dv) {
				b.treg.digests.Add(1)
				return
			}
			// The whole table covers the topics waiting to be registered
			// one by one there (taken before the table is copied).
			b.takePending(ns)
			body := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.registeredTopics(), FilterServerList: []string{}}
			raw, err := json.Marshal(&body)
			if err != nil {
				b.log.Error("encode registration", "err", err)
				return
			}
			res := b.registerOne(ctx, ns, role, raw)
			b.treg.fulls.Add(1)
			b.treg.mu.Lock()
			if res == registered {
				b.treg.announced[ns] = body.TopicConfigSerializeWrapper.DataVersion
			} else {
				delete(b.treg.announced, ns)
			}
			b.treg.mu.Unlock()
			if res == regRefused && role.Writable && role.Epoch > 0 {
				// A name server that has not applied the epoch yet
				// refuses a new master: try again soon rather than at
				// the next interval.
				b.retryRegister()
			}
		}()
	}
}

// unchangedAt asks ns whether it holds dv for this broker
// (QUERY_DATA_VERSION); true when it answers that nothing changed, which
// refreshes the broker's liveness there.
func (b *Broker) unchangedAt(ctx context.Context, ns string, role RoleState, dv protocol.DataVersion) bool {
	body, err := json.Marshal(dv)
	if err != nil {
		return false
	}
	req := remoting.NewRequest(remoting.QueryDataVersion, map[string]string{
		"brokerName":  b.cfg.Name,
		"brokerAddr":  b.cfg.AdvertiseAddr(),
		"clusterName": b.cfg.Cluster,
		"brokerId":    strconv.FormatInt(role.ID, 10),
	}, body)
	if b.deps.Sign != nil {
		b.deps.Sign(req)
	}
	rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	resp, err := b.nsrv.Invoke(rctx, ns, req)
	cancel()
	if err != nil || resp.Code != remoting.Success {
		return false
	}
	return resp.Ext("changed") == "false"
}

// bodyCrc32 is REGISTER_BROKER's bodyCrc32 as a Java broker sends it:
// UtilAll.crc32(body), the CRC-32 with its top bit cleared, as a decimal
// int (never negative).
func bodyCrc32(body []byte) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)&0x7FFFFFFF), 10)
}

// regResult is how a registration went.
type regResult int

const (
	registered regResult = iota
	regRefused
	regFailed // no answer
)

// registerOne registers with ns.
func (b *Broker) registerOne(ctx context.Context, ns string, role RoleState, raw []byte) (res regResult) {
	ext := map[string]string{
		"brokerName":   b.cfg.Name,
		"brokerAddr":   b.cfg.AdvertiseAddr(),
		"clusterName":  b.cfg.Cluster,
		"haServerAddr": b.cfg.AdvertiseAddr(),
		"brokerId":     strconv.FormatInt(role.ID, 10),
		"compressed":   "false",
		"bodyCrc32":    bodyCrc32(raw),
	}
	if role.Epoch > 0 {
		// Automatic failover: name servers check a master's epoch
		// (modules/namesrv EpochExt).
		ext[epochExt] = strconv.FormatInt(role.Epoch, 10)
	}
	req := remoting.NewRequest(remoting.RegisterBroker, ext, raw)
	if b.deps.Sign != nil {
		b.deps.Sign(req)
	}
	rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	resp, err := b.nsrv.Invoke(rctx, ns, req)
	cancel()
	switch {
	case err != nil:
		res = regFailed
		if ctx.Err() == nil {
			// Once per back-off (regstate.go), not every round.
			if n, log := b.regs.unanswered(ns, err, time.Now()); log {
				b.log.Error("cannot register with name server: no client finds this broker through it; check that broker.namesrv lists host:port of running name servers and that they are reachable from here",
					"namesrv", ns, "failures", n, "err", err)
			}
		}
	case resp.Code == remoting.NoPermission:
		res = regRefused
		b.log.Error("register with name server refused: the name server checks ACL; set auth.acl.access_key and auth.acl.secret_key to an account with role: broker",
			"namesrv", ns, "code", resp.Code, "remark", resp.Remark)
	case resp.Code != remoting.Success:
		res = regRefused
		b.log.Warn("register with name server refused", "namesrv", ns, "code", resp.Code, "remark", resp.Remark)
	default:
		b.log.Debug("registered with name server", "namesrv", ns)
	}
	if err == nil {
		if n := b.regs.record(ns, resp); n > 0 { // regstate.go: /readyz
			b.log.Info("name server answers again", "namesrv", ns, "unanswered", n)
		}
	}
	return res
}

// epochExt is namesrv.EpochExt (the broker does not import the name
// server).
const epochExt = "quiverEpoch"

// retryRegister registers again in a moment.
func (b *Broker) retryRegister() {
	t := time.NewTimer(250 * time.Millisecond)
	go func() {
		defer t.Stop()
		select {
		case <-t.C:
			b.triggerRegister()
		case <-b.ctx.Done():
		}
	}()
}

func (b *Broker) unregisterAll(ctx context.Context) {
	for _, ns := range b.cfg.Namesrv {
		req := remoting.NewRequest(remoting.UnregisterBroker, map[string]string{
			"brokerName":  b.cfg.Name,
			"brokerAddr":  b.cfg.AdvertiseAddr(),
			"clusterName": b.cfg.Cluster,
			"brokerId":    strconv.FormatInt(b.ID(), 10),
		}, nil)
		if b.deps.Sign != nil {
			b.deps.Sign(req)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := b.nsrv.Invoke(rctx, ns, req); err != nil {
			b.log.Warn("unregister from name server", "namesrv", ns, "err", err)
		}
		cancel()
	}
}
