package commitlog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/quivermq/quiver/core/store"
)

// A full disk is a condition that clears, not a failure (issue 37).
//
// A write that fails with ENOSPC leaves the store able to go on once
// space returns, whichever file it hit:
//
//   - a segment write (pwrite, or the map's pages found without space):
//     the append fails, what it wrote is cut off (undoWrite) and nothing
//     of it is published; the next append simply tries again;
//   - a consume-queue tail write (write-behind, dispatchEntries or the
//     checkpoint): the records are in the commit log and their entries in
//     the queue's in-memory tail, which readers use; the append that
//     dispatched them succeeds (its records are stored and will be made
//     durable like any other), the queue is remembered, and every later
//     append first writes the remembered tails again: while that fails
//     for space, appends are refused with an error wrapping ENOSPC, and
//     the first time it works they go on. The cost while the disk is full
//     is one failed pwrite per append (or per WriteState call).
//
// Either way WriteState reports the full disk (ENOSPC) until a write or
// a probe (one tail write, or the free space read when no tail waits)
// finds space again.
//
// A failed fsync is different and stays sticky until reopen (flushErr):
// after a failed fsync the kernel may have dropped the dirty pages it
// could not write and marked them clean, so a later fsync that succeeds
// proves nothing about them ("fsyncgate"); only recovery, which rebuilds
// the consume queues from the last checkpoint, knows what is on disk.

// resumeFree is the free space at which a store whose last write failed
// for space reports itself writable again when no tail waits (WriteState);
// appends do not wait for it, they try.
const resumeFree = 1 << 20

// fullState is the store's full-disk state.
type fullState struct {
	mu     sync.Mutex
	err    error                      // the last write that failed for space; nil when none
	queues map[*consumeQueue]struct{} // tails whose write failed for space
	log    bool                       // the full disk was logged
}

// syncData fdatasyncs a segment or consume-queue file (syncFault aside).
func (s *Store) syncData(f *os.File) error {
	if s.syncFault != nil {
		if err := s.syncFault(f.Name()); err != nil {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
	}
	return fdatasync(f)
}

// isNoSpace reports an error caused by a full disk.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// noteFull records a write that failed for lack of space; cq, when not
// nil, is a queue whose tail must be written before appends go on.
func (s *Store) noteFull(cq *consumeQueue, err error) {
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	if cq != nil {
		if s.full.queues == nil {
			s.full.queues = map[*consumeQueue]struct{}{}
		}
		s.full.queues[cq] = struct{}{}
	}
	s.full.err = err
	if !s.full.log {
		s.full.log = true
		s.log.Warn("commitlog: disk full: appends refused until space returns", "err", err)
	}
}

// clearFullLocked ends the full state. Called with full.mu held.
func (s *Store) clearFullLocked(how string) {
	if s.full.err == nil {
		return
	}
	s.full.err = nil
	if s.full.log {
		s.full.log = false
		s.log.Info("commitlog: space returned: appends accepted again", "by", how)
	}
}

// noteWritten records an append whose writes all went through: the disk
// is not full (any tails still waiting keep the state).
func (s *Store) noteWritten() {
	s.full.mu.Lock()
	if len(s.full.queues) == 0 {
		s.clearFullLocked("a write")
	}
	s.full.mu.Unlock()
}

// fullRefusal writes the tails that failed for space again. It returns
// an error wrapping ENOSPC (and ErrNotDurable) while one still fails for
// space, nil once they are all written (or none waits). A tail write that
// fails otherwise disables writes, as in dispatchEntries.
func (s *Store) fullRefusal() error {
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	had := len(s.full.queues) > 0
	for cq := range s.full.queues {
		err := s.flushTail(cq)
		switch {
		case err == nil:
			delete(s.full.queues, cq)
		case isNoSpace(err):
			s.full.err = err
			return fmt.Errorf("commitlog: append: %w: disk full: consume queue %s waits to be written: %w", store.ErrNotDurable, cq.q, err)
		default:
			err = fmt.Errorf("commitlog: dispatch: %w: %w", store.ErrNotDurable, err)
			s.setFailure(err)
			return err
		}
	}
	if had {
		s.clearFullLocked("consume-queue write")
	}
	return nil
}

// WriteState implements store.WriteStater: nil while appends are
// accepted; an error wrapping ENOSPC while the disk is full (it clears by
// itself: the waiting tails are written again, or, with none waiting, the
// free space is read); the sticky failure (ErrNotDurable) after a failed
// fsync, until reopen.
func (s *Store) WriteState() error {
	if s.closed.Load() {
		return fmt.Errorf("commitlog: %w", store.ErrClosed)
	}
	if err := s.failure(); err != nil {
		// The cause as text: a sticky failure, even one that said ENOSPC.
		return fmt.Errorf("commitlog: writes disabled until reopen: %w: %v", store.ErrNotDurable, err)
	}
	if err := s.fullRefusal(); err != nil {
		return err
	}
	s.full.mu.Lock()
	defer s.full.mu.Unlock()
	if s.full.err == nil {
		return nil
	}
	if free, ok := freeSpace(s.dir); ok && free >= resumeFree {
		s.clearFullLocked("free space")
		return nil
	}
	return fmt.Errorf("commitlog: %w: disk full: %w", store.ErrNotDurable, s.full.err)
}
