package grpc

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// liteMemoryTopics is how many lite topics TestLiteIndexMemory makes:
// QUIVER_LITE_TOPICS, else 100,000.
func liteMemoryTopics(t testing.TB) int {
	if v := os.Getenv("QUIVER_LITE_TOPICS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 100_000
}

// TestLiteIndexMemory: an idle lite topic with one message, written and
// read by one group, costs under 1 KiB of heap in the index.
func TestLiteIndexMemory(t *testing.T) {
	n := liteMemoryTopics(t)
	cfg := defaultLiteConfig()
	cfg.TopicQuota = n
	x := newLiteIndex(cfg)
	names := make([]string, n)
	for i := range names {
		names[i] = "session-" + strconv.Itoa(i)
	}
	before := heapInUse()
	now := time.Now().UnixMilli()
	x.mu.Lock()
	c := x.client(liteSubKey{client: "gw", group: "gateway", parent: "chat"})
	for i, name := range names {
		lt, err := x.ensure("chat", name, now)
		require.NoError(t, err)
		x.add(lt, 0, int64(i)*200, now)
		// read by one group: subscribed, delivered, acked, unsubscribed
		_, err = x.subscribe(c, lt, nil, nil)
		require.NoError(t, err)
		ds := x.take(c, 1, time.Minute, now)
		require.Len(t, ds, 1)
		_, moved, err := x.ack("chat", name, "gateway", liteHandle(ds[0]))
		require.NoError(t, err)
		require.Equal(t, int64(1), moved)
		x.unsubscribe(c, lt)
	}
	x.mu.Unlock()
	after := heapInUse()
	per := float64(after-before) / float64(n)
	t.Logf("%d lite topics: %.0f bytes each (heap, the names of %d bytes included)", n, per, len(names[n-1]))
	assert.Less(t, per, 1024.0, "bytes per idle lite topic")
	runtime.KeepAlive(names)
	runtime.KeepAlive(x)
}

// TestLiteSweepBounded: one sweep tick deletes at most sweep_batch lite
// topics, and the ticks together delete every expired one; a tick stops
// once it has held the index liteSweepBudget (a clock that moves 1ms each
// time it is read), and it allocates nothing while it holds the index
// (the expired topics go into the caller's buffer): an allocation under
// the lock could make the sweep pay the collector's mark assist there.
func TestLiteSweepBounded(t *testing.T) {
	cfg := defaultLiteConfig()
	cfg.TTL = time.Minute
	cfg.SweepBatch = 100
	x := newLiteIndex(cfg)
	old := time.Now().Add(-time.Hour).UnixMilli()
	now := time.Now().UnixMilli()
	for i := range 1000 {
		at := old
		if i%10 == 0 {
			at = now // 100 stay
		}
		lt, err := x.ensure("chat", "s"+strconv.Itoa(i), at)
		require.NoError(t, err)
		x.add(lt, 0, int64(i), at)
	}
	buf := make([]liteExpired, 0, cfg.SweepBatch)
	total := 0
	for i := 0; i < 1000 && total < 900; i++ { // a sweep may stop short on its time budget
		gone, _ := x.sweep(now, buf[:0])
		assert.LessOrEqual(t, len(gone), 100)
		total += len(gone)
	}
	gone, _ := x.sweep(now, buf[:0])
	assert.Empty(t, gone)
	assert.Equal(t, 900, total)
	assert.Len(t, x.all, 100)
	for i, lt := range x.all {
		assert.Equal(t, int32(i), lt.pos)
		assert.Equal(t, now, lt.last)
	}

	// The time budget, on a clock that moves 1ms a reading.
	cfg.SweepBatch = 4096
	x = newLiteIndex(cfg)
	for i := range 1000 {
		lt, err := x.ensure("chat", "s"+strconv.Itoa(i), old)
		require.NoError(t, err)
		x.add(lt, 0, int64(i), old)
	}
	clock := time.Now()
	x.clock = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	gone, more := x.sweep(now, make([]liteExpired, 0, cfg.SweepBatch))
	assert.True(t, more)
	assert.NotEmpty(t, gone)
	assert.LessOrEqual(t, len(gone), int(liteSweepBudget/time.Millisecond+2)*liteSweepCheck, "stopped once the budget was spent")

	// No allocation under the lock: each run (a warm-up and five) deletes
	// a full batch.
	cfg.SweepBatch = 1000
	x = newLiteIndex(cfg)
	for i := range 20_000 {
		lt, err := x.ensure("chat", "s"+strconv.Itoa(i), old)
		require.NoError(t, err)
		x.add(lt, 0, int64(i), old)
	}
	x.clock = func() time.Time { return clock } // the budget never runs out
	buf = make([]liteExpired, 0, cfg.SweepBatch)
	short := 0
	allocs := testing.AllocsPerRun(5, func() {
		gone, _ := x.sweep(now, buf[:0])
		if len(gone) != 1000 {
			short++
		}
		clear(gone)
	})
	assert.Zero(t, short, "sweeps that deleted fewer than a batch")
	assert.Zero(t, allocs, "allocations in one sweep of 1000 deletions")
	assert.Len(t, x.all, 20_000-6*1000)
}

// TestLiteJournalTornTail: a record cut by a crash is dropped at open,
// the ones before it kept.
func TestLiteJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	j, err := openLiteJournal(dir, nil)
	require.NoError(t, err)
	recs := []liteRecord{
		{kind: liteRecOffset, parent: "chat", name: "s1", group: "g", value: 7},
		{kind: liteRecDelete, parent: "chat", name: "s2", value: 1234},
	}
	require.NoError(t, j.append(recs))
	require.NoError(t, j.append([]liteRecord{{kind: liteRecOffset, parent: "chat", name: "s3", group: "g", value: 9}}))
	require.NoError(t, j.close())
	path := dir + "/lite.journal"
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-3))
	var got []liteRecord
	_, err = readLiteJournal(path, func(r liteRecord) { got = append(got, r) })
	require.NoError(t, err)
	assert.Equal(t, recs, got)
}

