package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Incremental registration: a master that creates or changes topics
// registers just those (REGISTER_TOPIC_IN_NAMESRV, RocketMQ 5's code),
// not its whole topic table, so a topic change costs the same at 100
// topics and at 100,000. With the data version before and after the change
// (modules/namesrv register_topic.go) our name servers keep the broker's
// version current, so the next periodic registration stays a digest. A
// name server that does not know the code (Java 4.9) gets full
// registrations, as before; deletions also go as a full registration.

// maxIncremental is the most topics registered one by one; a larger
// change (a heartbeat naming thousands of new groups) sends the whole
// table once instead.
const maxIncremental = 256

// topicRegs is the registration state shared by the registration loop and
// the per-name-server registrations.
type topicRegs struct {
	now chan struct{} // pending topics to register

	mu sync.Mutex
	// pending is, per name server, the topics still to register there.
	pending map[string]map[string]struct{}
	// announced is, per name server, the data version it took in the last
	// registration that succeeded there; absent when unknown.
	announced map[string]protocol.DataVersion
	// unsupported name servers answered REQUEST_CODE_NOT_SUPPORTED.
	unsupported map[string]bool
	periods     int // periodic registrations since the last full one

	// Counters: whole-table registrations sent, periodic registrations
	// answered "unchanged" (digests), single topics registered.
	fulls, digests, singles atomic.Int64
}

func (r *topicRegs) init() {
	r.now = make(chan struct{}, 1)
	r.pending = map[string]map[string]struct{}{}
	r.announced = map[string]protocol.DataVersion{}
	r.unsupported = map[string]bool{}
}

// topicsChanged registers the named topics with the name servers soon.
func (b *Broker) topicsChanged(names ...string) {
	if len(names) == 0 || len(b.cfg.Namesrv) == 0 {
		return
	}
	many := false
	b.treg.mu.Lock()
	for _, ns := range b.cfg.Namesrv {
		p := b.treg.pending[ns]
		if p == nil {
			p = map[string]struct{}{}
			b.treg.pending[ns] = p
		}
		for _, n := range names {
			p[n] = struct{}{}
		}
		many = many || len(p) > maxIncremental
	}
	b.treg.mu.Unlock()
	if many {
		b.triggerRegister()
		return
	}
	b.kickTopics()
}

// kickTopics wakes the registration loop for pending topics.
func (b *Broker) kickTopics() {
	select {
	case b.treg.now <- struct{}{}:
	default:
	}
}

// takePending removes and returns ns's pending topics.
func (b *Broker) takePending(ns string) []string {
	b.treg.mu.Lock()
	defer b.treg.mu.Unlock()
	p := b.treg.pending[ns]
	if len(p) == 0 {
		return nil
	}
	out := make([]string, 0, len(p))
	for n := range p {
		out = append(out, n)
	}
	delete(b.treg.pending, ns)
	return out
}

// hasPending reports whether topics wait to be registered at ns.
func (b *Broker) hasPending(ns string) bool {
	b.treg.mu.Lock()
	defer b.treg.mu.Unlock()
	return len(b.treg.pending[ns]) > 0
}

// registerTopics registers the pending topics with every name server that
// has no registration in flight; a name server that has one gets them when
// it finishes (doneAt).
func (b *Broker) registerTopics(ctx context.Context) {
	role := b.Role()
	if len(b.cfg.Namesrv) == 0 || role.Hidden || role.ID != protocol.MasterID {
		for _, ns := range b.cfg.Namesrv {
			b.takePending(ns) // slaves' topics are not routed
		}
		return
	}
	full := false
	for _, ns := range b.cfg.Namesrv {
		b.treg.mu.Lock()
		prev, known := b.treg.announced[ns]
		unsupported := b.treg.unsupported[ns]
		n := len(b.treg.pending[ns])
		b.treg.mu.Unlock()
		if n == 0 {
			continue
		}
		if unsupported || n > maxIncremental {
			full = true
			continue
		}
		if _, busy := b.regBusy.LoadOrStore(ns, true); busy {
			continue // doneAt kicks again when that registration ends
		}
		names := b.takePending(ns)
		next := b.topics.dataVersion()
		var tcs []protocol.TopicConfig
		for _, n := range names {
			if c, ok := b.topics.get(n); ok {
				tcs = append(tcs, *c)
			}
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer b.doneAt(ns)
			switch b.registerTopicsAt(ctx, ns, tcs, prev, known, next) {
			case registered:
				b.treg.mu.Lock()
				b.treg.announced[ns] = next
				b.treg.mu.Unlock()
			case regRefused:
				b.forget(ns)
				b.triggerRegister()
			default:
				b.forget(ns)
			}
		}()
	}
	if full {
		b.registerAll(ctx, false)
	}
}

