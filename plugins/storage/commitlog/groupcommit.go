package commitlog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/quivermq/quiver/core/store"
)

// Group commit. A sync-mode Append returns once a sync round that started
// after its bytes were written has ended well. A round fdatasyncs the
// segments holding the log from the previous round's target to its own,
// its target being the write position when it started; one round covers
// every appender below its target.
//
// Rounds are run by the appenders themselves, not by a flusher goroutine:
// the first appender that finds its bytes not covered by a started round
// leads the next one. Before starting it, the leader yields while other
// appenders are writing or keep joining (bounded by half an fdatasync), so
// that writers woken together by the last round, and coming back
// together, share the next one instead of splitting into a small round
// that starts at once and a big one that waits for it (the old ×16
// latency: two fdatasyncs). Where nobody else is running, the yield costs
// nothing and the round starts at once. Up to maxSyncRounds run at once
// (1 by default: writers that arrive while an fdatasync is in flight
// gather for the next one); when a round ends, one writer of the
// gathering round is handed the start (lead). Each round has one
// channel, closed when the round is settled: writers are not woken one by
// one, nor by rounds that do not cover them.
//
// Rounds are settled in the order they started. A round's success counts
// only when every earlier round succeeded, since Linux reports a
// writeback error to only one of the fdatasyncs that overlap it; the first
// failure is sticky (Store.flushErr): it fails every writer not yet
// covered, and nothing on the log is acknowledged as durable afterwards.

// maxSyncRounds bounds the fdatasyncs in flight. Two overlapping
// fdatasyncs on one file give about 1.5× the syncs per second of one on
// the disks measured, but with the writer on pwrite one round at a time
// gathers more writers per fdatasync and wins: 16 writers of 1 KiB made
// 57–61k msg/s with 1 round against 43–53k with 2, 128 B 62–64k against
// 57–58k, and a flush=sync broker was as fast or faster
// (docs/lab/BENCHMARKS.md). The machinery for overlapping rounds stays (the
// settle order and sticky failure), so this is a tuning knob.
const maxSyncRounds = 1

// maxGather bounds how long a leader waits for other writers to join
// (also at most half the last fdatasync while they are runnable, one
// fdatasync for those expected back).
const maxGather = 400 * time.Microsecond

// gatherStep is how long a leader waiting for writers expected back
// sleeps between looks.
const gatherStep = 25 * time.Microsecond

// syncRound is one fdatasync pass over the commit log.
type syncRound struct {
	from, target int64
	done         chan struct{} // closed when settled
	lead         chan struct{} // cap 1: starts a gathering round
	joined       int           // writers waiting for it (while gathering)
	leading      bool          // a writer is about to start it
	ended        bool
	took         time.Duration
	err          error
}

func newSyncRound() *syncRound {
	return &syncRound{done: make(chan struct{}), lead: make(chan struct{}, 1)}
}

// waitDurable blocks until the commit log is durable up to end, starting
// and running a sync round if none covers it. The bytes below end must
// have been written to the segments (map or pwrite) before the call.
func (s *Store) waitDurable(ctx context.Context, end int64) error {
	s.flushMu.Lock()
	var joined *syncRound
	for {
		if s.flushed >= end {
			s.flushMu.Unlock()
			return nil
		}
		if ferr := s.flushErr; ferr != nil {
			s.flushMu.Unlock()
			return fmt.Errorf("commitlog: sync: %w: %w", store.ErrNotDurable, ferr)
		}
		var r *syncRound
		if s.startedTo >= end {
			for _, x := range s.rounds {
				if x.target >= end {
					r = x
					break
				}
			}
		}
		if r == nil {
			if s.gathering == nil {
				s.gathering = newSyncRound()
			}
			r = s.gathering
			if joined != r {
				joined = r
				r.joined++
			}
			if !r.leading && len(s.rounds) < maxSyncRounds {
				r.leading = true
				s.gatherLocked(r)
				if s.gathering != r {
					continue // failed or closed meanwhile
				}
				s.startRoundLocked(r)
				s.flushMu.Unlock()
				err := s.runRound(r)
				s.flushMu.Lock()
				s.endRoundLocked(r, err)
				continue
			}
		}
		s.flushMu.Unlock()
		select {
		case <-r.done:
		case <-r.lead:
		case <-ctx.Done():
			return fmt.Errorf("commitlog: wait for sync: %w: %w", store.ErrNotDurable, ctx.Err())
		}
		s.flushMu.Lock()
	}
}

