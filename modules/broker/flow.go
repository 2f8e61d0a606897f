package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// Busy remarks, as Apache RocketMQ words them, so operators recognise them.
const (
	busyQueueRemark = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: %dms, size of queue: %d"
	busyStoreRemark = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
	busyQuotaRemark = "[QUOTA]broker busy, %s over its quota of %s, start flow control for a while"
)

// sendGate bounds the sends a broker holds at once and sheds load when the
// store cannot keep up: a send that waited longer than busyTimeout for a
// slot, or arrives while a store write has been stuck for longer than
// storeBusyTimeout, is answered SYSTEM_BUSY at once instead of queueing
// without bound. Pulls and heartbeats never pass through it.
//
// The store-latency guard is Java's isOSPageCacheBusy: Java answers
// [PC_SYNCHRONIZED] while the commit log's put lock has been held longer
// than osPageCacheBusyTimeOutMills (1,000 ms by default, our
// store_busy_timeout); here, while store writes are under way and none
// has finished for that long (storeWrite brackets the put alone, not the
// parsing, the wait for a slot or a replica's ack before and after it,
// so a broker starved of CPU between its puts is not taken for a stuck
// disk).
type sendGate struct {
	slots       chan struct{}
	busyTimeout atomic.Int64 // nanoseconds; UPDATE_BROKER_CONFIG may change it
	storeBusy   atomic.Int64 // nanoseconds: the store-latency guard
	now         func() time.Time

	inflight     atomic.Int64 // sends admitted and not yet released
	writing      atomic.Int64 // store writes under way (storeWrite)
	lastProgress atomic.Int64 // unix nanos of the last finished (or first started) store write

	busyQueue, busyStore, busyQuota atomic.Int64
	quotas                          *quotas

	// diskFull counts sends refused because the disk was full, storeFailed
	// those refused because the store disabled writes until reopen (a
	// failed fsync); storeErrLog rate-limits store-error log lines
	// (send.go).
	diskFull    atomic.Int64
	storeFailed atomic.Int64
	storeErrLog logLimiter
}

func newSendGate(capacity int, busyTimeout, storeBusyTimeout time.Duration, q *quotas) *sendGate {
	g := &sendGate{slots: make(chan struct{}, capacity), now: time.Now, quotas: q}
	g.busyTimeout.Store(int64(busyTimeout))
	g.storeBusy.Store(int64(storeBusyTimeout))
	g.lastProgress.Store(time.Now().UnixNano())
	return g
}

// enter admits a send of n messages and bytes for topic/group, or returns
// the busy answer. An admitted send calls leave when it is done (a method,
// not a returned closure: admitting a send allocates nothing).
func (g *sendGate) enter(ctx context.Context, req *remoting.Command, topic, group string, n, bytes int) (busy *remoting.Command) {
	if g == nil {
		return nil
	}
	if what, limit, ok := g.quotas.take(topic, group, n, bytes); !ok {
		g.busyQuota.Add(1)
		return remoting.NewResponse(req, remoting.SystemBusy, fmt.Sprintf(busyQuotaRemark, what, limit))
	}
	// The store-latency guard: a write stuck longer than storeBusy means
	// the disk is not keeping up; queueing more would only add latency.
	if g.writing.Load() > 0 && g.now().Sub(time.Unix(0, g.lastProgress.Load())) > time.Duration(g.storeBusy.Load()) {
		g.busyStore.Add(1)
		return remoting.NewResponse(req, remoting.SystemBusy, busyStoreRemark)
	}
	start := g.now()
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(time.Duration(g.busyTimeout.Load()))
		select {
		case g.slots <- struct{}{}:
			t.Stop()
		case <-t.C:
			g.busyQueue.Add(1)
			return remoting.NewResponse(req, remoting.SystemBusy, fmt.Sprintf(busyQueueRemark, g.now().Sub(start).Milliseconds(), len(g.slots)))
		case <-ctx.Done():
			t.Stop()
			return remoting.NewResponse(req, remoting.SystemBusy, "broker busy: request cancelled while queued")
		}
	}
	g.inflight.Add(1)
	return nil
}

// leave ends a send enter admitted.
func (g *sendGate) leave() {
	if g == nil {
		return
	}
	g.inflight.Add(-1)
	<-g.slots
}

// storeWrite marks a store write (the put of an admitted send) as under
// way for the store-latency guard; storeWritten marks its end.
func (g *sendGate) storeWrite() {
	if g != nil && g.writing.Add(1) == 1 {
		g.lastProgress.Store(g.now().UnixNano())
	}
}

