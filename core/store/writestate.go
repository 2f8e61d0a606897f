package store

import (
	"errors"
	"syscall"
)

// WriteStater is implemented by stores that can say whether they accept
// writes now (readiness, metrics).
//
// Two conditions stop writes, and they differ in how they end:
//
//   - A full disk (an error wrapping syscall.ENOSPC) is a condition: the
//     store refuses writes cheaply while it lasts and resumes by itself
//     once space returns, without a restart. WriteState re-checks it (a
//     write retried or the free space read), so polling WriteState is
//     enough to see it clear.
//   - A failed fsync (or an I/O error the store cannot undo) wraps
//     ErrNotDurable and is sticky until the store is reopened: after a
//     failed fsync the kernel may have dropped the dirty pages it could not
//     write and marked them clean, so a later fsync that succeeds proves
//     nothing about them ("fsyncgate"); only recovery from what is on disk
//     tells what survived.
type WriteStater interface {
	// WriteState returns nil while writes are accepted, else why not.
	WriteState() error
}

// Reasons a write is refused (WriteRefusal), as metric labels and
// readiness text.
const (
	RefusedDiskFull    = "disk_full"
	RefusedStoreFailed = "store_failed"
)

// WriteRefusal classifies a store write error: RefusedDiskFull for a full
// disk (it wraps ENOSPC), RefusedStoreFailed for a write that could not be
// made durable otherwise (ErrNotDurable: a failed fsync or I/O error,
// sticky until reopen), "" for anything else (a bad argument, a closed
// store, a cancelled call).
func WriteRefusal(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ENOSPC):
		return RefusedDiskFull
	case errors.Is(err, ErrNotDurable):
		return RefusedStoreFailed
	}
	return ""
}
