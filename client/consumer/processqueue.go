package consumer

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
)

// processQueue caches the pulled, not yet consumed messages of one queue.
type processQueue struct {
	mq      client.MessageQueue
	mu      sync.Mutex
	offsets []int64 // sorted
	msgs    map[int64]*client.MessageExt
	size    int64
	high    int64 // highest offset ever cached
	dropped atomic.Bool
	locked  atomic.Bool
	lockAt  atomic.Int64 // unix nanos of the last successful lock
	wake    chan struct{}
	stop    chan struct{}
	stopped sync.Once
}

func newProcessQueue(mq client.MessageQueue) *processQueue {
	return &processQueue{mq: mq, msgs: map[int64]*client.MessageExt{}, high: -1, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (pq *processQueue) drop() {
	pq.dropped.Store(true)
	pq.stopped.Do(func() { close(pq.stop) })
}

func (pq *processQueue) signal() {
	select {
	case pq.wake <- struct{}{}:
	default:
	}
}

// put caches msgs (ascending offsets) and returns how many were new.
func (pq *processQueue) put(msgs []*client.MessageExt) int {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n := 0
	for _, m := range msgs {
		if _, ok := pq.msgs[m.QueueOffset]; ok {
			continue
		}
		pq.msgs[m.QueueOffset] = m
		i := sort.Search(len(pq.offsets), func(i int) bool { return pq.offsets[i] >= m.QueueOffset })
		pq.offsets = append(pq.offsets, 0)
		copy(pq.offsets[i+1:], pq.offsets[i:])
		pq.offsets[i] = m.QueueOffset
		pq.size += int64(len(m.Body))
		if m.QueueOffset > pq.high {
			pq.high = m.QueueOffset
		}
		n++
	}
	return n
}

// remove drops consumed msgs and returns the offset to commit: the lowest
// cached offset, or one past the highest ever cached when none is left;
// -1 when nothing was ever cached.
func (pq *processQueue) remove(msgs []*client.MessageExt) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if _, ok := pq.msgs[m.QueueOffset]; !ok {
			continue
		}
		delete(pq.msgs, m.QueueOffset)
		pq.size -= int64(len(m.Body))
		i := sort.Search(len(pq.offsets), func(i int) bool { return pq.offsets[i] >= m.QueueOffset })
		if i < len(pq.offsets) && pq.offsets[i] == m.QueueOffset {
			pq.offsets = append(pq.offsets[:i], pq.offsets[i+1:]...)
		}
	}
	if len(pq.offsets) > 0 {
		return pq.offsets[0]
	}
	if pq.high < 0 {
		return -1
	}
	return pq.high + 1
}

// first returns up to n cached messages with the lowest offsets.
func (pq *processQueue) first(n int) []*client.MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if n > len(pq.offsets) {
		n = len(pq.offsets)
	}
	out := make([]*client.MessageExt, n)
	for i := 0; i < n; i++ {
		out[i] = pq.msgs[pq.offsets[i]]
	}
	return out
}

// stats returns the cached count, bytes and offset span.
func (pq *processQueue) stats() (count int, size int64, span int64) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	count = len(pq.offsets)
	if count > 0 {
		span = pq.offsets[count-1] - pq.offsets[0]
	}
	return count, pq.size, span
}

func (pq *processQueue) lockExpired(maxAge time.Duration) bool {
	return time.Since(time.Unix(0, pq.lockAt.Load())) > maxAge
}
