package controller

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStopAnswersPendingFutures: read indexes running while the
// controller stops leave no goroutine behind. raft v1.7 never answers a
// verify future still queued (verifyCh is buffered, and a verify that
// reached its quorum is queued there again) when its main loop exits, so
// Stop lets raft answer the futures already asked before it shuts raft
// down, and asks no new one. Seen as goroutines stuck in awaitFuture
// that failed the package's goleak check.
func TestStopAnswersPendingFutures(t *testing.T) {
	before := waitingFutures()
	c := startControllers(t, 1)[0]
	leaderOf(t, []*Controller{c})
	var wg sync.WaitGroup
	var asked atomic.Int64
	done := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				c.verifiedCommit() //nolint:errcheck // only the goroutines it leaves matter
				asked.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return asked.Load() >= 100 }, 10*time.Second, time.Millisecond, "read indexes answered")
	require.NoError(t, c.Stop(context.Background()))
	close(done)
	wg.Wait()
	assert.Eventually(t, func() bool { return waitingFutures() == before }, 5*time.Second, 10*time.Millisecond,
		"goroutines still wait for a raft future after Stop")
}

// waitingFutures counts the goroutines awaitFuture left waiting for a
// raft future.
func waitingFutures() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "controller.(*Controller).awaitFuture.func1")
}
