package pebblestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quivermq/quiver/core/store"
)

// A full disk is a condition that clears, not a failure (issue 37).
//
// Pebble copes with ENOSPC in some files and not in others. A flush or
// compaction that cannot write its table fails, removes what it wrote and
// is tried again: harmless. A write to the WAL that fails latches the
// error in Pebble's log writer for good: every later commit fails (the
// next one in a panic with Pebble's commit pipeline left locked), so the
// store would need a reopen. A failed MANIFEST write is fatal to Pebble
// (Logger.Fatalf from a background goroutine: the process would end).
//
// So the store puts spaceFS under Pebble:
//
//   - A write to any file but a table (the WAL, the MANIFEST, markers and
//     OPTIONS) that fails with ENOSPC does not fail: it waits for space
//     and is tried again every spaceRetry, until it goes through or the
//     store closes. Pebble never sees the error; the log stays whole. The
//     writes in flight when the disk filled (the batch being committed,
//     the syncs waiting for the log) finish when space returns; new
//     appends are refused at once meanwhile (waiting > 0).
//   - Any ENOSPC (tables included, and Pebble's flush and background
//     errors, see pebbleOptions) sets noSpace: appends are refused with an
//     error wrapping ENOSPC. It clears when a flush succeeds, or when a
//     probe (at most every spaceRetry, on an append or WriteState) finds
//     resumeFree bytes free: a compaction that failed for space leaves no
//     flush behind it to clear the flag. (The issue-37 store kept refusing
//     for both reasons: the latched WAL error, reproduced by
//     TestDiskFullResumes, and a flag only a flush could clear.)
//   - A failed fsync of any file is sticky (Store.failed) until reopen:
//     after a failed fsync the kernel may have dropped the pages it could
//     not write and marked them clean, so a later fsync that succeeds
//     proves nothing ("fsyncgate"); only recovery knows what is on disk.

// spaceRetry is how often a write waiting for space is tried again, and
// the least time between two free-space probes.
const spaceRetry = 100 * time.Millisecond

// resumeFree is the free space at which a store refusing appends for a
// full disk accepts them again (if it is not enough, the next failed
// write refuses them again).
const resumeFree = 1 << 20

// spaceFS is the file system Pebble writes through (see above).
type spaceFS struct {
	vfs.FS
	s *Store
}

// Unwrap returns the file system underneath.
func (fs spaceFS) Unwrap() vfs.FS { return fs.FS }

func (fs spaceFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			fs.s.full(name, err)
		}
		return f, err
	}
	return &spaceFile{File: f, s: fs.s, name: name, wait: !isTable(name)}, nil
}

