package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// Consumer delay (quiver_consumer_delay_seconds) is rocketmq-exporter's
// rocketmq_group_get_latency_by_storetime: now minus the store time of
// the next message a group has to consume. Only that head message is
// read, one record per lagging queue, and store times are remembered by
// (queue, offset): a group that has not moved costs no read at the next
// scrape. Uncached reads are bounded per scrape (delayReadBudget, within
// delayScrapeTimeout); queues beyond the budget are counted in
// quiver_consumer_delay_unmeasured_queues and measured at a later scrape.
const (
	delayReadBudget    = 512
	delayScrapeTimeout = 2 * time.Second
)

type delayKey struct {
	q   store.Queue
	off int64
}

// delayCache keeps the store times read at the last scrape.
type delayCache struct {
	mu    sync.Mutex
	times map[delayKey]int64
	// budget overrides delayReadBudget (tests).
	budget int
}

// delayScrape measures one scrape's delays; begin locks the cache, end
// unlocks it.
type delayScrape struct {
	c          *delayCache
	st         store.Store
	ctx        context.Context
	cancel     context.CancelFunc
	now        time.Time
	next       map[delayKey]int64
	reads      int
	unmeasured int
	res        store.ReadResult
}

func (c *delayCache) begin(st store.Store) *delayScrape {
	c.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), delayScrapeTimeout)
	return &delayScrape{c: c, st: st, ctx: ctx, cancel: cancel, now: time.Now(), next: map[delayKey]int64{}}
}

// delay is the age of the message at offset of q, 0 when offset has
// reached end (caught up); ok is false when it was not measured.
func (d *delayScrape) delay(q store.Queue, offset, end int64) (time.Duration, bool) {
	if offset >= end {
		return 0, true
	}
	k := delayKey{q, offset}
	ts, ok := d.next[k]
	if !ok {
		ts, ok = d.c.times[k]
	}
	if !ok {
		budget := d.c.budget
		if budget == 0 {
			budget = delayReadBudget
		}
		if d.reads >= budget || d.ctx.Err() != nil {
			d.unmeasured++
			return 0, false
		}
		d.reads++
		d.res.Reset()
		err := d.st.Read(d.ctx, q, offset, store.ReadOptions{MaxMessages: 1, MaxBytes: 1}, &d.res)
		if err != nil || len(d.res.Records) == 0 {
			d.unmeasured++
			return 0, false
		}
		h, err := message.PeekHeader(d.res.Records[0])
		if err != nil {
			d.unmeasured++
			return 0, false
		}
		ts = h.StoreTimestamp
	}
	d.next[k] = ts
	return max(d.now.Sub(time.UnixMilli(ts)), 0), true
}

// end keeps this scrape's store times (only those: the cache stays as
// large as the number of lagging queues), unlocks the cache and returns
// how many lagging queues went unmeasured.
func (d *delayScrape) end() int {
	d.cancel()
	d.c.times = d.next
	d.c.mu.Unlock()
	return d.unmeasured
}
