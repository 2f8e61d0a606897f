package commitlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// TestCheckpointMarkFollowsTail: a queue is marked for the checkpoint only
// once its new entries are in its tail. The test holds dirtyMu, where a
// checkpoint takes the marks; the append must get its entry into the tail
// before it waits there. With the mark first, a checkpoint could take it
// while the tail was still empty, and the next checkpoint, covering the
// record, found no mark: the entry stayed in memory while the checkpoint
// vouched for it (after Close, the reopened store listed it as missing
// below the checkpoint; TestCorruptionTable/truncated_segment under load).
func TestCheckpointMarkFollowsTail(t *testing.T) {
	set := settings(t, store.FlushAsync)
	set.FlushInterval = time.Hour // no checkpoint but ours
	cfg := smallConfig(1 << 20)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Mark", ID: 0}
	_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "first")})
	require.NoError(t, err)
	require.NoError(t, s.Flush(bg))
	cq := s.queues.Get(q)
	require.NotNil(t, cq)
	tailLen := func() int {
		cq.mu.RLock()
		defer cq.mu.RUnlock()
		return len(cq.tail)
	}
	require.Zero(t, tailLen())

	s.dirtyMu.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "second")})
		done <- err
	}()
	inTail := assert.Eventually(t, func() bool { return tailLen() == cqEntrySize }, 5*time.Second, time.Millisecond,
		"the entry is in the tail before the queue is marked for the checkpoint")
	s.dirtyMu.Unlock()
	require.NoError(t, <-done)
	require.True(t, inTail)

	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	assert.Empty(t, s.Damage(), "no entry below the checkpoint is missing")
	assert.Equal(t, []string{"first", "second"}, readQueue(t, s, q))
}
