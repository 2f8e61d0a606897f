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

// appendReplicaLocked lays out, writes and dispatches the records of one
// AppendReplica call; nothing of them is published when a step fails.
// Called with s.mu held.
func (s *Store) appendReplicaLocked(recs [][]byte) (int64, error) {
	if err := s.replicaWritable(); err != nil {
		return 0, err
	}
	b := s.startReplicaBatch(len(recs))
	defer s.endReplicaBatch(b)
	if err := s.layOutReplica(b, recs); err != nil {
		s.undoQueueOffsets()
		return 0, err
	}
	s.writes.Add(1)
	written, err := s.writeReplica(b)
	if err != nil {
		if isNoSpace(err) {
			s.noteFull(nil, err)
		}
		s.undoQueueOffsets()
		return 0, err
	}
	flushErr := s.dispatchEntries()
	if flushErr == nil {
		s.noteWritten()
	}
	for _, ch := range written {
		ch.seg.lastTS.Store(b.lastTS)
	}
	if s.keys != nil {
		s.keys.mu.Lock()
		for _, v := range b.views {
			s.keys.addRawLocked(v.topic, v.props, v.phys)
		}
		s.keys.mu.Unlock()
	}
	s.lastTS = b.lastTS
	s.wrote.Store(b.end)
	if flushErr != nil {
		flushErr = fmt.Errorf("commitlog: dispatch: %w: %w", store.ErrNotDurable, flushErr)
		s.setFailure(flushErr)
		return 0, flushErr
	}
	return b.end, nil
}

// replicaBatch is the records of one AppendReplica call laid out for
// writing: buf holds their bytes (and blanks closing segments), cut into
// one chunk per segment.
type replicaBatch struct {
	chunks []chunk
	buf    []byte
	views  []recordView
	lastTS int64 // the highest store time, the log's so far included
	end    int64 // the log's end after the batch
}

// replicaWritable refuses a replica append to a closed or failed store.
func (s *Store) replicaWritable() error {
	if s.closed.Load() {
		return fmt.Errorf("commitlog: append replica: %w", store.ErrClosed)
	}
	if ferr := s.failure(); ferr != nil {
		return fmt.Errorf("commitlog: append replica after earlier failure: %w: %w", store.ErrNotDurable, ferr)
	}
	return s.fullRefusal() // a consume-queue tail waiting for space first
}

// startReplicaBatch starts a batch at the log's end, in the active
// segment, reusing the writer's buffers.
func (s *Store) startReplicaBatch(n int) *replicaBatch {
	start := s.wrote.Load()
	active := s.activeSegment()
	s.disp = s.disp[:0]
	s.touched = s.touched[:0]
	return &replicaBatch{
		chunks: append(s.chunks[:0], chunk{seg: active, base: active.base, pos: start - active.base}),
		buf:    s.wbuf[:0],
		views:  make([]recordView, 0, n),
		lastTS: s.lastTS,
	}
}

// endReplicaBatch resets the touched queues' pending entries and keeps
// the batch's buffers (a large one dropped) for the next write.
func (s *Store) endReplicaBatch(b *replicaBatch) {
	for _, cq := range s.touched {
		cq.touched = false
		cq.pend = cq.pend[:0]
	}
	buf := b.buf
	if cap(buf) > maxKeptWriteBuffer {
		buf = nil
	}
	s.wbuf = buf[:0]
	clear(b.chunks)
	s.chunks = b.chunks[:0]
}

// undoQueueOffsets gives the queues the batch touched back their next
// offsets from before it.
func (s *Store) undoQueueOffsets() {
	for _, cq := range s.touched {
		cq.next = cq.saved
	}
}

// layOutReplica checks each record (well formed, at the log's end or at
// the start of the next segment, inside its segment, a usable queue at
// its next offset) and lays it out in b: a blank closes a segment where
// the source rolled. The records' consume-queue entries are queued in
// s.disp and their queues' next offsets advanced.
func (s *Store) layOutReplica(b *replicaBatch, recs [][]byte) error {
	ci := 0
	wpos := b.chunks[0].pos
	for _, rec := range recs {
		v, ok := parseRecord(rec)
		if !ok {
			return fmt.Errorf("commitlog: append replica: malformed record: %w", store.ErrBadArgument)
		}
		at := b.chunks[ci].base + wpos
		size := int64(len(rec))
		if v.phys != at {
			next := b.chunks[ci].base + s.segSize
			if v.phys != next || wpos+blankSize > s.segSize {
				return fmt.Errorf("commitlog: append replica: record at %d, log ends at %d (same segment_size on both sides?): %w", v.phys, at, store.ErrBadArgument)
			}
			b.buf = be.AppendUint32(b.buf, uint32(s.segSize-wpos))
			b.buf = be.AppendUint32(b.buf, uint32(blankMagic))
			b.chunks[ci].end = len(b.buf)
			b.chunks = append(b.chunks, chunk{base: next, start: len(b.buf), end: len(b.buf)})
			ci++
			wpos = 0
		}
		if wpos+size+blankSize > s.segSize {
			return fmt.Errorf("commitlog: append replica: record of %d bytes at %d crosses the segment end: %w", size, v.phys, store.ErrBadArgument)
		}
		q := store.Queue{Topic: string(v.topic), ID: v.queueID}
		if err := checkTopic(q.Topic); err != nil || q.ID < 0 {
			return fmt.Errorf("commitlog: append replica: record at %d has an unusable queue %s: %w", v.phys, q, store.ErrBadArgument)
		}
		cq := s.queues.GetOrCreate(q)
		if !cq.touched {
			cq.touched, cq.saved = true, cq.next
			s.touched = append(s.touched, cq)
		}
		if v.queueOffset != cq.next {
			return fmt.Errorf("commitlog: append replica: record at %d has queue offset %d, %s expects %d: %w", v.phys, v.queueOffset, q, cq.next, store.ErrBadArgument)
		}
		b.buf = append(b.buf, rec...)
		s.disp = append(s.disp, dispatch{cq: cq, phys: v.phys, size: int32(size), tagsCode: recoveredTagsCode(v)})
		b.views = append(b.views, v)
		cq.next++
		wpos += size
		b.chunks[ci].end = len(b.buf)
		b.lastTS = max(b.lastTS, v.storeTS)
	}
	b.end = b.chunks[ci].base + wpos
	return nil
}

// writeReplica writes the batch's chunks, creating the segments it rolls
// into, and returns the chunks written. On failure what it wrote is cut
// and the segments it created removed.
func (s *Store) writeReplica(b *replicaBatch) ([]chunk, error) {
	var created []*segment
	var written []chunk
	for i := range b.chunks {
		ch := &b.chunks[i]
		if ch.seg == nil {
			seg, err := s.createSegment(ch.base)
			if err != nil {
				s.undoWrite(written, created)
				return nil, fmt.Errorf("commitlog: append replica: %w: %w", store.ErrNotDurable, err)
			}
			created = append(created, seg)
			ch.seg = seg
		}
		if ch.end > ch.start {
			if _, err := ch.seg.f.WriteAt(b.buf[ch.start:ch.end], ch.pos); err != nil {
				s.undoWrite(append(written, *ch), created)
				return nil, fmt.Errorf("commitlog: write segment %s: %w: %w", ch.seg.name(), store.ErrNotDurable, err)
			}
		}
		written = append(written, *ch)
	}
	return written, nil
}
