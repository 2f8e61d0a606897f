package mirror_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/mirror"
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

// TestMirrorHoldsTheBatchWhileTheTargetIsAway: a batch whose write fails
// because the target is away is written again by the retries, not pulled
// again from the source at each (with a pull ahead started and dropped
// each time): over an edge's uplink, a target away for an hour cost every
// queue a batch per backoff.
func TestMirrorHoldsTheBatchWhileTheTargetIsAway(t *testing.T) {
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("away", 1)
	_, p := src.producer("away")
	var fromSrc atomic.Int64 // bytes read from the source broker
	dial := transports.Dialer(transports.WithInsecureQUIC())
	counting := func(ctx context.Context, addr string) (transport.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil || addr != src.Broker {
			return c, err
		}
		return countingConn{Conn: c, n: &fromSrc}, nil
	}
	lk := fastLink("away", src, dst, "away")
	lk.BatchSize = 32
	s, err := mirror.New(&mirror.Config{Links: []mirror.Link{lk}}, mirror.Deps{Dial: counting})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { stopMirror(t, s) })
	first := send(t, p, "away", 10, "first")
	waitFor(t, 30*time.Second, "the first messages in the target", func() bool { return len(dst.readAll("away")) >= len(first) })

	// The target goes away; two batches of 4,000-byte messages (random,
	// under the producer's compression threshold) arrive and the worker
	// pulls the first.
	dst.Stop()
	body := make([]byte, 4000)
	rand.NewChaCha8([32]byte{}).Read(body) //nolint:errcheck // ChaCha8's Read never fails
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 * lk.BatchSize {
		_, err := p.SendSync(ctx, client.NewMessage("away", body))
		require.NoError(t, err)
	}
	all := int64(len(first) + 2*lk.BatchSize)
	waitFor(t, 30*time.Second, "the worker to pull the first batch", func() bool {
		qs := s.Status()[0].Queues
		return len(qs) == 1 && qs[0].MaxOffset == all && qs[0].Next < all
	})
	// Retries every 150-300 ms (max_backoff 300ms) for 3 s.
	before := fromSrc.Load()
	time.Sleep(3 * time.Second)
	pulled := fromSrc.Load() - before
	t.Logf("%d bytes read from the source in 3 s of retries", pulled)
	assert.Less(t, pulled, int64(lk.BatchSize*len(body)), "the batch was pulled again by the retries")

	dst.Start()
	waitFor(t, 30*time.Second, "every message in the target", func() bool { return dst.count("away") >= all })
	lost, dup := lostAndDup(first, dst.readAll("away"))
	assert.Empty(t, lost)
	assert.Empty(t, dup)
	assert.Len(t, dst.readAll("away"), int(all))
}

// countingConn counts the bytes of the frames it reads.
type countingConn struct {
	transport.Conn
	n *atomic.Int64
}

func (c countingConn) ReadFrame(ctx context.Context) ([]byte, error) {
	b, err := c.Conn.ReadFrame(ctx)
	c.n.Add(int64(len(b)))
	return b, err
}
