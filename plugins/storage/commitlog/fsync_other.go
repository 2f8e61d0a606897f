//go:build !linux

package commitlog

import (
	"os"
	"time"
)

// fdatasync flushes f; elsewhere than Linux it is a full fsync.
func fdatasync(f *os.File) error { return f.Sync() }

// pause sleeps for d.
func pause(d time.Duration) { time.Sleep(d) }
