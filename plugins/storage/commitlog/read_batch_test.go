package commitlog

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

const interleavedTopic = "Interleaved"

func interleavedBody(q, i int) string {
	return fmt.Sprintf("q%d-%04d-%s", q, i, strings.Repeat("b", 100+i%7*10))
}

// fillInterleaved appends perQueue messages to each of nq queues the way
// producers spreading over queues do: one message per queue in turn, so a
// queue's records have the other queues' records between them. Every
// third message is tagged "odd" (the rest "even").
func fillInterleaved(t testing.TB, s *Store, nq, perQueue int) [][]store.Position {
	t.Helper()
	pos := make([][]store.Position, nq)
	for i := 0; i < perQueue; i++ {
		var batch []store.Message
		for q := 0; q < nq; q++ {
			tag := "even"
			if i%3 == 1 {
				tag = "odd"
			}
			batch = append(batch, storetest.Msg(interleavedTopic, int32(q), interleavedBody(q, i), map[string]string{"TAGS": tag}))
		}
		p, err := s.Append(bg, batch)
		require.NoError(t, err)
		for q := 0; q < nq; q++ {
			pos[q] = append(pos[q], p[q])
		}
	}
	return pos
}

// readCounted reads q at offset with span reads on (gap 0: the default) or
// off (gap -1) and returns a copy of the result and the reads it made.
func readCounted(t *testing.T, s *Store, q store.Queue, offset int64, opts store.ReadOptions, gap int64) (store.ReadResult, int64) {
	t.Helper()
	s.ra.gap.Store(gap)
	defer s.ra.gap.Store(0)
	var r store.ReadResult
	before := s.ra.reads.Load()
	require.NoError(t, s.Read(bg, q, offset, opts, &r))
	n := s.ra.reads.Load() - before
	// Runs are the records' bytes, in order.
	var recs, runs []byte
	for _, rec := range r.Records {
		recs = append(recs, rec...)
	}
	for _, run := range r.Runs {
		runs = append(runs, run...)
	}
	assert.True(t, bytes.Equal(recs, runs), "runs hold the records' bytes")
	assert.LessOrEqual(t, len(r.Runs), len(r.Records))
	return r, n
}

func bodies(t *testing.T, r store.ReadResult) []string {
	t.Helper()
	var out []string
	for i, rec := range r.Records {
		m, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		assert.Equal(t, r.QueueOffsets[i], m.QueueOffset)
		out = append(out, string(m.Body))
	}
	return out
}

// TestReadInterleavedQueues reads queues whose records interleave in the
// log: the records are those of the queue, in order, and one read serves
// a whole batch where it took one read per record before.
func TestReadInterleavedQueues(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	const nq, per = 4, 100
	fillInterleaved(t, s, nq, per)

	for q := 0; q < nq; q++ {
		qq := store.Queue{Topic: interleavedTopic, ID: int32(q)}
		r, reads := readCounted(t, s, qq, 10, store.ReadOptions{}, 0)
		require.Equal(t, store.Found, r.Status)
		var want []string
		for i := 10; i < 10+store.DefaultMaxMessages; i++ {
			want = append(want, interleavedBody(q, i))
		}
		assert.Equal(t, want, bodies(t, r))
		assert.Equal(t, int64(10+store.DefaultMaxMessages), r.NextOffset)
		assert.Equal(t, int64(1), reads, "one read for the batch")
		assert.Len(t, r.Runs, 1, "the copied records make one run")

		off, readsOff := readCounted(t, s, qq, 10, store.ReadOptions{}, -1)
		assert.Equal(t, int64(store.DefaultMaxMessages), readsOff, "without spans: one read per record")
		assert.Equal(t, bodies(t, off), bodies(t, r))
	}
}