// doneAt ends a registration in flight at ns and kicks the pending topics.
func (b *Broker) doneAt(ns string) {
	b.regBusy.Delete(ns)
	if b.hasPending(ns) {
		b.kickTopics()
	}
}

// forget drops what the broker knows of ns's version of its table.
func (b *Broker) forget(ns string) {
	b.treg.mu.Lock()
	delete(b.treg.announced, ns)
	b.treg.mu.Unlock()
}

// registerTopicsAt sends one REGISTER_TOPIC_IN_NAMESRV per topic to ns;
// the last carries the version change from prev (when known) to next.
func (b *Broker) registerTopicsAt(ctx context.Context, ns string, tcs []protocol.TopicConfig, prev protocol.DataVersion, known bool, next protocol.DataVersion) regResult {
	for i, tc := range tcs {
		rd := protocol.TopicRouteData{QueueDatas: []protocol.QueueData{{
			BrokerName: b.cfg.Name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
			Perm: tc.Perm & b.brokerPermission(), TopicSysFlag: tc.TopicSysFlag,
		}}, BrokerDatas: []protocol.BrokerData{}}
		ext := map[string]string{"topic": tc.TopicName, "brokerAddr": b.cfg.AdvertiseAddr()}
		if i == len(tcs)-1 && known {
			p, _ := json.Marshal(prev)
			n, _ := json.Marshal(next)
			ext[prevDataVersionExt], ext[dataVersionExt] = string(p), string(n)
		}
		req := remoting.NewRequest(remoting.RegisterTopicInNamesrv, ext, rd.Encode())
		if b.deps.Sign != nil {
			b.deps.Sign(req)
		}
		rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		resp, err := b.nsrv.Invoke(rctx, ns, req)
		cancel()
		if err == nil && resp.Code == remoting.Success {
			b.treg.singles.Add(1)
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				b.log.Warn("register topic with name server", "namesrv", ns, "topic", tc.TopicName, "err", err)
			}
			return regFailed
		case resp.Code == remoting.RequestCodeNotSupported:
			b.log.Info("name server does not take single-topic registrations (REGISTER_TOPIC_IN_NAMESRV): registering whole tables there", "namesrv", ns)
			b.treg.mu.Lock()
			b.treg.unsupported[ns] = true
			b.treg.mu.Unlock()
			return regRefused
		case resp.Code != remoting.Success:
			b.log.Warn("register topic with name server refused", "namesrv", ns, "topic", tc.TopicName,
				"code", resp.Code, "remark", resp.Remark)
			return regRefused
		}
	}
	if len(tcs) == 0 {
		return regFailed // only deletions: let the periodic registration decide
	}
	b.log.Debug("registered topics with name server", "namesrv", ns, "topics", len(tcs), "version", strconv.FormatInt(next.Counter, 10))
	return registered
}

// The name server's version fields (namesrv.DataVersionExt and
// PrevDataVersionExt; the broker does not import the name server).
const (
	dataVersionExt     = "quiverDataVersion"
	prevDataVersionExt = "quiverPrevDataVersion"
)

// registerTopicWait bounds how long an admin topic change waits for the
// name servers (Java waits for every name server's answer, each with a
// timeout of its own).
const registerTopicWait = 3 * time.Second

// registerTopicNow registers tc with every name server and waits for
// their answers (at most registerTopicWait): one REGISTER_TOPIC_IN_NAMESRV
// each, the whole table where the name server does not know that code.
// It carries no version change; the registration loop's topicsChanged
// path keeps the name servers' versions.
func (b *Broker) registerTopicNow(ctx context.Context, tc protocol.TopicConfig) {
	role := b.Role()
	if len(b.cfg.Namesrv) == 0 || role.Hidden || role.ID != protocol.MasterID {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, registerTopicWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, ns := range b.cfg.Namesrv {
		b.treg.mu.Lock()
		unsupported := b.treg.unsupported[ns]
		b.treg.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !unsupported && b.registerTopicsAt(ctx, ns, []protocol.TopicConfig{tc}, protocol.DataVersion{}, false, protocol.DataVersion{}) == registered {
				return
			}
			b.treg.mu.Lock()
			unsupported = b.treg.unsupported[ns]
			b.treg.mu.Unlock()
			if !unsupported {
				return // refused or unreachable: the loop and its retries handle it
			}
			body := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.registeredTopics(), FilterServerList: []string{}}
			raw, err := json.Marshal(&body)
			if err != nil {
				return
			}
			if b.registerOne(ctx, ns, role, raw) == registered {
				b.treg.fulls.Add(1)
			}
		}()
	}
	wg.Wait()
}
