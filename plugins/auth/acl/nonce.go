package acl

import (
	"hash/maphash"
	"sync"
	"time"
)

// nonceCache remembers the (accessKey, nonce) pairs of accepted strict
// signatures for at least period (twice the signature window: a timestamp
// may be a window ahead of the clock, and is accepted for a window after
// it). It keeps two generations and drops the older one each period;
// each generation holds at most max entries, after which add fails (the
// request is refused: forgetting a nonce early would allow a replay).
// Keys are kept as 64-bit hashes with a per-process random seed (about
// 20 bytes an entry); a collision refuses a fresh request as a replay
// with a chance of one in 2^64 per pair, and cannot be aimed at without
// the seed.
type nonceCache struct {
	mu        sync.Mutex
	seed      maphash.Seed
	period    time.Duration
	max       int
	start     time.Time
	cur, prev map[uint64]struct{}
}

func newNonceCache(period time.Duration, max int) *nonceCache {
	return &nonceCache{seed: maphash.MakeSeed(), period: period, max: max, cur: map[uint64]struct{}{}, prev: map[uint64]struct{}{}}
}

// add records key at now. It reports seen when key is already there and
// full when there is no room for it.
func (c *nonceCache) add(key string, now time.Time) (seen, full bool) {
	h := maphash.String(c.seed, key)
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
	if _, ok := c.cur[h]; ok {
		return true, false
	}
	if _, ok := c.prev[h]; ok {
		return true, false
	}
	if len(c.cur) >= c.max {
		return false, true
	}
	c.cur[h] = struct{}{}
	return false, false
}
