package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/internal/e2etrace"
)

// TestE2ETraceTimeline builds mq with -tags e2etrace, runs a short
// official-client end-to-end window against it as -e2etrace does and
// checks that the dump's analysis has samples for every segment, held
// and immediate deliveries, and the window's runtime figures.
func TestE2ETraceTimeline(t *testing.T) {
	if testing.Short() {
		t.Skip("about 40 s: builds mq with -tags e2etrace and runs the official client; make test runs it without -short")
	}
	tmp := t.TempDir()
	root, err := repoRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mq := filepath.Join(tmp, "mq")
	require.NoError(t, build(ctx, root, mq, "./cmd/mq", "e2etrace"))
	quietOfficialClient()

	tr, err := newTracer(filepath.Join(tmp, "trace"), 3*time.Second)
	require.NoError(t, err)
	q, err := startQuiverTraced(ctx, mq, filepath.Join(tmp, "quiver"), false, "", tr)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			q.close()
		}
	}()
	o := &officialTarget{quiverTarget: q}
	topic, err := o.newTopic(ctx, "e2etrace")
	require.NoError(t, err)

	const rate, d = 2000, 3 * time.Second
	_, p99, _, err := latency(ctx, o, topic, rate, d, 1024)
	require.NoError(t, err)
	// A client that keeps up is answered by held pulls only (on a quiet
	// machine every one); a backlog read from its first offset is the
	// immediate path: messages stored before the pulls that find them.
	const backlog = 1000
	btopic, err := o.newTopic(ctx, "e2etraceb")
	require.NoError(t, err)
	have, err := fill(ctx, q, btopic, backlog, 1024, 64, time.Minute) // backlog and a warm-up send per producer
	require.NoError(t, err)
	_, err = drain(ctx, o, btopic, have, 1, time.Minute, true)
	require.NoError(t, err)
	rep, err := q.endWindow(ctx)
	require.NoError(t, err)
	writeTimeline(t.Output(), "test run", rep)

	for _, s := range e2etrace.Segments {
		assert.Positive(t, rep.Segments[s].N, "segment %q has no sample", s)
	}
	assert.Positive(t, rep.HeldMessages)
	assert.Positive(t, rep.ImmediateMessage)
	// every message of the window was delivered once and traced from its
	// send frame (the ring is sized for it: nothing dropped)
	assert.Zero(t, rep.Meta.Dropped)
	assert.Equal(t, rep.Stored, len(rep.Deliveries))
	assert.InDelta(t, rate*d.Seconds()+float64(have), float64(rep.Stored), rate*d.Seconds()/10)
	assert.Zero(t, rep.NoSendRead)
	// the broker's share of a delivery is within what the client saw
	assert.LessOrEqual(t, rep.Segments[e2etrace.SegReadWritten].P50, p99.Nanoseconds())
	assert.Positive(t, rep.Meta.CPUSeconds)
	assert.Contains(t, rep.Meta.Topics, topic)

	// the broker's stderr held its gctrace lines: GC spans are whole cycles
	if len(rep.GC) > 0 {
		assert.True(t, rep.MarkKnown)
	}
	_, err = os.Stat(tr.stderr)
	require.NoError(t, err)

	// The official push consumer's Shutdown leaves its long-polling pulls
	// waiting for their own timeout (20 s suspend + margin), even once the
	// broker is gone: let them end before TestMain looks for leaks.
	q.close()
	closed = true
	deadline := time.Now().Add(90 * time.Second)
	for goleak.Find(officialClientLingering...) != nil && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
}
