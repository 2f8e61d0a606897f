package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// PulledHook observes messages handed to a consumer by a pull (answered at
// once or after being held): the topic pulled, how many records and their
// stored size in bytes.
type PulledHook func(topic string, msgs, bytes int)

// GroupPulledHook is PulledHook with the pulling consumer group.
type GroupPulledHook func(topic, group string, msgs, bytes int)

// observer keeps the broker's running figures (GET_BROKER_RUNTIME_INFO)
// and the pull hooks (metrics).
type observer struct {
	putMsgs, putBytes atomic.Int64
	getMsgs, getBytes atomic.Int64
	// maxPhys is the highest commit-log end seen since start.
	maxPhys atomic.Int64
	bootMs  int64
	// rt keeps the sampled runtime figures (runtime.go).
	rt runtimeStats

	mu          sync.RWMutex
	pulled      []PulledHook
	groupPulled []GroupPulledHook
}

// OnPulled registers h; it runs on the pull path, so it must be cheap and
// safe for concurrent use.
func (b *Broker) OnPulled(h PulledHook) {
	b.obs.mu.Lock()
	b.obs.pulled = append(b.obs.pulled, h)
	b.obs.mu.Unlock()
}

// OnGroupPulled registers h, which also sees the consumer group; the
// same rules as OnPulled apply.
func (b *Broker) OnGroupPulled(h GroupPulledHook) {
	b.obs.mu.Lock()
	b.obs.groupPulled = append(b.obs.groupPulled, h)
	b.obs.mu.Unlock()
}

// observePulled is called by pull with the records of a successful answer.
func (b *Broker) observePulled(topic, group string, recs [][]byte) {
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	now := time.Now()
	b.obs.rt.rollDay(now, b.obs.putMsgs.Load(), b.obs.getMsgs.Load())
	b.obs.rt.getFound.add(now.Unix(), 1)
	b.obs.rt.transferred.add(now.Unix(), int64(len(recs)))
	b.obs.getMsgs.Add(int64(len(recs)))
	b.obs.getBytes.Add(int64(n))
	b.obs.mu.RLock()
	hooks, groupHooks := b.obs.pulled, b.obs.groupPulled
	b.obs.mu.RUnlock()
	for _, h := range hooks {
		h(topic, len(recs), n)
	}
	for _, h := range groupHooks {
		h(topic, group, len(recs), n)
	}
}

// observeStored counts stored messages; it is the broker's own
// StoredListener, registered with the stats processors.
func (o *observer) observeStored(msgs []*message.Ext, pos []store.Position) {
	var bytes int64
	for _, p := range pos {
		bytes += int64(p.Size)
		end := p.CommitLogOffset + int64(p.Size)
		for cur := o.maxPhys.Load(); end > cur && !o.maxPhys.CompareAndSwap(cur, end); cur = o.maxPhys.Load() {
		}
	}
	now := time.Now()
	o.rt.rollDay(now, o.putMsgs.Load(), o.getMsgs.Load())
	o.rt.put.add(now.Unix(), int64(len(msgs)))
	o.putMsgs.Add(int64(len(msgs)))
	o.putBytes.Add(bytes)
}

// Peers returns the broker's open client connections (nil before Start).
func (b *Broker) Peers() []*remoting.Peer {
	if b.server == nil {
		return nil
	}
	return b.server.Peers()
}

// Topics lists the topics the broker serves, sorted.
func (b *Broker) Topics() []string { return b.topics.names() }

// QueueCount returns a topic's read queue count (0 when unknown).
func (b *Broker) QueueCount(topic string) int32 {
	tc, ok := b.topics.get(topic)
	if !ok {
		return 0
	}
	return tc.ReadQueueNums
}

// ConsumerOffsets returns every committed offset: group → topic → queue →
// offset (a copy).
func (b *Broker) ConsumerOffsets() map[string]map[string]map[int32]int64 {
	o := b.offsets
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := map[string]map[string]map[int32]int64{}
	for k, qs := range o.table {
		topic, group, _ := cutOffsetKey(k)
		if out[group] == nil {
			out[group] = map[string]map[int32]int64{}
		}
		m := make(map[int32]int64, len(qs))
		for q, off := range qs {
			m[q] = off
		}
		out[group][topic] = m
	}
	return out
}

// HeldPulls counts pull requests parked on empty queues.
func (b *Broker) HeldPulls() int { return b.holds.held() }
