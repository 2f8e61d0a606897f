//go:build linux

package commitlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// smallDisk mounts a tmpfs of size bytes (a real file system that really
// fills up). It needs root; without it the test says so and skips.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestFullDisk: when the disk fills, appends fail with a clear error
// wrapping ErrNotDurable (never a success), what was stored stays
// readable, and appends resume once space returns.
func TestFullDisk(t *testing.T) {
	// sync writes with pwrite; async through the map, with the populator
	// running ahead of the writer.
	for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		t.Run(string(mode), func(t *testing.T) { testFullDisk(t, mode) })
	}
}

func testFullDisk(t *testing.T, mode store.FlushMode) {
	disk := smallDisk(t, "3m")
	set := settings(t, mode)
	set.Dir = filepath.Join(disk, "store")
	s := openStore(t, smallConfig(1<<20), set)
	defer s.Close()
	q := store.Queue{Topic: "Full", ID: 0}
	body := string(make([]byte, 4096))

	var acked int64
	var failure error
	for i := 0; i < 5000; i++ {
		_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, fmt.Sprintf("%05d%s", i, body))})
		if err != nil {
			failure = err
			break
		}
		acked++
		if i == 100 {
			// Take most of the remaining space with another file.
			f, err := os.Create(filepath.Join(disk, "filler"))
			require.NoError(t, err)
			buf := make([]byte, 64<<10)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
		}
	}
	require.Error(t, failure, "the disk never filled")
	assert.True(t, errors.Is(failure, store.ErrNotDurable), "error %v wraps ErrNotDurable", failure)
	t.Logf("acknowledged %d, then: %v", acked, failure)

	// Everything acknowledged is still readable.
	_, max, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, acked, max)
	var res store.ReadResult
	require.NoError(t, s.Read(bg, q, max-1, store.ReadOptions{}, &res))
	assert.Len(t, res.Records, 1)

	// Space returns: writes resume (or, if the engine had to stop after a
	// failed fsync, resume after reopening — both are acceptable, and the
	// error says which).
	require.NoError(t, os.Remove(filepath.Join(disk, "filler")))
	_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	if err != nil {
		require.NoError(t, s.Close())
		s = openStore(t, smallConfig(1<<20), set)
		_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	}
	require.NoError(t, err, "appends resume when space returns")
	_, max2, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, acked+1, max2, "nothing acknowledged was lost, nothing failed was stored")
}
