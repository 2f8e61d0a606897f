package main

// -e2etrace (issue 44): mq built with -tags e2etrace records each
// message's timeline in the broker (internal/e2etrace); the official
// client's end-to-end runs dump it for their measured window and print
// the per-segment tables.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/quivermq/quiver/internal/e2etrace"
)

// tracer is a traced mq dev: where its dumps and its stderr (with the
// GODEBUG=gctrace=1 lines) go.
type tracer struct {
	dump, stderr string
	// events sizes the broker's ring (QUIVER_E2ETRACE_EVENTS).
	events int
}

// e2eTraceRates are the end-to-end rows' rates.
var e2eTraceRates = []int{5000, 20_000}

// traceEvents sizes the ring for the largest end-to-end run of d: about
// 8 events per message (send read, stored, send done, pull read, pull,
// held, found, written), with room to spare, within 4 Mi events
// (256 MiB).
func traceEvents(d time.Duration) int {
	n := int(float64(e2eTraceRates[len(e2eTraceRates)-1])*d.Seconds()) * 12
	return min(max(n, 1<<16), 1<<22)
}

// env is what the traced broker's environment adds.
func (t *tracer) env() []string {
	return []string{"QUIVER_E2ETRACE=" + t.dump, fmt.Sprintf("QUIVER_E2ETRACE_EVENTS=%d", t.events), "GODEBUG=gctrace=1"}
}

// windowed is a target whose server can be told where a measured window
// starts (latency calls it once the consumer has settled).
type windowed interface {
	startWindow(ctx context.Context) error
}

// startWindow dumps (and discards) what the broker recorded so far: the
// next dump holds only the window.
func (q *quiverTarget) startWindow(ctx context.Context) error {
	if q.trace == nil {
		return nil
	}
	_, err := q.dumpTrace(ctx)
	return err
}

// endWindow dumps the window and analyses it.
func (q *quiverTarget) endWindow(ctx context.Context) (*e2etrace.Report, error) {
	d, err := q.dumpTrace(ctx)
	if err != nil {
		return nil, err
	}
	var gc map[uint32]e2etrace.GCTrace
	if f, err := os.Open(q.trace.stderr); err == nil {
		gc, err = e2etrace.ParseGCTrace(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return e2etrace.Analyze(d, gc), nil
}

// dumpTrace asks the broker for a dump (SIGUSR1) and reads it.
func (q *quiverTarget) dumpTrace(ctx context.Context) (*e2etrace.Dump, error) {
	if err := os.Remove(q.trace.dump); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := q.p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return nil, fmt.Errorf("peers: signal mq for a trace dump: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := e2etrace.ReadFile(q.trace.dump)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if time.Now().After(deadline) || q.p.exited() {
			return nil, fmt.Errorf("peers: no e2etrace dump from mq (built with -tags e2etrace?):\n%s", q.p.logs.tail(20))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// newTracer places a traced broker's files in dir.
func newTracer(dir string, latDur time.Duration) (*tracer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &tracer{dump: filepath.Join(dir, "e2e.dump"), stderr: filepath.Join(dir, "mq-stderr.log"), events: traceEvents(latDur)}, nil
}

// writeTimeline prints one run's timeline.
func writeTimeline(w io.Writer, title string, r *e2etrace.Report) {
	fmt.Fprintf(w, "\n### End-to-end timeline in the broker: %s\n\n", title)
	r.Write(w)
	fmt.Fprintln(w)
}
