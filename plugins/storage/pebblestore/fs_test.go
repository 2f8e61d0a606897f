package pebblestore

import (
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countingFS counts the syncs of the files Pebble writes; while fail is
// set, they fail with EIO (a disk's write-back error).
type countingFS struct {
	vfs.FS
	syncs *atomic.Int64
	fail  *atomic.Bool
}

func newCountingFS() countingFS {
	return countingFS{FS: vfs.Default, syncs: new(atomic.Int64), fail: new(atomic.Bool)}
}

func (fs countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return countingFile{File: f, syncs: fs.syncs, fail: fs.fail}, nil
}

func (fs countingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs countingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs countingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

type countingFile struct {
	vfs.File
	syncs *atomic.Int64
	fail  *atomic.Bool
}

func (f countingFile) failed() bool { return f.fail != nil && f.fail.Load() }

func (f countingFile) Sync() error {
	f.syncs.Add(1)
	if f.failed() {
		return syscall.EIO
	}
	return f.File.Sync()
}

func (f countingFile) SyncData() error {
	f.syncs.Add(1)
	if f.failed() {
		return syscall.EIO
	}
	return f.File.SyncData()
}

func (f countingFile) SyncTo(length int64) (bool, error) {
	f.syncs.Add(1)
	if f.failed() {
		return false, syscall.EIO
	}
	return f.File.SyncTo(length)
}
