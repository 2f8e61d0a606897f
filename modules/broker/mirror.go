package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// Properties of messages written by a mirror (modules/mirror). A mirror
// sends a message with PropertyMirrorDedup set; the broker then stores
// it at most once per UNIQ_KEY over a bounded window of recent mirrored
// messages of its topic (a replayed batch stores nothing twice and is
// answered with the positions of the first copy), restores the source's
// born host and timestamp and a parked delay level, and removes the
// transport-only properties. PropertyMirrorOrigin stays: it names the
// cluster the message was first produced in, which a mirror never
// forwards a message back to.
const (
	PropertyMirrorOrigin   = "MIRROR_ORIGIN"
	PropertyMirrorDedup    = "MIRROR_DEDUP"
	PropertyMirrorBornHost = "MIRROR_BORN_HOST"
	PropertyMirrorBornTS   = "MIRROR_BORN_TS"
	// PropertyMirrorDelay carries the DELAY level through a batch send
	// (which refuses DELAY); the message also carries its due time in
	// TIMER_DELIVER_MS, so the level is not applied again.
	PropertyMirrorDelay = "MIRROR_DELAY"
)

// MirrorDedupWindow is how many mirrored message ids the broker keeps per
// topic to refuse copies. A mirror replays at most the messages of one
// checkpoint interval after a restart, far fewer at sane rates.
const MirrorDedupWindow = 1 << 17

// errMirrorRetry answers a copy of a message whose first copy failed to
// store while the copy waited for it: the mirror retries the batch.
var errMirrorRetry = errors.New("broker: mirror: a concurrent copy of the message failed to store, retry")

// mirrorStates holds each broker's dedup windows, created on the first
// mirrored message (brokers that never see one keep nothing).
var mirrorStates sync.Map // *Broker → *mirrorDedup

type mirrorDedup struct {
	mu      sync.Mutex
	topics  map[string]*dedupWindow
	swept   time.Time
	refused atomic.Int64 // copies answered with their first copy's position
}

// MirrorDedupStats are a broker's dedup windows (runtime info's
// quiverMirrorDedup* keys).
type MirrorDedupStats struct {
	// Windows is the topics with a window; IDs the mirrored message ids
	// they hold (each at most MirrorDedupWindow).
	Windows, IDs int64
	// Refused counts copies the broker did not store again, since it
	// started.
	Refused int64
}

// MirrorDedupStats reads the broker's dedup windows.
func (b *Broker) MirrorDedupStats() MirrorDedupStats {
	v, ok := mirrorStates.Load(b)
	if !ok {
		return MirrorDedupStats{}
	}
	d := v.(*mirrorDedup)
	st := MirrorDedupStats{Refused: d.refused.Load()}
	d.mu.Lock()
	ws := make([]*dedupWindow, 0, len(d.topics))
	for _, w := range d.topics {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		st.IDs += int64(len(w.ids))
		w.mu.Unlock()
		st.Windows++
	}
	return st
}

// mirrorFigures adds the dedup windows' figures to runtime info.
func (b *Broker) mirrorFigures(t map[string]string) {
	st := b.MirrorDedupStats()
	t["quiverMirrorDedupWindows"] = strconv.FormatInt(st.Windows, 10)
	t["quiverMirrorDedupIds"] = strconv.FormatInt(st.IDs, 10)
	t["quiverMirrorDedupRefused"] = strconv.FormatInt(st.Refused, 10)
	t["quiverMirrorDedupCapacity"] = strconv.Itoa(MirrorDedupWindow)
}

// mirrorIdle is how long a topic's window is kept without a mirrored
// write: an idle window is dropped (memory follows the topics mirrored
// lately) and rebuilt from the store if a replay comes later.
const mirrorIdle = 10 * time.Minute

// dedupWindow is one topic's recent mirrored ids, oldest evicted first.
type dedupWindow struct {
	ready chan struct{} // closed once rebuilt from the store
	used  atomic.Int64  // unix ms of the last mirrored write
	mu    sync.Mutex
	ids   map[string]*dedupEntry
	ring  []string
	next  int
}

type dedupEntry struct {
	done chan struct{} // closed once stored (or failed: ok false)
	ok   bool
	pos  store.Position
}

func (w *dedupWindow) add(id string, e *dedupEntry) {
	if len(w.ring) < MirrorDedupWindow {
		w.ring = append(w.ring, id)
	} else {
		delete(w.ids, w.ring[w.next])
		w.ring[w.next] = id
		w.next = (w.next + 1) % MirrorDedupWindow
	}
	w.ids[id] = e
}