func (fs spaceFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs spaceFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs spaceFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// isTable reports a file whose failed write Pebble handles itself (it
// drops the table and tries the flush or compaction again).
func isTable(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".sst" || ext == ".blob"
}

// spaceFile is a file written through spaceFS.
type spaceFile struct {
	vfs.File
	s    *Store
	name string
	wait bool // ENOSPC waits for space (not a table)
}

func (f *spaceFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err == nil || !f.waitable(err) {
		return n, err
	}
	defer f.s.space.waiting.Add(-1)
	for errors.Is(err, syscall.ENOSPC) && f.s.sleepForSpace(f.name) {
		var m int
		m, err = f.File.Write(p[n:])
		n += m
	}
	return n, err
}

func (f *spaceFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err == nil || !f.waitable(err) {
		return n, err
	}
	defer f.s.space.waiting.Add(-1)
	for errors.Is(err, syscall.ENOSPC) && f.s.sleepForSpace(f.name) {
		var m int
		m, err = f.File.WriteAt(p[n:], off+int64(n))
		n += m
	}
	return n, err
}

// waitable records a write that failed for space and reports whether it
// waits for space (then counted in waiting until it ends).
func (f *spaceFile) waitable(err error) bool {
	if !errors.Is(err, syscall.ENOSPC) {
		return false
	}
	f.s.full(f.name, err)
	if !f.wait {
		return false
	}
	f.s.space.waiting.Add(1)
	return true
}

func (f *spaceFile) Sync() error { return f.s.syncResult(f.name, f.File.Sync()) }

func (f *spaceFile) SyncData() error { return f.s.syncResult(f.name, f.File.SyncData()) }

func (f *spaceFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.s.syncResult(f.name, err)
}

// spaceState is the store's full-disk state.
type spaceState struct {
	noSpace   atomic.Bool  // a write failed for space (see above)
	waiting   atomic.Int32 // writes waiting for space
	lastProbe atomic.Int64 // unix nanos of the last free-space probe
	log       logLimiter
}

// full records a write that failed for lack of space.
func (s *Store) full(name string, err error) {
	if !s.space.noSpace.Swap(true) {
		s.space.log.warn(s.log, "pebblestore: disk full: appends refused until space returns", "file", filepath.Base(name), "err", err)
	}
}

// sleepForSpace sleeps spaceRetry for a write waiting for space; false
// when the store is closing: the write then fails, and since Pebble
// latches a failed log write, so does the store, until reopen.
func (s *Store) sleepForSpace(name string) bool {
	t := time.NewTimer(spaceRetry)
	defer t.Stop()
	select {
	case <-s.stop:
		s.setFailure(fmt.Errorf("pebblestore: write %s: %w: the store closed while the write waited for space (%v)", filepath.Base(name), store.ErrNotDurable, syscall.ENOSPC))
		return false
	case <-t.C:
		return true
	}
}

// syncResult passes err through, recording a failed fsync: writes stop until
// reopen (fsyncgate, see above). The cause is kept as text, not wrapped:
// a failed fsync is not a full disk that clears, even when it says ENOSPC.
func (s *Store) syncResult(name string, err error) error {
	if err != nil {
		s.setFailure(fmt.Errorf("pebblestore: fsync %s: %w: %v", filepath.Base(name), store.ErrNotDurable, err))
	}
	return err
}

// spaceRefusal returns the error refusing an append for a full disk, nil
// when appends may go on. While noSpace is set it probes the free space,
// at most every spaceRetry.
func (s *Store) spaceRefusal() error {
	if s.space.waiting.Load() > 0 {
		return fmt.Errorf("pebblestore: append: %w: a write waits for space: %w", store.ErrNotDurable, syscall.ENOSPC)
	}
	if !s.space.noSpace.Load() {
		return nil
	}
	now := time.Now().UnixNano()
	last := s.space.lastProbe.Load()
	if now-last >= int64(spaceRetry) && s.space.lastProbe.CompareAndSwap(last, now) {
		if free, ok := s.freeSpace(); ok && free >= resumeFree {
			if s.space.noSpace.Swap(false) {
				s.log.Info("pebblestore: space returned: appends accepted again", "free", free)
			}
			return nil
		}
	}
	return fmt.Errorf("pebblestore: append: %w: disk full: %w", store.ErrNotDurable, syscall.ENOSPC)
}

// freeSpace reads the bytes available on the store's file system.
func (s *Store) freeSpace() (uint64, bool) {
	fs := s.cfg.FS
	if fs == nil {
		fs = vfs.Default
	}
	u, err := fs.GetDiskUsage(s.dir)
	if err != nil {
		return 0, false
	}
	return u.AvailBytes, true
}

// WriteState implements store.WriteStater: nil while appends are
// accepted; an error wrapping ENOSPC while the disk is full (it clears by
// itself); the sticky failure (ErrNotDurable) after a failed fsync or a
// Pebble failure, until reopen.
func (s *Store) WriteState() error {
	if s.closed.Load() {
		return fmt.Errorf("pebblestore: %w", store.ErrClosed)
	}
	if err := s.failure(); err != nil {
		// The cause as text: a sticky failure, even one that said ENOSPC.
		return fmt.Errorf("pebblestore: writes disabled until reopen: %w: %v", store.ErrNotDurable, err)
	}
	return s.spaceRefusal()
}
