package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

var _ store.Verifier = (*Store)(nil)

// verifyWindow is how much of the log Verify reads at a time.
const verifyWindow = 1 << 20

// Verify implements store.Verifier (the scrubber): it reads the commit log
// from its first retained record to where it ended when Verify started,
// checks every record (layout, position, record or body CRC) and the
// consume-queue entry at its queue offset, rewriting an entry that points
// elsewhere (written entries only; the in-memory tail is the writer's).
// Damage is logged, counted and listed (the manifest records it once) and
// the pass goes on at the next valid record. It does not hold the writer.
func (s *Store) Verify(ctx context.Context, opts store.VerifyOptions) (store.VerifyReport, error) {
	var rep store.VerifyReport
	if s.closed.Load() {
		return rep, fmt.Errorf("commitlog: verify: %w", store.ErrClosed)
	}
	s.mu.Lock()
	floors := make(map[string]int64, len(s.floors))
	for k, v := range s.floors {
		floors[k] = v
	}
	s.mu.Unlock()
	start := time.Now()
	phys, end := s.minPhys.Load(), s.wrote.Load()
	buf := make([]byte, verifyWindow)
	pace := func() error {
		if opts.BytesPerSecond <= 0 {
			return ctx.Err()
		}
		ahead := time.Duration(float64(rep.Bytes)/float64(opts.BytesPerSecond)*float64(time.Second)) - time.Since(start)
		if ahead <= 0 {
			return ctx.Err()
		}
		t := time.NewTimer(ahead)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return store.ErrClosed
		case <-t.C:
			return nil
		}
	}
	for phys < end {
		if s.closed.Load() {
			return rep, fmt.Errorf("commitlog: verify: %w", store.ErrClosed)
		}
		if err := pace(); err != nil {
			return rep, fmt.Errorf("commitlog: verify: %w", err)
		}
		pos := phys % s.segSize
		segEnd := phys - pos + s.segSize
		n := min(int64(verifyWindow), segEnd-phys, end-phys)
		if n < 8 {
			phys = segEnd
			continue
		}
		win := buf[:n]
		if err := s.readAt(phys, win); err != nil {
			if errors.Is(err, errRemoved) {
				phys = max(phys, s.minPhys.Load())
				continue
			}
			return rep, s.closedErr("verify", err)
		}
		rep.Bytes += n
		next, err := s.verifyWindow(ctx, phys, win, end, floors, &rep)
		if err != nil {
			return rep, err
		}
		phys = next
	}
	if len(rep.Damage) > 0 {
		s.log.Warn("commitlog: verify found damage", "records", rep.Records, "entries", rep.Entries, "bytes", rep.Bytes, "damage", len(rep.Damage))
	} else {
		s.log.Info("commitlog: verify found no damage", "records", rep.Records, "entries", rep.Entries, "bytes", rep.Bytes, "took", time.Since(start))
	}
	return rep, nil
}

// verifyWindow checks the records of win, read at phys, and returns where
// the next read starts.
func (s *Store) verifyWindow(ctx context.Context, phys int64, win []byte, end int64, floors map[string]int64, rep *store.VerifyReport) (int64, error) {
	segEnd := phys - phys%s.segSize + s.segSize
	off := int64(0)
	for off+8 <= int64(len(win)) {
		at := phys + off
		size := int64(int32(be.Uint32(win[off:])))
		magic := int32(be.Uint32(win[off+4:]))
		if magic == message.BlankMagicCode && size == segEnd-at {
			return segEnd, nil
		}
		var rec []byte
		why := ""
		switch {
		case magic != message.MagicCode:
			why = fmt.Sprintf("bad magic %#x", uint32(magic))
		case size < minRecordSize || at+size+blankSize > segEnd || at+size > end:
			why = fmt.Sprintf("bad record size %d", size)
		case off+size > int64(len(win)):
			if off > 0 {
				return at, nil // read again from here
			}
			rec = make([]byte, size)
			if err := s.readAt(at, rec); err != nil {
				if errors.Is(err, errRemoved) {
					return max(at+1, s.minPhys.Load()), nil
				}
				return 0, s.closedErr("verify", err)
			}
			rep.Bytes += size - int64(len(win))
		default:
			rec = win[off : off+size]
		}
		if why == "" {
			why = checkRecord(rec, at)
		}
		if why != "" {
			next, err := s.verifyDamage(at, end, why, rep)
			return next, err
		}
		rep.Records++
		v, _ := parseRecord(rec)
		if fl, ok := floors[string(v.topic)]; !ok || at >= fl {
			if err := s.verifyEntry(v, at, int32(size), rep); err != nil {
				return 0, err
			}
		}
		off += size
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("commitlog: verify: %w", err)
		}
	}
	return phys + off, nil
}