// mirrorPut is put's hook for mirrored messages: done is false when msgs
// hold none (put goes on as usual).
func (b *Broker) mirrorPut(ctx context.Context, msgs []*message.Ext, scratch []store.Message) (pos []store.Position, done bool, err error) {
	marked := false
	for _, m := range msgs {
		if _, ok := m.Properties[PropertyMirrorDedup]; ok {
			marked = true
			break
		}
	}
	if !marked {
		return nil, false, nil
	}
	v, _ := mirrorStates.LoadOrStore(b, &mirrorDedup{topics: map[string]*dedupWindow{}})
	d := v.(*mirrorDedup)
	pos = make([]store.Position, len(msgs))
	type reserved struct {
		e  *dedupEntry
		w  *dedupWindow
		id string
	}
	type dup struct {
		i int
		e *dedupEntry
	}
	fresh := make([]*message.Ext, 0, len(msgs))
	freshAt := make([]int, 0, len(msgs))
	mine := make([]reserved, 0, len(msgs))
	var dups []dup
	for i, m := range msgs {
		_, isMirrored := m.Properties[PropertyMirrorDedup]
		id := m.Properties[message.PropertyUniqKey]
		restoreMirrored(m)
		if !isMirrored || id == "" {
			fresh, freshAt, mine = append(fresh, m), append(freshAt, i), append(mine, reserved{})
			continue
		}
		w := b.dedupWindow(ctx, d, m.Topic)
		w.mu.Lock()
		if e, ok := w.ids[id]; ok {
			w.mu.Unlock()
			dups = append(dups, dup{i, e})
			continue
		}
		e := &dedupEntry{done: make(chan struct{})}
		w.add(id, e)
		w.mu.Unlock()
		fresh, freshAt, mine = append(fresh, m), append(freshAt, i), append(mine, reserved{e, w, id})
	}
	var stored []store.Position
	if len(fresh) > 0 {
		stored, err = b.put(ctx, fresh, scratch)
	}
	// Settle the entries this call reserved: positions, or withdrawal.
	for j, r := range mine {
		if r.e == nil {
			continue
		}
		if err == nil {
			r.e.pos, r.e.ok = stored[j], true
		} else {
			r.w.mu.Lock()
			if r.w.ids[r.id] == r.e {
				delete(r.w.ids, r.id)
			}
			r.w.mu.Unlock()
		}
		close(r.e.done)
	}
	if err != nil {
		return nil, true, err
	}
	for j, i := range freshAt {
		pos[i] = stored[j]
	}
	for _, dp := range dups {
		select {
		case <-dp.e.done:
		case <-ctx.Done():
			return nil, true, fmt.Errorf("broker: mirror: %w", ctx.Err())
		}
		if !dp.e.ok {
			return nil, true, errMirrorRetry
		}
		pos[dp.i] = dp.e.pos
	}
	d.refused.Add(int64(len(dups)))
	return pos, true, nil
}

// restoreMirrored turns a mirrored message back into the source's: born
// host and time, a parked delay level; the transport-only properties go.
func restoreMirrored(m *message.Ext) {
	p := m.Properties
	if _, ok := p[PropertyMirrorDedup]; !ok {
		return
	}
	delete(p, PropertyMirrorDedup)
	if v, ok := p[PropertyMirrorBornHost]; ok {
		if ap, err := netip.ParseAddrPort(v); err == nil {
			m.BornHost = ap
		}
		delete(p, PropertyMirrorBornHost)
	}
	if v, ok := p[PropertyMirrorBornTS]; ok {
		if ts, err := strconv.ParseInt(v, 10, 64); err == nil && ts > 0 {
			m.BornTimestamp = ts
		}
		delete(p, PropertyMirrorBornTS)
	}
	if v, ok := p[PropertyMirrorDelay]; ok {
		p[message.PropertyDelayTimeLevel] = v
		delete(p, PropertyMirrorDelay)
	}
}

// dedupWindow returns topic's window, rebuilt on first use from the tail
// of the topic's queues (the mirrored messages stored before a restart).
func (b *Broker) dedupWindow(ctx context.Context, d *mirrorDedup, topic string) *dedupWindow {
	now := time.Now()
	d.mu.Lock()
	if now.Sub(d.swept) > mirrorIdle/10 {
		d.swept = now
		for t, w := range d.topics {
			if now.UnixMilli()-w.used.Load() > mirrorIdle.Milliseconds() {
				delete(d.topics, t)
			}
		}
	}
	w, ok := d.topics[topic]
	if !ok {
		w = &dedupWindow{ready: make(chan struct{}), ids: map[string]*dedupEntry{}}
		d.topics[topic] = w
	}
	w.used.Store(now.UnixMilli())
	d.mu.Unlock()
	if !ok {
		b.rebuildDedup(ctx, topic, w)
		close(w.ready)
	}
	<-w.ready
	return w
}

// rebuildDedup fills w with the mirrored messages among the last
// MirrorDedupWindow/queues of each queue of topic.
func (b *Broker) rebuildDedup(ctx context.Context, topic string, w *dedupWindow) {
	tc, ok := b.topics.get(topic)
	if !ok {
		return
	}
	queues := max(tc.WriteQueueNums, tc.ReadQueueNums, 1)
	per := int64(MirrorDedupWindow) / int64(queues)
	var res store.ReadResult
	for q := range queues {
		sq := store.Queue{Topic: topic, ID: q}
		lo, hi, err := b.store.Offsets(sq)
		if err != nil || hi <= lo {
			continue
		}
		off := max(lo, hi-per)
		for off < hi {
			res.Reset()
			if err := b.store.Read(ctx, sq, off, store.ReadOptions{MaxMessages: 256, MaxBytes: 4 << 20}, &res); err != nil || res.NextOffset <= off {
				if err != nil {
					b.log.Warn("mirror dedup: rebuilding the window", "topic", topic, "queue", q, "err", err)
				}
				break
			}
			for _, rec := range res.Records {
				m, _, err := message.DecodeStored(rec)
				if err != nil || m.Properties[PropertyMirrorOrigin] == "" || m.UniqKey() == "" {
					continue
				}
				id := m.Properties[message.PropertyUniqKey]
				if _, dup := w.ids[id]; dup {
					continue
				}
				e := &dedupEntry{done: make(chan struct{}), ok: true, pos: store.Position{
					CommitLogOffset: m.CommitLogOffset, Size: m.StoreSize, QueueOffset: m.QueueOffset, StoreTimestamp: m.StoreTimestamp}}
				close(e.done)
				w.add(id, e)
			}
			off = res.NextOffset
		}
	}
	if n := len(w.ids); n > 0 {
		b.log.Info("mirror dedup window rebuilt", "topic", topic, "ids", n)
	}
}
