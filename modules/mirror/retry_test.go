package mirror_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestMirrorRetryAfterBackoff: a write that fails because the target is
// away is retried after the link's backoff (max_backoff 300ms here), not
// after the pull of the next batch started before it: at the end of an
// idle source that pull is held up to the worker's pollWait (5 s), and
// the worker waited for it, to throw its batch away, before retrying.
func TestMirrorRetryAfterBackoff(t *testing.T) {
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("idle", 1)
	_, p := src.producer("retry")
	s := startMirror(t, fastLink("retry", src, dst, "idle"))
	first := send(t, p, "idle", 10, "first")
	waitFor(t, 30*time.Second, "the first messages in the target", func() bool { return len(dst.readAll("idle")) >= len(first) })

	// The worker holds a pull at the source's end. The target goes away,
	// a batch arrives: its write fails, and the pull of the next batch
	// is held by the idle source.
	dst.Stop()
	second := send(t, p, "idle", 10, "second")
	all := int64(len(first) + len(second))
	waitFor(t, 30*time.Second, "the worker to pull the second batch", func() bool {
		qs := s.Status()[0].Queues
		return len(qs) == 1 && qs[0].MaxOffset == all && qs[0].Next < all // pulled (its write follows at once), not written
	})
	dst.Start()
	back := time.Now()
	waitFor(t, 30*time.Second, "the second batch in the target", func() bool {
		return len(dst.readAll("idle")) >= int(all)
	})
	took := time.Since(back)
	t.Logf("the batch whose write failed reached the target %s after it was back", took)
	assert.Less(t, took, 2500*time.Millisecond, "retried after the backoff, not after the held pull of the next batch (5 s)")
}