// TestReadSpansAgree reads the same queues with span reads on and off
// under filters, matchers and limits, on small segments (spans stop at
// segment ends) and large ones: every result is the same, and span reads
// never take more reads.
func TestReadSpansAgree(t *testing.T) {
	isOdd := message.TagsHashCode("odd")
	tests := []struct {
		name string
		give store.ReadOptions
	}{
		{name: "defaults"},
		{name: "max messages", give: store.ReadOptions{MaxMessages: 5}},
		{name: "max bytes", give: store.ReadOptions{MaxBytes: 1500}},
		{name: "many", give: store.ReadOptions{MaxMessages: 200, MaxBytes: 1 << 20}},
		{name: "filter", give: store.ReadOptions{Filter: func(tc int64) bool { return tc != isOdd }}},
		{name: "match", give: store.ReadOptions{MaxMessages: 64, Match: func(rec []byte) bool {
			return !bytes.Contains(rec, []byte("odd"))
		}}},
		{name: "match none", give: store.ReadOptions{Match: func([]byte) bool { return false }}},
		{name: "small scan", give: store.ReadOptions{MaxScan: 7, MaxMessages: 64}},
	}
	for _, segSize := range []int64{minSegmentSize, 1 << 30} {
		t.Run(fmt.Sprint(segSize), func(t *testing.T) {
			cfg := smallConfig(segSize)
			s := openStore(t, cfg, settings(t, store.FlushAsync))
			defer s.Close()
			const nq, per = 5, 120
			fillInterleaved(t, s, nq, per)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					for q := 0; q < nq; q++ {
						qq := store.Queue{Topic: interleavedTopic, ID: int32(q)}
						for off := int64(0); off < per; {
							on, readsOn := readCounted(t, s, qq, off, tt.give, 0)
							old, readsOld := readCounted(t, s, qq, off, tt.give, -1)
							require.Equal(t, old.Status, on.Status, "queue %d offset %d", q, off)
							assert.Equal(t, old.QueueOffsets, on.QueueOffsets)
							assert.Equal(t, old.NextOffset, on.NextOffset)
							assert.Equal(t, old.Bytes, on.Bytes)
							assert.Equal(t, bodies(t, old), bodies(t, on))
							assert.LessOrEqual(t, readsOn, readsOld)
							require.Greater(t, on.NextOffset, off)
							off = on.NextOffset
						}
					}
				})
			}
		})
	}
}

// TestReadSpanDamage damages a record inside a span (of the queue read)
// and one in a gap (of another queue): the read loses only the damaged
// record of its own queue, records the damage once, and the other queue
// loses only its own.
func TestReadSpanDamage(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	defer s.Close()
	const nq, per = 4, 40
	pos := fillInterleaved(t, s, nq, per)
	require.NoError(t, s.Flush(bg))
	// A body byte of queue 0's record 5 and of queue 2's record 6.
	for _, v := range []struct {
		q, i int
	}{{0, 5}, {2, 6}} {
		p := pos[v.q][v.i]
		rec, err := s.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
		at := bytes.Index(rec, []byte(interleavedBody(v.q, v.i)))
		require.Positive(t, at)
		phys := p.CommitLogOffset + int64(at) + 3
		writeAt(t, filepath.Join(set.Dir, s.segmentFile(phys)), phys%s.segSize, []byte{0})
	}
	q0 := store.Queue{Topic: interleavedTopic, ID: 0}
	r, reads := readCounted(t, s, q0, 0, store.ReadOptions{}, 0)
	require.Equal(t, store.Found, r.Status)
	assert.Equal(t, int64(2), reads, "one read per entry block: the batch is refilled after the damaged record")
	var want []string
	for i := 0; i < store.DefaultMaxMessages+1; i++ {
		if i != 5 {
			want = append(want, interleavedBody(0, i))
		}
	}
	assert.Equal(t, want, bodies(t, r), "only the damaged record is skipped")
	assert.Equal(t, int64(store.DefaultMaxMessages+1), r.NextOffset)
	assert.Equal(t, int64(1), s.Skipped())
	require.Len(t, s.Damage(), 1)
	assert.Equal(t, pos[0][5].CommitLogOffset, s.Damage()[0].Offset)

	q2 := store.Queue{Topic: interleavedTopic, ID: 2}
	r2, _ := readCounted(t, s, q2, 0, store.ReadOptions{MaxMessages: per}, 0)
	got := bodies(t, r2)
	assert.Len(t, got, per-1)
	assert.NotContains(t, got, interleavedBody(2, 6))
	assert.Equal(t, int64(2), s.Skipped())
}
