//go:build !linux

package commitlog

import "os"

// fdatasync flushes f; elsewhere than Linux it is a full fsync.
func fdatasync(f *os.File) error { return f.Sync() }
