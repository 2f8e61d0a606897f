//go:build e2etrace && unix

package e2etrace

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitDump polls for the dump at path (written by a rename) and removes it.
func waitDump(t *testing.T, path string) *Dump {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := ReadFile(path)
		if err == nil {
			require.NoError(t, os.Remove(path))
			return d
		}
		require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
		require.True(t, time.Now().Before(deadline), "no dump at %s", path)
		time.Sleep(5 * time.Millisecond)
	}
}

// The tagged recorder: hooks record into the ring, SIGUSR1 dumps the
// window and starts a new one, Stop dumps the last.
func TestRecorderDumpsOnSignalAndStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e2e.dump")
	t.Setenv("QUIVER_E2ETRACE", path)
	t.Setenv("QUIVER_E2ETRACE_EVENTS", "1000")
	Start(slog.New(slog.NewTextHandler(t.Output(), nil)))
	stopped := false
	defer func() {
		if !stopped {
			Stop()
		}
	}()

	t0 := Now()
	FrameRead(t0, 1, codeSendMessage, 7)
	FrameRead(t0, 1, 34, 8) // a heartbeat: not traced
	Stored("T", 2, 40)
	SendDone(1, 7, "T", 2, 40, 1)
	Pull(9, 70, "T", 2, 40)
	Held(9, 70, "T", 2, 40)
	Found(9, 70, "T", 2, 40, 41)
	ran := false
	sent := Written(func() { ran = true }, 9, 70, "T", 2, 40, 41, 1)
	sent()
	assert.True(t, ran, "Written's Sent runs the answer's own")

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	d := waitDump(t, path)
	assert.Equal(t, 1, d.Seq)
	assert.Equal(t, 1024, d.RingEvents)
	assert.Zero(t, d.Dropped)
	assert.Positive(t, d.CPUSeconds)
	kinds := []Kind{}
	for _, e := range d.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []Kind{KindRead, KindStored, KindSendDone, KindPull, KindHeld, KindFound, KindWritten}, kinds)
	assert.Equal(t, []string{"", "T"}, d.Topics)
	w := d.Events[6]
	assert.Equal(t, Event{T: w.T, Built: w.Built, Kind: KindWritten, Peer: 9, Opaque: 70, Topic: 1, Queue: 2, Offset: 40, Next: 41, Aux: 1}, w)
	assert.LessOrEqual(t, w.Built, w.T)
	assert.LessOrEqual(t, d.Start, t0)
	assert.GreaterOrEqual(t, d.End, w.T)
	rep := Analyze(d, nil)
	assert.Equal(t, 1, rep.HeldMessages)
	assert.Equal(t, 1, rep.Segments[SegReadWritten].N)

	Stored("T", 2, 41)
	Stop()
	stopped = true
	d = waitDump(t, path)
	assert.Equal(t, 2, d.Seq)
	require.Len(t, d.Events, 1, "the second window holds only what came after the first dump")
	assert.Equal(t, int64(41), d.Events[0].Offset)
	Stored("T", 2, 42) // after Stop: not recorded, no dump
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
