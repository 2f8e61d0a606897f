package commitlog

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// fdatasync flushes f's data (and the metadata needed to read it back).
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: os.ErrClosed}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if !errors.Is(serr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		// Control fails only on a closed file.
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: os.ErrClosed}
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// pause sleeps the calling thread for d with the kernel's high-resolution
// timer (nanosleep), not the Go timer, whose sub-millisecond wake-ups come
// late when the process is idle.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