// gatherLocked lets the appenders that are writing, or runnable, join r
// before it starts: it yields while some are in Append or the last yield
// brought one, for at most half the last fdatasync (maxGather). Then, if
// fewer writers joined than were waiting when the last round ended (the
// writers that round answered and those gathered behind it: s.expect), it
// waits for the rest for at most one fdatasync (maxGather): writers that
// a round answers come back after a network round trip, not within a
// yield, and without the wait they split into two cohorts that take
// turns, each its own fdatasync. A writer that does not come back costs
// one wait, after which the expectation is what came. Called with flushMu
// held; releases it while yielding and waiting.
func (s *Store) gatherLocked(r *syncRound) {
	budget := min(s.gatherMax, s.lastSync/2)
	if budget <= 0 {
		return
	}
	t0 := time.Now()
	for {
		n := r.joined
		s.flushMu.Unlock()
		runtime.Gosched()
		busy := s.inAppend.Load() > 0
		s.flushMu.Lock()
		if s.gathering != r || (!busy && r.joined == n) || time.Since(t0) >= budget {
			break
		}
	}
	if s.gathering != r || r.joined >= s.expect {
		return
	}
	wait := min(s.gatherMax, s.lastSync)
	// The wait polls in short sleeps of the thread (pause), not on a Go
	// timer: a sub-millisecond timer fires after about 1 ms when the
	// process is otherwise idle (the poller's millisecond timeout), which
	// would make a writer that does not come back cost 1 ms, not one
	// fdatasync.
	want := s.expect
	for r.joined < want && s.gathering == r {
		left := wait - time.Since(t0)
		if left <= 0 {
			s.expect = r.joined // some did not come back
			return
		}
		s.flushMu.Unlock()
		pause(min(left, gatherStep))
		s.flushMu.Lock()
	}
}

// startRoundLocked starts r at the current write position. Called with
// flushMu held.
func (s *Store) startRoundLocked(r *syncRound) {
	r.from, r.target = max(s.startedTo, s.flushed), s.wrote.Load()
	s.startedTo = r.target
	s.rounds = append(s.rounds, r)
	if s.gathering == r {
		s.gathering = nil
	}
}

// runRound fdatasyncs the segments holding [r.from, r.target).
func (s *Store) runRound(r *syncRound) error {
	var arr [4]*segment
	segs := arr[:0]
	s.segMu.RLock()
	for _, seg := range s.segs {
		if seg.base < r.target && seg.base+s.segSize > r.from {
			segs = append(segs, seg)
		}
	}
	s.segMu.RUnlock()
	t0 := time.Now()
	for _, seg := range segs {
		if err := s.syncData(seg.f); err != nil {
			// The cause as text: a failed fsync is sticky (fsyncgate,
			// diskfull.go), not a full disk that clears, even when the
			// file system says ENOSPC.
			return fmt.Errorf("commitlog: sync segment %s: %v", seg.name(), err)
		}
	}
	r.took = time.Since(t0)
	s.syncStats.observe(r.took)
	s.syncs.Add(1)
	return nil
}

// endRoundLocked records r's result and settles the rounds that can be,
// in start order. Called with flushMu held.
func (s *Store) endRoundLocked(r *syncRound, err error) {
	r.ended, r.err = true, err
	if err == nil {
		s.lastSync = r.took
	}
	s.expect = r.joined
	if g := s.gathering; g != nil {
		s.expect += g.joined
	}
	n := 0
	for _, x := range s.rounds {
		if !x.ended {
			break
		}
		n++
		switch {
		case x.err != nil:
			s.failLocked(x.err)
		case s.flushErr == nil && x.target > s.flushed:
			s.flushed = x.target
		}
		close(x.done)
	}
	if n > 0 {
		k := copy(s.rounds, s.rounds[n:])
		clear(s.rounds[k:])
		s.rounds = s.rounds[:k]
	}
	if g := s.gathering; g != nil && len(s.rounds) < maxSyncRounds {
		select {
		case g.lead <- struct{}{}:
		default:
		}
	}
}

// failLocked records a write or sync failure (sticky until reopen: see
// diskfull.go for why a failed fsync cannot be retried, and for the full
// disk, which is not recorded here) and wakes every writer waiting for a
// round not yet started. Called with flushMu held.
func (s *Store) failLocked(err error) {
	if s.flushErr == nil || errors.Is(s.flushErr, store.ErrClosed) {
		s.flushErr = err
		s.log.Error("commitlog: writes disabled until reopen", "err", err)
	}
	s.wakeGatheringLocked()
}

// wakeGatheringLocked wakes the writers of the gathering round (after a
// failure or on close: nobody will start it).
func (s *Store) wakeGatheringLocked() {
	if g := s.gathering; g != nil {
		s.gathering = nil
		close(g.done)
	}
}

// syncCommitLog makes the commit log durable up to the current write
// position and returns it.
func (s *Store) syncCommitLog() (int64, error) {
	if ferr := s.failure(); ferr != nil {
		return 0, ferr
	}
	target := s.wrote.Load()
	if err := s.waitDurable(context.Background(), target); err != nil {
		return 0, err
	}
	return target, nil
}
