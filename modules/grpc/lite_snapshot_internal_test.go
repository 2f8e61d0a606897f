package grpc

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestLiteSnapshotStreams: writing the snapshot of 200,000 lite topics
// allocates a chunk's buffer, not a copy of the index.
func TestLiteSnapshotStreams(t *testing.T) {
	const n = 200_000
	cfg := defaultLiteConfig()
	x := newLiteIndex(cfg)
	now := time.Now().UnixMilli()
	x.mu.Lock()
	for i := range n {
		lt, err := x.ensure("chat", "session-"+strconv.Itoa(i), now)
		require.NoError(t, err)
		x.add(lt, 0, int64(i)*300, now)
	}
	x.mu.Unlock()
	index := heapInUse()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := &countingWriter{}
	count, err := x.writeSnapshotTopics(w, int64(n)*300, x.removals, nil)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, uint64(n), count)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d lite topics: %d bytes written, %d bytes allocated (index heap %d MiB)", n, w.n, alloc, index>>20)
	assert.Less(t, alloc, uint64(1<<20), "bytes allocated writing the snapshot")
	assert.Greater(t, w.n, int64(n*10), "every lite topic written")

	// Messages after cmax are left to the records; a topic with none is
	// left out.
	w = &countingWriter{}
	count, err = x.writeSnapshotTopics(w, 300*(n/2)-1, x.removals, nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(n/2), count)

	// A deletion while it is written: given up.
	count, err = x.writeSnapshotTopics(w, 0, x.removals+1, nil)
	require.ErrorIs(t, err, errLiteSnapshotMoved)
	assert.Zero(t, count)
}
