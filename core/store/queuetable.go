package store

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
)

// QueueTable maps each queue to an engine's state for it (*T). Lookups
// take a read lock, so the hot paths (reads, the writer finding a known
// queue) do not serialize; GetOrCreate checks again under the write lock,
// so concurrent callers for one queue all get the same state.
type QueueTable[T any] struct {
	mu       sync.RWMutex
	m        map[Queue]*T
	newState func(Queue) *T
}

// NewQueueTable returns an empty table whose GetOrCreate makes states
// with newState (called with the write lock held).
func NewQueueTable[T any](newState func(Queue) *T) *QueueTable[T] {
	return &QueueTable[T]{m: map[Queue]*T{}, newState: newState}
}

// Get returns the state of q, or nil when q has none.
func (t *QueueTable[T]) Get(q Queue) *T {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[q]
}

// GetOrCreate returns the state of q, creating it when q has none.
func (t *QueueTable[T]) GetOrCreate(q Queue) *T {
	if v := t.Get(q); v != nil {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.m[q]
	if v == nil {
		v = t.newState(q)
		t.m[q] = v
	}
	return v
}

// Set makes v the state of q, replacing any (recovery).
func (t *QueueTable[T]) Set(q Queue, v *T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[q] = v
}

// Delete drops the state of q.
func (t *QueueTable[T]) Delete(q Queue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, q)
}

// DeleteTopic drops the states of the queues of topic, in one critical
// section, and returns them.
func (t *QueueTable[T]) DeleteTopic(topic string) (dropped []*T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for q, v := range t.m {
		if q.Topic == topic {
			dropped = append(dropped, v)
			delete(t.m, q)
		}
	}
	return dropped
}

// Len returns the number of queues with a state.
func (t *QueueTable[T]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// Snapshot returns the states, in no order. The table is not locked
// while the caller uses them: states may be added or dropped meanwhile.
func (t *QueueTable[T]) Snapshot() []*T {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.AppendSeq(make([]*T, 0, len(t.m)), maps.Values(t.m))
}

// Exclusive calls f for every state with the write lock held, so no
// state is created, replaced or dropped until it returns (closing every
// queue's files). f must not call back into the table.
func (t *QueueTable[T]) Exclusive(f func(*T)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.m {
		f(v)
	}
}

// Sorted returns the queues whose state keep accepts (called with the
// read lock held), sorted by topic and id.
func (t *QueueTable[T]) Sorted(keep func(*T) bool) []Queue {
	t.mu.RLock()
	out := make([]Queue, 0, len(t.m))
	for q, v := range t.m {
		if keep(v) {
			out = append(out, q)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b Queue) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.ID, b.ID))
	})
	return out
}
