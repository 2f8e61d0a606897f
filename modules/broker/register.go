package broker

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func (b *Broker) registerLoop(ctx context.Context) {
	b.registerAll(ctx)
	t := time.NewTicker(b.cfg.RegisterInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.registerNow:
		}
		b.registerAll(ctx)
	}
}

// registerAll registers with every configured name server.
func (b *Broker) registerAll(ctx context.Context) {
	role := b.Role()
	if len(b.cfg.Namesrv) == 0 || role.Hidden {
		return
	}
	body := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.topics.snapshot(), FilterServerList: []string{}}
	raw, err := json.Marshal(&body)
	if err != nil {
		b.log.Error("encode registration", "err", err)
		return
	}
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
			defer b.regBusy.Delete(ns)
			if b.registerOne(ctx, ns, role, raw) && role.Writable && role.Epoch > 0 {
				// A name server that has not applied the epoch yet
				// refuses a new master: try again soon rather than at
				// the next interval.
				b.retryRegister()
			}
		}()
	}
}

// bodyCrc32 is REGISTER_BROKER's bodyCrc32 as a Java broker sends it:
// UtilAll.crc32(body), the CRC-32 with its top bit cleared, as a decimal
// int (never negative).
func bodyCrc32(body []byte) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)&0x7FFFFFFF), 10)
}

// registerOne registers with ns; it reports whether ns refused.
func (b *Broker) registerOne(ctx context.Context, ns string, role RoleState, raw []byte) (refused bool) {
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
		if ctx.Err() == nil {
			b.log.Warn("register with name server", "namesrv", ns, "err", err)
		}
	case resp.Code == remoting.NoPermission:
		refused = true
		b.log.Error("register with name server refused: the name server checks ACL; set acl.access_key and acl.secret_key to an account with role: broker",
			"namesrv", ns, "code", resp.Code, "remark", resp.Remark)
	case resp.Code != remoting.Success:
		refused = true
		b.log.Warn("register with name server refused", "namesrv", ns, "code", resp.Code, "remark", resp.Remark)
	default:
		b.log.Debug("registered with name server", "namesrv", ns)
	}
	if err == nil {
		b.regs.record(ns, resp) // regstate.go: /readyz
	}
	return refused
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
