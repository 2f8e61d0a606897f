package e2etrace

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Ring is a fixed-size, lock-free ring of events: any number of
// goroutines Put at once (an atomic add claims a slot, a per-slot
// sequence publishes it, as a seqlock) and one Drain at a time takes the
// events put since the previous Drain. Memory is bounded: once more
// events are put than the ring holds between two drains, the oldest are
// overwritten, and Drain counts them (and any it finds half-written) as
// dropped. Put never blocks and never allocates.
type Ring struct {
	slots []slot
	mask  uint64
	head  atomic.Uint64 // events ever claimed

	mu      sync.Mutex // one Drain at a time
	tail    uint64     // head at the previous Drain
	dropped uint64
}

// slot holds one event: seq is 2i+1 while event i is written and 2i+2
// once it is complete. 64 bytes, one cache line.
type slot struct {
	seq atomic.Uint64
	w   [eventWords]atomic.Uint64
}

// NewRing returns a ring of at least n events (a power of two, at least
// 64).
func NewRing(n int) *Ring {
	if n < 64 {
		n = 64
	}
	size := uint64(1) << bits.Len64(uint64(n-1))
	return &Ring{slots: make([]slot, size), mask: size - 1}
}

// Cap is how many events the ring holds.
func (r *Ring) Cap() int { return len(r.slots) }

// Put records e.
func (r *Ring) Put(e *Event) {
	var w [eventWords]uint64
	e.pack(&w)
	i := r.head.Add(1) - 1
	s := &r.slots[i&r.mask]
	s.seq.Store(2*i + 1)
	for k := range w {
		s.w[k].Store(w[k])
	}
	s.seq.Store(2*i + 2)
}

// Drain appends to into the events put since the previous Drain, in the
// order their slots were claimed, and returns them with the number of
// events of that span lost (overwritten, or not complete yet).
func (r *Ring) Drain(into []Event) ([]Event, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head.Load()
	t := r.tail
	var lost uint64
	if n := uint64(len(r.slots)); h-t > n {
		lost = h - t - n
		t = h - n
	}
	var w [eventWords]uint64
	for i := t; i < h; i++ {
		s := &r.slots[i&r.mask]
		q := s.seq.Load()
		if q != 2*i+2 {
			lost++
			continue
		}
		for k := range w {
			w[k] = s.w[k].Load()
		}
		if s.seq.Load() != q {
			lost++
			continue
		}
		var e Event
		e.unpack(&w)
		into = append(into, e)
	}
	r.tail = h
	r.dropped += lost
	return into, lost
}

// Dropped is the number of events lost over all drains.
func (r *Ring) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