// verifyDamage reports the damage Verify met at phys and returns where the
// next valid record (or the next segment) starts.
func (s *Store) verifyDamage(phys, end int64, why string, rep *store.VerifyReport) (int64, error) {
	s.segMu.RLock()
	var seg *segment
	last := false
	if len(s.segs) > 0 && phys >= s.segs[0].base {
		if i := int((phys - s.segs[0].base) / s.segSize); i < len(s.segs) {
			seg, last = s.segs[i], i == len(s.segs)-1
		}
	}
	s.segMu.RUnlock()
	segEnd := phys - phys%s.segSize + s.segSize
	if seg == nil {
		return max(phys+1, s.minPhys.Load()), nil
	}
	at, ok, _, err := s.resync(seg, phys-seg.base, last)
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return max(phys+1, s.minPhys.Load()), nil // removed by retention meanwhile
		}
		return 0, s.closedErr("verify", err)
	}
	next := segEnd
	if ok {
		next = seg.base + at
	}
	next = min(next, max(end, phys+1))
	ce := store.CorruptionError{File: s.segmentFile(phys), Offset: phys, Length: next - phys, Reason: why}
	if s.damage.firstSeen(phys) {
		persist := true
		if cp, existed, err := s.copyAside(seg, phys-seg.base, next-seg.base); err == nil {
			ce.Copy, persist = cp, !existed
		} else if !errors.Is(err, os.ErrClosed) {
			s.log.Error("commitlog: copy damaged bytes aside", "segment", seg.name(), "offset", phys, "err", err)
		}
		s.noteDamage(ce, 0, persist)
	}
	rep.Damage = append(rep.Damage, ce)
	return next, nil
}

// verifyEntry checks the consume-queue entry of a record Verify read,
// rewriting it when it points elsewhere.
func (s *Store) verifyEntry(v recordView, phys int64, size int32, rep *store.VerifyReport) error {
	cq := s.queues.Get(store.Queue{Topic: string(v.topic), ID: v.queueID})
	if cq == nil {
		return nil // a deleted topic
	}
	mn, mx := cq.offsets()
	if v.queueOffset < mn || v.queueOffset >= mx {
		return nil // removed by retention, or not published yet
	}
	rep.Entries++
	p, sz, _, err := cq.entry(v.queueOffset)
	if err != nil {
		if errors.Is(err, errRemoved) || cq.isDropped() {
			return nil
		}
		return s.closedErr("verify", err)
	}
	if p == phys && sz == size {
		return nil
	}
	ce := store.CorruptionError{File: cq.q.String(), Offset: v.queueOffset, Length: 1,
		Reason: fmt.Sprintf("consume-queue entry points at %d (%d bytes), the record is at %d (%d bytes)", p, sz, phys, size)}
	// Rewrite it where it is written out (the tail is the writer's, and
	// flushTail is what writes the files).
	cq.flushMu.Lock()
	cq.mu.RLock()
	inFiles := v.queueOffset < cq.tailFrom && !cq.dropped
	cq.mu.RUnlock()
	if inFiles {
		var e [cqEntrySize]byte
		putEntry(e[:], phys, size, recoveredTagsCode(v))
		if err := s.writeEntries(cq, v.queueOffset, e[:]); err != nil {
			cq.flushMu.Unlock()
			return err
		}
		ce.Reason += "; rewritten"
	}
	cq.flushMu.Unlock()
	rep.Damage = append(rep.Damage, ce)
	s.noteDamage(ce, 1, true)
	return nil
}

// scrubLoop runs Verify every interval, rate-limited, until the store
// closes (the background scrub).
func (s *Store) scrubLoop(every time.Duration, rate int64) {
	defer s.wg.Done()
	ctx := context.Background() // Verify stops on s.stop itself
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if _, err := s.Verify(ctx, store.VerifyOptions{BytesPerSecond: rate}); err != nil && !errors.Is(err, store.ErrClosed) && !s.closed.Load() {
			s.log.Error("commitlog: background scrub", "err", err)
		}
	}
}