// BenchmarkLiteCreate times making a lite topic with its first message in
// the index (the send's own put aside); it reports the p99.
func BenchmarkLiteCreate(b *testing.B) {
	cfg := defaultLiteConfig()
	cfg.TopicQuota = b.N + 1
	x := newLiteIndex(cfg)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		name := "session-" + strconv.Itoa(i)
		start := time.Now()
		mu := x.stripe("chat", name)
		mu.Lock()
		x.mu.Lock()
		lt, err := x.ensure("chat", name, start.UnixMilli())
		if err != nil {
			b.Fatal(err)
		}
		x.add(lt, lt.next(), int64(i), start.UnixMilli())
		x.mu.Unlock()
		mu.Unlock()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// TestLiteJournalCompact: a compaction while serving keeps the deletions,
// the last offset of each group and lite topic, and what was appended
// while it ran; appends go on into the new file.
func TestLiteJournalCompact(t *testing.T) {
	dir := t.TempDir()
	j, err := openLiteJournal(dir, nil)
	require.NoError(t, err)
	defer j.close() //nolint:errcheck // checked below
	require.NoError(t, j.append([]liteRecord{{kind: liteRecDelete, parent: "chat", name: "gone", value: 99}}))
	for i := range 1000 {
		require.NoError(t, j.append([]liteRecord{{kind: liteRecOffset, parent: "chat", name: "s" + strconv.Itoa(i%10), group: "g", value: int64(i)}}))
	}
	before := j.size
	calls := 0
	require.NoError(t, j.compact(func() []liteRecord {
		calls++
		switch calls {
		case 1: // the index's state, one chunk
			var recs []liteRecord
			for k := range 10 {
				recs = append(recs, liteRecord{kind: liteRecOffset, parent: "chat", name: "s" + strconv.Itoa(k), group: "g", value: int64(990 + k)})
			}
			// An ack racing the compaction.
			require.NoError(t, j.append([]liteRecord{{kind: liteRecOffset, parent: "chat", name: "s3", group: "g", value: 1003}}))
			return recs
		}
		return nil
	}))
	assert.Less(t, j.size, before/10)
	require.NoError(t, j.append([]liteRecord{{kind: liteRecOffset, parent: "chat", name: "s4", group: "g", value: 1004}}))
	require.NoError(t, j.close())
	final := map[string]int64{}
	var deleted []string
	_, err = readLiteJournal(dir+"/lite.journal", func(r liteRecord) {
		if r.kind == liteRecDelete {
			deleted = append(deleted, r.name)
			return
		}
		final[r.name] = r.value
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"gone"}, deleted)
	for k := range 10 {
		want := int64(990 + k)
		switch k {
		case 3:
			want = 1003
		case 4:
			want = 1004
		}
		assert.Equal(t, want, final["s"+strconv.Itoa(k)], "s%d", k)
	}
}

// TestLiteJournalReopen: a journal opened for appending as it is (every
// record live) loses its torn tail and takes new records after the old.
func TestLiteJournalReopen(t *testing.T) {
	dir := t.TempDir()
	j, err := openLiteJournal(dir, nil)
	require.NoError(t, err)
	recs := []liteRecord{
		{kind: liteRecOffset, parent: "chat", name: "s1", group: "g", value: 7},
		{kind: liteRecDelete, parent: "chat", name: "s2", value: 1234},
	}
	require.NoError(t, j.append(recs))
	require.NoError(t, j.append([]liteRecord{{kind: liteRecOffset, parent: "chat", name: "s3", group: "g", value: 9}}))
	require.NoError(t, j.close())
	path := dir + "/lite.journal"
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-3)) // a torn last record
	n := 0
	good, err := readLiteJournal(path, func(liteRecord) { n++ })
	require.NoError(t, err)
	require.Equal(t, 2, n)

	j, err = reopenLiteJournal(dir, good)
	require.NoError(t, err)
	more := liteRecord{kind: liteRecOffset, parent: "chat", name: "s4", group: "g", value: 1}
	require.NoError(t, j.append([]liteRecord{more}))
	require.NoError(t, j.close())
	var got []liteRecord
	_, err = readLiteJournal(path, func(r liteRecord) { got = append(got, r) })
	require.NoError(t, err)
	assert.Equal(t, append(recs, more), got)
}
