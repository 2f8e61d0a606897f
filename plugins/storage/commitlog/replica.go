package commitlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// Interface guards.
var (
	_ store.LogReader  = (*Store)(nil)
	_ store.Replicator = (*Store)(nil)
)

// LogOffsets implements store.LogReader.
func (s *Store) LogOffsets() (min, max int64) { return s.minPhys.Load(), s.wrote.Load() }

// ReadLog implements store.LogReader: whole records from commit-log offset
// from, skipping end-of-segment padding, until about maxBytes.
func (s *Store) ReadLog(ctx context.Context, from int64, maxBytes int) ([][]byte, int64, error) {
	if s.closed.Load() {
		return nil, from, fmt.Errorf("commitlog: read log: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, from, fmt.Errorf("commitlog: read log: %w", err)
	}
	end := s.wrote.Load()
	if from < s.minPhys.Load() || from > end {
		return nil, from, fmt.Errorf("commitlog: read log at %d outside [%d, %d]: %w", from, s.minPhys.Load(), end, store.ErrOffsetOutOfRange)
	}
	var recs [][]byte
	total := 0
	for from < end && (len(recs) == 0 || total < maxBytes) {
		pos := from % s.segSize
		if pos+blankSize > s.segSize {
			return recs, from, fmt.Errorf("commitlog: read log at %d: no record boundary: %w", from, store.ErrBadArgument)
		}
		// One read for a window of records (at least a header), then cut.
		win := min(int64(max(maxBytes-total, headerPeek)), s.segSize-pos, end-from)
		win = max(win, min(8, s.segSize-pos))
		buf := make([]byte, win)
		if err := s.readAt(from, buf); err != nil {
			if errors.Is(err, errRemoved) {
				return recs, from, fmt.Errorf("commitlog: read log at %d: %w", from, store.ErrOffsetOutOfRange)
			}
			return recs, from, s.closedErr("read log", err)
		}
		next := from
		for off := int64(0); off+8 <= int64(len(buf)) && (len(recs) == 0 || total < maxBytes); {
			at := from + off
			size := int64(int32(be.Uint32(buf[off:])))
			magic := int32(be.Uint32(buf[off+4:]))
			p := at % s.segSize
			if magic == message.BlankMagicCode && size == s.segSize-p {
				next = at + size // the next segment
				break
			}
			if magic != message.MagicCode || size < minRecordSize || p+size+blankSize > s.segSize || at+size > end {
				return recs, at, fmt.Errorf("commitlog: read log at %d: no record there: %w", at, store.ErrBadArgument)
			}
			if off+size > int64(len(buf)) {
				if len(recs) > 0 || off > 0 {
					break // the rest in the next window
				}
				rec := make([]byte, size)
				if err := s.readAt(at, rec); err != nil {
					return recs, at, s.closedErr("read log", err)
				}
				recs = append(recs, rec)
				total += int(size)
				next = at + size
				break
			}
			recs = append(recs, buf[off:off+size:off+size])
			total += int(size)
			off += size
			next = at + size
		}
		if next == from {
			break
		}
		from = next
	}
	return recs, from, nil
}

// AppendReplica implements store.Replicator: it writes records read from
// another commit log at the same commit-log offsets (closing the active
// segment with a blank where the source rolled), then dispatches them to
// the consume queues and the key index with their own queue offsets and
// store times. Both logs must use the same segment size.
func (s *Store) AppendReplica(ctx context.Context, recs [][]byte) error {
	if len(recs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commitlog: append replica: %w", err)
	}
	s.mu.Lock()
	end, err := s.appendReplicaLocked(recs)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.mode == store.FlushSync {
		return s.waitDurable(ctx, end)
	}
	return nil
}

func (s *Store) appendReplicaLocked(recs [][]byte) (int64, error) {
	switch {
	case s.closed.Load():
		return 0, fmt.Errorf("commitlog: append replica: %w", store.ErrClosed)
	default:
		if ferr := s.failure(); ferr != nil {
			return 0, fmt.Errorf("commitlog: append replica after earlier failure: %w: %w", store.ErrNotDurable, ferr)
		}
	}
	start := s.wrote.Load()
	active := s.activeSegment()
	chunks := append(s.chunks[:0], chunk{seg: active, base: active.base, pos: start - active.base})
	ci := 0
	wpos := chunks[0].pos
	buf := s.wbuf[:0]
	s.disp = s.disp[:0]
	s.touched = s.touched[:0]
	views := make([]recordView, 0, len(recs))
	defer func() {
		for _, cq := range s.touched {
			cq.touched = false
			cq.pend = cq.pend[:0]
		}
		if cap(buf) > maxKeptWriteBuffer {
			buf = nil
		}
		s.wbuf = buf[:0]
		clear(chunks)
		s.chunks = chunks[:0]
	}()
	undoQueues := func() {
		for _, cq := range s.touched {
			cq.next = cq.saved
		}
	}
	lastTS := s.lastTS
	for _, rec := range recs {
		v, ok := parseRecord(rec)
		if !ok {
			undoQueues()
			return 0, fmt.Errorf("commitlog: append replica: malformed record: %w", store.ErrBadArgument)
		}
		at := chunks[ci].base + wpos
		size := int64(len(rec))
		if v.phys != at {
			next := chunks[ci].base + s.segSize
			if v.phys != next || wpos+blankSize > s.segSize {
				undoQueues()
				return 0, fmt.Errorf("commitlog: append replica: record at %d, log ends at %d (same segment_size on both sides?): %w", v.phys, at, store.ErrBadArgument)
			}
			buf = be.AppendUint32(buf, uint32(s.segSize-wpos))
			buf = be.AppendUint32(buf, uint32(blankMagic))
			chunks[ci].end = len(buf)
			chunks = append(chunks, chunk{base: next, start: len(buf), end: len(buf)})
			ci++
			wpos = 0
		}
		if wpos+size+blankSize > s.segSize {
			undoQueues()
			return 0, fmt.Errorf("commitlog: append replica: record of %d bytes at %d crosses the segment end: %w", size, v.phys, store.ErrBadArgument)
		}
		q := store.Queue{Topic: string(v.topic), ID: v.queueID}
		if err := checkTopic(q.Topic); err != nil || q.ID < 0 {
			undoQueues()
			return 0, fmt.Errorf("commitlog: append replica: record at %d has an unusable queue %s: %w", v.phys, q, store.ErrBadArgument)
		}
		cq := s.queueFor(q)
		if !cq.touched {
			cq.touched, cq.saved = true, cq.next
			s.touched = append(s.touched, cq)
		}
		if v.queueOffset != cq.next {
			undoQueues()
			return 0, fmt.Errorf("commitlog: append replica: record at %d has queue offset %d, %s expects %d: %w", v.phys, v.queueOffset, q, cq.next, store.ErrBadArgument)
		}
		buf = append(buf, rec...)
		s.disp = append(s.disp, dispatch{cq: cq, phys: v.phys, size: int32(size), tagsCode: recoveredTagsCode(v)})
		views = append(views, v)
		cq.next++
		wpos += size
		chunks[ci].end = len(buf)
		lastTS = max(lastTS, v.storeTS)
	}
	s.writes.Add(1)
	end := chunks[ci].base + wpos

	var created []*segment
	var written []chunk
	for i := range chunks {
		ch := &chunks[i]
		if ch.seg == nil {
			seg, err := s.createSegment(ch.base)
			if err != nil {
				s.undoWrite(written, created)
				undoQueues()
				return 0, fmt.Errorf("commitlog: append replica: %w: %w", store.ErrNotDurable, err)
			}
			created = append(created, seg)
			ch.seg = seg
		}
		if ch.end > ch.start {
			if _, err := ch.seg.f.WriteAt(buf[ch.start:ch.end], ch.pos); err != nil {
				s.undoWrite(append(written, *ch), created)
				undoQueues()
				return 0, fmt.Errorf("commitlog: write segment %s: %w: %w", ch.seg.name(), store.ErrNotDurable, err)
			}
		}
		written = append(written, *ch)
	}
	for _, d := range s.disp {
		var e [cqEntrySize]byte
		putEntry(e[:], d.phys, d.size, d.tagsCode)
		d.cq.pend = append(d.cq.pend, e[:]...)
	}
	s.dirtyMu.Lock()
	for _, cq := range s.touched {
		s.dirtyQ[cq] = struct{}{}
	}
	s.dirtyMu.Unlock()
	var flushErr error
	for _, cq := range s.touched {
		if len(cq.pend) == 0 {
			continue
		}
		if cq.appendTail(cq.pend, cq.next) && flushErr == nil {
			flushErr = s.flushTail(cq)
		}
	}
	for _, ch := range written {
		ch.seg.lastTS.Store(lastTS)
	}
	if s.keys != nil {
		s.keys.mu.Lock()
		for _, v := range views {
			s.keys.addRawLocked(v.topic, v.props, v.phys)
		}
		s.keys.mu.Unlock()
	}
	s.lastTS = lastTS
	s.wrote.Store(end)
	if flushErr != nil {
		flushErr = fmt.Errorf("commitlog: dispatch: %w: %w", store.ErrNotDurable, flushErr)
		s.setFailure(flushErr)
		return 0, flushErr
	}
	return end, nil
}
