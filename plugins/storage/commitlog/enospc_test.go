//go:build linux

package commitlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
// wrapping ENOSPC and ErrNotDurable (never a success), what was stored
// stays readable, WriteState reports the full disk, and appends resume
// once space returns, without a reopen.
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

	assert.Equal(t, store.RefusedDiskFull, store.WriteRefusal(s.WriteState()), "WriteState: %v", s.WriteState())

	// Space returns: writes resume, without a reopen (a full disk is a
	// condition, not a failure: issue 37).
	require.NoError(t, os.Remove(filepath.Join(disk, "filler")))
	require.NoError(t, s.WriteState())
	_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	require.NoError(t, err, "appends resume when space returns")
	_, max2, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, acked+1, max2, "nothing acknowledged was lost, nothing failed was stored")
}

// fillUp writes a file at path until the disk is full, to the last page.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	for _, size := range []int{64 << 10, 4 << 10} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				break
			}
		}
	}
}

// TestFullDiskConsumeQueue: the disk fills when the write that fails is a
// consume queue's (the segment write of the record went to a page already
// allocated). The record is stored and its append succeeds; later appends
// are refused for the full disk (not "writes disabled until reopen", the
// issue-37 report), WriteState says so; once space returns the queue's
// entries are written and appends resume, and a reopened store has them
// all.
func TestFullDiskConsumeQueue(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		t.Run(string(mode), func(t *testing.T) { testFullDiskConsumeQueue(t, mode) })
	}
}

func testFullDiskConsumeQueue(t *testing.T, mode store.FlushMode) {
	disk := smallDisk(t, "4m")
	set := settings(t, mode)
	set.Dir = filepath.Join(disk, "store")
	set.FlushInterval = time.Hour // the tail is written by the append that fills it, not a checkpoint
	cfg := NewConfig()
	cfg.SegmentSize = 1 << 20
	q := store.Queue{Topic: "FullCQ", ID: 0}

	// Records of 128 bytes: 32 to a page, so that the one that fills the
	// tail (entry cqTailFlush-1) ends its page exactly. A scratch store
	// measures the record overhead.
	scratch := openStore(t, cfg, settings(t, mode))
	pos, err := scratch.Append(bg, []store.Message{msg(q.Topic, q.ID, "x")})
	require.NoError(t, err)
	require.NoError(t, scratch.Close())
	body := strings.Repeat("x", 1+128-int(pos[0].Size))

	s := openStore(t, cfg, set)
	defer s.Close()
	for i := 0; i < cqTailFlush/cqEntrySize-1; i++ {
		pos, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
		require.NoError(t, err)
		require.EqualValues(t, 128, pos[0].Size)
	}
	require.Equal(t, int64(4096-128), (pos[0].CommitLogOffset+128)%4096)
	fillUp(t, filepath.Join(disk, "filler"))

	// The segment write fits its page; the tail's does not.
	pos, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
	require.NoError(t, err, "the record is stored: its entry waits in the tail")
	stored := pos[0].QueueOffset + 1
	_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
	require.ErrorIs(t, err, syscall.ENOSPC, "refused for the full disk")
	require.ErrorIs(t, err, store.ErrNotDurable)
	assert.NotContains(t, err.Error(), "earlier failure", "not sticky")
	assert.Equal(t, store.RefusedDiskFull, store.WriteRefusal(s.WriteState()), "WriteState: %v", s.WriteState())
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, stored, mx)
	var res store.ReadResult
	require.NoError(t, s.Read(bg, q, mx-1, store.ReadOptions{MaxMessages: 1}, &res))
	require.Len(t, res.Records, 1, "the stored record is readable from the tail")

	require.NoError(t, os.Remove(filepath.Join(disk, "filler")))
	require.NoError(t, s.WriteState(), "space returned")
	pos, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	require.NoError(t, err)
	assert.Equal(t, stored, pos[0].QueueOffset)
	require.NoError(t, s.Close())

	s2 := openStore(t, cfg, set)
	defer s2.Close()
	_, mx2, err := s2.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, stored+1, mx2)
	require.NoError(t, s2.Read(bg, q, 0, store.ReadOptions{MaxMessages: int(mx2)}, &res))
	assert.Len(t, res.Records, int(mx2))
}