func (g *sendGate) storeWritten() {
	if g != nil {
		g.lastProgress.Store(g.now().UnixNano())
		g.writing.Add(-1)
	}
}

// setBusyTimeout changes the thresholds at run time (UPDATE_BROKER_CONFIG).
func (g *sendGate) setBusyTimeout(queue, store time.Duration) {
	if g != nil {
		g.busyTimeout.Store(int64(queue))
		g.storeBusy.Store(int64(store))
	}
}

// FlowStats are the flow-control counters (metrics, broker status).
type FlowStats struct {
	BusyQueue, BusyStore, BusyQuota int64
	// DiskFull counts sends answered SERVICE_NOT_AVAILABLE for a full disk.
	DiskFull int64
	// StoreFailed counts sends answered SYSTEM_ERROR because the store had
	// disabled writes until reopen (a failed fsync or I/O error).
	StoreFailed int64
	InFlight    int64
	Capacity    int
}

// FlowStats reports how often sends were shed and why.
func (b *Broker) FlowStats() FlowStats {
	g := b.gate
	if g == nil {
		return FlowStats{}
	}
	return FlowStats{BusyQueue: g.busyQueue.Load(), BusyStore: g.busyStore.Load(), BusyQuota: g.busyQuota.Load(),
		DiskFull: g.diskFull.Load(), StoreFailed: g.storeFailed.Load(), InFlight: g.inflight.Load(), Capacity: cap(g.slots)}
}

// QuotaLimit is one rate quota: messages and bytes per second (0 = no
// limit on that dimension), with a burst of one second's worth.
type QuotaLimit struct {
	MessagesPerSec float64 `koanf:"messages_per_sec"`
	BytesPerSec    float64 `koanf:"bytes_per_sec"`
}

// QuotaConfig is broker.quota: per-topic and per-producer-group limits.
type QuotaConfig struct {
	Topics map[string]QuotaLimit `koanf:"topics"`
	Groups map[string]QuotaLimit `koanf:"groups"`
}

type bucket struct {
	mu          sync.Mutex
	limit       QuotaLimit
	msgs, bytes float64
	last        time.Time
}

// take removes n messages and b bytes worth of tokens if both are there.
func (k *bucket) take(now time.Time, n, b int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	el := now.Sub(k.last).Seconds()
	k.last = now
	if k.limit.MessagesPerSec > 0 {
		k.msgs = min(k.limit.MessagesPerSec, k.msgs+el*k.limit.MessagesPerSec)
		if k.msgs < float64(n) {
			return false
		}
	}
	if k.limit.BytesPerSec > 0 {
		k.bytes = min(k.limit.BytesPerSec, k.bytes+el*k.limit.BytesPerSec)
		if k.bytes < float64(b) {
			return false
		}
	}
	if k.limit.MessagesPerSec > 0 {
		k.msgs -= float64(n)
	}
	if k.limit.BytesPerSec > 0 {
		k.bytes -= float64(b)
	}
	return true
}

type quotas struct {
	topics, groups map[string]*bucket
	now            func() time.Time
}

func newQuotas(c QuotaConfig) *quotas {
	if len(c.Topics) == 0 && len(c.Groups) == 0 {
		return nil
	}
	q := &quotas{topics: map[string]*bucket{}, groups: map[string]*bucket{}, now: time.Now}
	start := time.Now()
	for k, l := range c.Topics {
		q.topics[k] = &bucket{limit: l, msgs: l.MessagesPerSec, bytes: l.BytesPerSec, last: start}
	}
	for k, l := range c.Groups {
		q.groups[k] = &bucket{limit: l, msgs: l.MessagesPerSec, bytes: l.BytesPerSec, last: start}
	}
	return q
}

func (q *quotas) take(topic, group string, n, b int) (what, limit string, ok bool) {
	if q == nil {
		return "", "", true
	}
	now := q.now()
	if k := q.topics[topic]; k != nil && !k.take(now, n, b) {
		return "topic " + topic, describe(k.limit), false
	}
	if k := q.groups[group]; k != nil && !k.take(now, n, b) {
		return "producer group " + group, describe(k.limit), false
	}
	return "", "", true
}

func describe(l QuotaLimit) string {
	switch {
	case l.MessagesPerSec > 0 && l.BytesPerSec > 0:
		return fmt.Sprintf("%g msg/s and %g B/s", l.MessagesPerSec, l.BytesPerSec)
	case l.MessagesPerSec > 0:
		return fmt.Sprintf("%g msg/s", l.MessagesPerSec)
	default:
		return fmt.Sprintf("%g B/s", l.BytesPerSec)
	}
}
