package storetest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// recorder is a testing.TB that records failures instead of failing the
// test, so the suite can be run against a store that must fail it.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fail()   { r.record("Fail") }
func (r *recorder) FailNow() {
	r.record("FailNow")
	runtime.Goexit()
}
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.errors) > 0 }

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.errors = append(r.errors, s)
	r.mu.Unlock()
}

// runRecorded runs f with a recorder on a goroutine of its own (a fatal
// failure ends that goroutine, as it ends a test's).
func runRecorded(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// memStore is a small in-memory store.Store for the suite's own tests.
// With keep set it makes the mistake the contract forbids: it keeps the
// appended messages as given (keepExt: the *message.Ext itself; keepBody:
// a copy of the struct that still shares Body and Properties) and encodes
// them when they are read.
type memStore struct {
	mu       sync.Mutex
	keep     string // "", "ext" or "body"
	msgs     []*message.Ext
	queues   map[store.Queue][]int // queue offset -> index in msgs
	keyIndex map[string][]int
}

func newMemStore(keep string) *memStore {
	return &memStore{keep: keep, queues: map[store.Queue][]int{}, keyIndex: map[string][]int{}}
}

var _ store.Store = (*memStore)(nil)

func (s *memStore) Append(_ context.Context, msgs []store.Message) ([]store.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := make([]store.Position, len(msgs))
	for i, m := range msgs {
		var e *message.Ext
		switch s.keep {
		case "ext":
			e = m.Ext
		case "body":
			c := *m.Ext
			e = &c
		default:
			c := *m.Ext
			c.Body = append([]byte(nil), m.Body...)
			c.Properties = m.Properties.Clone()
			e = &c
		}
		q := store.Queue{Topic: m.Topic, ID: m.QueueID}
		pos[i] = store.Position{CommitLogOffset: int64(len(s.msgs)), QueueOffset: int64(len(s.queues[q])), StoreTimestamp: time.Now().UnixMilli()}
		s.queues[q] = append(s.queues[q], len(s.msgs))
		for _, k := range strings.Fields(m.Properties[message.PropertyKeys]) {
			s.keyIndex[m.Topic+"\x00"+k] = append(s.keyIndex[m.Topic+"\x00"+k], len(s.msgs))
		}
		s.msgs = append(s.msgs, e)
	}
	return pos, nil
}

// record encodes message i as stored.
func (s *memStore) record(i int) []byte {
	m := *s.msgs[i]
	q := store.Queue{Topic: m.Topic, ID: m.QueueID}
	for off, j := range s.queues[q] {
		if j == i {
			m.QueueOffset = int64(off)
		}
	}
	m.CommitLogOffset = int64(i)
	rec, err := message.EncodeStored(&m)
	if err != nil {
		return nil
	}
	return rec
}

func (s *memStore) Read(_ context.Context, q store.Queue, offset int64, opts store.ReadOptions, into *store.ReadResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	into.Reset()
	idx := s.queues[q]
	into.MaxOffset = int64(len(idx))
	if offset >= int64(len(idx)) || offset < 0 {
		into.Status, into.NextOffset = store.OffsetOverflowOne, offset
		return nil
	}
	max := opts.MaxMessages
	if max <= 0 {
		max = 32
	}
	for off := offset; off < int64(len(idx)) && len(into.Records) < max; off++ {
		rec := s.record(idx[off])
		into.Records = append(into.Records, rec)
		into.QueueOffsets = append(into.QueueOffsets, off)
		into.Bytes += len(rec)
		into.NextOffset = off + 1
	}
	return nil
}

func (s *memStore) Lookup(_ context.Context, off int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off < 0 || off >= int64(len(s.msgs)) {
		return nil, store.ErrNotFound
	}
	return s.record(int(off)), nil
}

func (s *memStore) QueryByKey(_ context.Context, topic, key string, _, _ int64, max int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, i := range s.keyIndex[topic+"\x00"+key] {
		if len(out) < max {
			out = append(out, s.record(i))
		}
	}
	return out, nil
}

func (s *memStore) Offsets(q store.Queue) (int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return 0, int64(len(s.queues[q])), nil
}

func (s *memStore) OffsetByTime(context.Context, store.Queue, int64) (int64, error) { return 0, nil }
func (s *memStore) DeleteBefore(context.Context, time.Time) (int64, error)          { return 0, nil }
func (s *memStore) Close() error                                                    { return nil }

func TestCheckBorrowedInputs(t *testing.T) {
	tests := []struct {
		name string
		keep string
		want []string // what the failures name; none for a correct store
	}{
		{name: "copies what it keeps", keep: ""},
		{name: "keeps the *message.Ext", keep: "ext", want: []string{"kept the caller's body", "kept the caller's Properties map", "stored in Scribbled"}},
		{name: "keeps Body and Properties", keep: "body", want: []string{"kept the caller's body", "kept the caller's Properties map"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRecorded(t, func(tb testing.TB) { storetest.CheckBorrowedInputs(tb, newMemStore(tt.keep)) })
			if len(tt.want) == 0 {
				assert.Empty(t, r.errors, "the check fails a store that copies")
				return
			}
			assert.True(t, r.Failed(), "the check passes a store that keeps borrowed data")
			all := strings.Join(r.errors, "\n")
			for _, w := range tt.want {
				assert.Contains(t, all, w)
			}
		})
	}
}
