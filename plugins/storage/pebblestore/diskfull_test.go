//go:build linux

package pebblestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// smallDisk mounts a tmpfs of size bytes: a real file system that really
// fills up. It needs root; without it the test says so and skips.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file of incompressible bytes at path until the disk is
// full.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	_, _ = rand.Read(buf)
	for range 1 << 14 {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
	return errors.New("the disk never filled")
}

// eventually polls cond (each poll may write) for at most 10 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for range 200 {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still %v after 10s", what, err)
}

// TestDiskFullResumes fills a real (tmpfs) disk under the store until
// appends are refused for lack of space, frees space, and checks that
// appends resume without a reopen (the issue-37 report: Pebble refused
// every send for a minute and more with 22 MB free, or for good once the
// WAL write failed), that WriteState says why writes are refused and
// clears, and that nothing acknowledged was lost. The writer runs on its
// own goroutine: an append in flight when the disk filled may wait for
// space (diskfull.go).
func TestDiskFullResumes(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		t.Run(string(mode), func(t *testing.T) {
			disk := smallDisk(t, "8m")
			cfg := NewConfig()
			cfg.MemTableSize = 256 << 10
			set := settings(t, mode)
			set.Dir = filepath.Join(disk, "store")
			set.FlushInterval = 10 * time.Millisecond
			s := openStore(t, cfg, set)
			defer s.Close()
			q := store.Queue{Topic: "Full", ID: 0}
			raw := make([]byte, 16<<10)
			_, _ = rand.Read(raw)
			body := string(raw)

			type result struct {
				acked int64
				err   error
			}
			stop, done := make(chan struct{}), make(chan result, 1)
			go func() {
				var r result
				defer func() { done <- r }()
				for i := range 5000 {
					select {
					case <-stop:
						return
					default:
					}
					if _, r.err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, fmt.Sprintf("%05d%s", i, body))}); r.err != nil {
						return
					}
					r.acked++
					if i == 20 {
						if r.err = fill(filepath.Join(disk, "filler")); r.err != nil {
							return
						}
					}
				}
			}()
			eventually(t, "disk full", func() error {
				if store.WriteRefusal(s.WriteState()) != store.RefusedDiskFull {
					return fmt.Errorf("write state %v", s.WriteState())
				}
				return nil
			})
			// A new append is refused at once, naming the full disk.
			_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "refused")})
			require.ErrorIs(t, err, syscall.ENOSPC, "a full disk is named")
			require.ErrorIs(t, err, store.ErrNotDurable)
			t.Logf("refused: %v", err)

			// Space returns: WriteState clears and appends resume, with
			// no reopen.
			require.NoError(t, os.Remove(filepath.Join(disk, "filler")))
			close(stop)
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the writer is still blocked 10s after space returned")
			}
			t.Logf("writer: %d acknowledged, then %v", r.acked, r.err)
			if r.err != nil {
				require.ErrorIs(t, r.err, syscall.ENOSPC)
			}
			eventually(t, "write state", s.WriteState)
			var pos []store.Position
			eventually(t, "append after space returned", func() error {
				var err error
				pos, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
				return err
			})
			mn, mx, err := s.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, mx-1, pos[0].QueueOffset)
			assert.GreaterOrEqual(t, mx, r.acked+1, "nothing acknowledged was lost")
			var res store.ReadResult
			require.NoError(t, s.Read(bg, q, mn, store.ReadOptions{MaxMessages: 1}, &res))
			require.NoError(t, s.Read(bg, q, mx-1, store.ReadOptions{MaxMessages: 1}, &res))
			require.Len(t, res.Records, 1)
			require.NoError(t, s.Close())

			// Reopened: everything acknowledged is there.
			s2 := openStore(t, cfg, set)
			defer s2.Close()
			_, mx2, err := s2.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, mx, mx2)
		})
	}
}

// TestFlushWhileWaitingForSpace: while a log write waits for space
// (diskfull.go: until space returns or the store closes), Flush answers at
// once, naming the full disk, instead of waiting with it — a broker's
// Stop on a full disk hung in Flush for good (make test, 2026-12-07:
// TestDiskFullBothEngines/pebble/sync after a failed send). The waiting
// write is counted as spaceFile counts one; with none, Flush syncs.
func TestFlushWhileWaitingForSpace(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushSync))
	defer s.Close()
	_, err := s.Append(bg, []store.Message{msg("T", 0, "one")})
	require.NoError(t, err)
	s.space.waiting.Add(1)
	start := time.Now()
	err = s.Flush(bg)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Less(t, time.Since(start), time.Second)
	s.space.waiting.Add(-1)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, s.Flush(ctx), "with no write waiting, Flush syncs")
}
