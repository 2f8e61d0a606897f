package commitlog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the pages in
// for writing now, failing (EFAULT) where a write would raise SIGBUS, for
// instance because the file system has no space left for them.
const madvPopulateWrite = 23

// mapFile maps n bytes of f from off (page-aligned) for reading and writing,
// shared with the page cache.
func mapFile(f *os.File, off int64, n int) ([]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: os.ErrClosed}
	}
	var b []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = syscall.Mmap(int(fd), off, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	}); err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: os.ErrClosed}
	}
	if merr != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: merr}
	}
	return b, nil
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }

// errPopulateUnsupported says the kernel has no MADV_POPULATE_WRITE.
var errPopulateUnsupported = errors.New("madvise(MADV_POPULATE_WRITE) unsupported")

// populate faults the (page-aligned) region b in for writing.
func populate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	for {
		_, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), madvPopulateWrite)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		case syscall.EINVAL:
			return errPopulateUnsupported
		case syscall.EFAULT:
			// A write there would raise SIGBUS: no space (or an I/O error)
			// behind the pages.
			return errNoPageSpace
		default:
			return e
		}
	}
}

// release drops the (page-aligned) region b of a shared file mapping from
// the process's page tables (MADV_DONTNEED): the pages stay in the page
// cache, dirty ones are written back as usual, and the next access maps
// them again from the file.
func release(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := syscall.Madvise(b, syscall.MADV_DONTNEED); err != nil {
		return fmt.Errorf("madvise(MADV_DONTNEED) of %d bytes: %w", len(b), err)
	}
	return nil
}
