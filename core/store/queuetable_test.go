package store

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testState struct {
	q Queue
	n int
}

func newTestTable(made *atomic.Int64) *QueueTable[testState] {
	return NewQueueTable(func(q Queue) *testState {
		if made != nil {
			made.Add(1)
		}
		return &testState{q: q}
	})
}

func TestQueueTableGetOrCreate(t *testing.T) {
	var made atomic.Int64
	tb := newTestTable(&made)
	q := Queue{Topic: "T", ID: 1}
	assert.Nil(t, tb.Get(q), "absent queue")
	v := tb.GetOrCreate(q)
	require.NotNil(t, v)
	assert.Equal(t, q, v.q, "made by the constructor for q")
	assert.Same(t, v, tb.GetOrCreate(q))
	assert.Same(t, v, tb.Get(q))
	assert.Equal(t, int64(1), made.Load())
	assert.Equal(t, 1, tb.Len())

	w := &testState{q: q, n: 7}
	tb.Set(q, w)
	assert.Same(t, w, tb.Get(q), "Set replaces")
	tb.Delete(q)
	assert.Nil(t, tb.Get(q))
	assert.Equal(t, 0, tb.Len())
}

func TestQueueTableDeleteTopic(t *testing.T) {
	tb := newTestTable(nil)
	for _, q := range []Queue{{"A", 0}, {"A", 1}, {"AB", 0}, {"B", 2}} {
		tb.GetOrCreate(q)
	}
	got := tb.DeleteTopic("A")
	var qs []Queue
	for _, v := range got {
		qs = append(qs, v.q)
	}
	assert.ElementsMatch(t, []Queue{{"A", 0}, {"A", 1}}, qs)
	assert.Nil(t, tb.Get(Queue{"A", 0}))
	assert.NotNil(t, tb.Get(Queue{"AB", 0}), "a topic sharing the prefix stays")
	assert.Empty(t, tb.DeleteTopic("A"))
	assert.Equal(t, 2, tb.Len())
}

func TestQueueTableSorted(t *testing.T) {
	tests := []struct {
		name string
		give []Queue
		keep func(*testState) bool
		want []Queue
	}{
		{"empty", nil, func(*testState) bool { return true }, []Queue{}},
		{
			"by topic then id",
			[]Queue{{"b", 1}, {"a", 10}, {"a", 2}, {"B", 0}, {"a", -1}},
			func(*testState) bool { return true },
			[]Queue{{"B", 0}, {"a", -1}, {"a", 2}, {"a", 10}, {"b", 1}},
		},
		{
			"filtered",
			[]Queue{{"b", 1}, {"a", 10}, {"a", 2}},
			func(v *testState) bool { return v.q.ID != 10 },
			[]Queue{{"a", 2}, {"b", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTestTable(nil)
			for _, q := range tt.give {
				tb.GetOrCreate(q)
			}
			assert.Equal(t, tt.want, tb.Sorted(tt.keep))
		})
	}
}

func TestQueueTableSnapshot(t *testing.T) {
	tb := newTestTable(nil)
	want := []Queue{{"A", 0}, {"A", 1}, {"B", 0}}
	for _, q := range want {
		tb.GetOrCreate(q)
	}
	var seen []Queue
	for _, v := range tb.Snapshot() {
		seen = append(seen, v.q)
		// The table is not locked: it may change, the snapshot does not.
		tb.Delete(v.q)
		tb.GetOrCreate(Queue{"C", v.q.ID})
	}
	assert.ElementsMatch(t, want, seen)
	assert.Nil(t, tb.Get(Queue{"A", 0}))
	assert.Len(t, tb.Snapshot(), 2, "C/0 and C/1")
}

func TestQueueTableExclusive(t *testing.T) {
	tb := newTestTable(nil)
	for _, q := range []Queue{{"A", 0}, {"A", 1}} {
		tb.GetOrCreate(q)
	}
	tb.Exclusive(func(v *testState) { v.n++ })
	assert.Equal(t, 1, tb.Get(Queue{"A", 0}).n)
	assert.Equal(t, 1, tb.Get(Queue{"A", 1}).n)
}

// TestQueueTableConcurrent races GetOrCreate, Get, Snapshot, Sorted and
// DeleteTopic (run it with -race): every caller of GetOrCreate for a
// queue gets the one state made for it, and the constructor runs once per
// queue.
func TestQueueTableConcurrent(t *testing.T) {
	const goroutines, queues = 8, 64
	var made atomic.Int64
	tb := newTestTable(&made)
	got := make([][]*testState, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		got[g] = make([]*testState, queues)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range queues {
				// Each goroutine walks the queues from a different point.
				id := int32((i + g*queues/goroutines) % queues)
				got[g][id] = tb.GetOrCreate(Queue{Topic: "T", ID: id})
				_ = tb.Get(Queue{Topic: "T", ID: (id + 1) % queues})
			}
		}()
	}
	wg.Add(1)
	go func() { // readers and a writer on another topic
		defer wg.Done()
		<-start
		for i := range 50 {
			_ = tb.Snapshot()
			_ = tb.Sorted(func(*testState) bool { return true })
			tb.GetOrCreate(Queue{Topic: "U", ID: int32(i)})
			tb.DeleteTopic("U")
		}
	}()
	close(start)
	wg.Wait()
	for id := range queues {
		v := tb.Get(Queue{Topic: "T", ID: int32(id)})
		require.NotNil(t, v)
		for g := range goroutines {
			assert.Same(t, v, got[g][id], "goroutine %d, queue %d", g, id)
		}
	}
	assert.Equal(t, int64(queues+50), made.Load(), "one state per queue (64 of T, 50 of U)")
	assert.Equal(t, queues, tb.Len())
}
