package acl

import (
	"sync"
	"time"
)

// nonceCache remembers the (accessKey, nonce) pairs of accepted strict
// signatures for at least period (twice the signature window: a timestamp
// may be a window ahead of the clock, and is accepted for a window after
// it). It keeps two generations and drops the older one each period;
// each generation holds at most max entries, after which add fails (the
// request is refused: forgetting a nonce early would allow a replay).
type nonceCache struct {
	mu        sync.Mutex
	period    time.Duration
	max       int
	start     time.Time
	cur, prev map[string]struct{}
}

func newNonceCache(period time.Duration, max int) *nonceCache {
	return &nonceCache{period: period, max: max, cur: map[string]struct{}{}, prev: map[string]struct{}{}}
}

// add records key at now. It reports seen when key is already there and
// full when there is no room for it.
func (c *nonceCache) add(key string, now time.Time) (seen, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch age := now.Sub(c.start); {
	case c.start.IsZero() || age >= 2*c.period:
		clear(c.prev)
		clear(c.cur)
		c.start = now
	case age >= c.period:
		c.prev, c.cur = c.cur, c.prev
		clear(c.cur)
		c.start = now
	}
	if _, ok := c.cur[key]; ok {
		return true, false
	}
	if _, ok := c.prev[key]; ok {
		return true, false
	}
	if len(c.cur) >= c.max {
		return false, true
	}
	c.cur[key] = struct{}{}
	return false, false
}
