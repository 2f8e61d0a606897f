package commitlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// entryBlock is how many consume-queue entries one read syscall fetches.
const entryBlock = 256

var entryPool = sync.Pool{New: func() any {
	b := make([]byte, 0, entryBlock*cqEntrySize)
	return &b
}}

// Read implements store.Store, following RocketMQ's GetMessageStatus table.
// It classifies the offset, then scans consume-queue entries a block at a
// time (batchReader.scan: pick the candidates, fetch their records with
// as few reads as the log's layout allows, accept or reject each) and
// finally settles the status (finishRead).
func (s *Store) Read(ctx context.Context, q store.Queue, offset int64, opts store.ReadOptions, into *store.ReadResult) error {
	if into == nil {
		return fmt.Errorf("commitlog: read %s: nil result: %w", q, store.ErrBadArgument)
	}
	into.Reset()
	if s.closed.Load() {
		return fmt.Errorf("commitlog: read %s: %w", q, store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commitlog: read %s: %w", q, err)
	}
	cq := s.queues.Get(q)
	if cq == nil {
		into.Status = store.NoMessageInQueue
		return nil
	}
	mn, mx := cq.offsets()
	if !into.Classify(offset, mn, mx) {
		return nil
	}
	maxMsgs, maxBytes, maxScan := opts.Limits()
	limit := mx
	if maxScan < limit-offset {
		limit = offset + maxScan
	}
	r := batchReader{s: s, q: q, opts: opts, into: into, maxMsgs: maxMsgs, maxBytes: maxBytes,
		buf: into.Buffer(min(maxBytes, 64<<10)), runEnd: -1, gap: s.ra.spanGap()}
	cur, dropped, err := r.scan(cq, offset, limit)
	into.SetBuffer(r.buf)
	switch {
	case err != nil:
		return err
	case dropped:
		// The topic was deleted under us.
		into.Reset()
		into.Status = store.NoMessageInQueue
		return nil
	}
	finishRead(cq, into, cur, limit)
	return nil
}

// finishRead sets the status and next offset of a read that scanned up
// to cur (of limit).
func finishRead(cq *consumeQueue, into *store.ReadResult, cur, limit int64) {
	if cur < limit && len(into.Records) == 0 && cur < cq.min.Load() {
		// Retention removed what we were reading.
		mn, mx := cq.offsets()
		into.MinOffset, into.MaxOffset = mn, mx
		into.Status, into.NextOffset = store.OffsetTooSmall, mn
		return
	}
	into.NextOffset = cur
	if len(into.Records) > 0 {
		into.Status = store.Found
	} else {
		into.Status = store.NoMatchedMessage
	}
}

// Lookup implements store.Store: the record at a commit-log offset.
func (s *Store) Lookup(ctx context.Context, phys int64) ([]byte, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("commitlog: lookup: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("commitlog: lookup: %w", err)
	}
	end := s.wrote.Load()
	if phys < 0 || phys < s.minPhys.Load() || phys >= end {
		return nil, fmt.Errorf("commitlog: lookup %d outside [%d, %d): %w", phys, s.minPhys.Load(), end, store.ErrOffsetOutOfRange)
	}
	pos := phys % s.segSize
	if pos+minRecordSize+blankSize > s.segSize || phys+minRecordSize > end {
		return nil, fmt.Errorf("commitlog: lookup %d: no record there: %w", phys, store.ErrNotFound)
	}
	var hdr [8]byte
	if err := s.readAt(phys, hdr[:]); err != nil {
		if errors.Is(err, errRemoved) {
			return nil, fmt.Errorf("commitlog: lookup %d: %w", phys, store.ErrOffsetOutOfRange)
		}
		return nil, s.closedErr("lookup", err)
	}
	size := int64(int32(be.Uint32(hdr[:])))
	if int32(be.Uint32(hdr[4:])) != message.MagicCode || size < minRecordSize || pos+size+blankSize > s.segSize || phys+size > end {
		return nil, fmt.Errorf("commitlog: lookup %d: no record there: %w", phys, store.ErrNotFound)
	}
	rec := make([]byte, size)
	if err := s.readAt(phys, rec); err != nil {
		if errors.Is(err, errRemoved) {
			return nil, fmt.Errorf("commitlog: lookup %d: %w", phys, store.ErrOffsetOutOfRange)
		}
		return nil, s.closedErr("lookup", err)
	}
	if v, ok := parseRecord(rec); !ok || v.phys != phys {
		return nil, fmt.Errorf("commitlog: lookup %d: no record there: %w", phys, store.ErrNotFound)
	}
	if why := checkRecord(rec, phys); why != "" {
		s.readDamage(phys, int32(size), why)
		return nil, &store.CorruptionError{File: s.segmentFile(phys), Offset: phys, Length: size, Reason: why}
	}
	return rec, nil
}

// OffsetByTime implements store.Store by bisecting the queue on store
// time (store timestamps never decrease: Append keeps them monotonic).
func (s *Store) OffsetByTime(ctx context.Context, q store.Queue, ts int64) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("commitlog: offset by time: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("commitlog: offset by time: %w", err)
	}
	cq := s.queues.Get(q)
	if cq == nil {
		return 0, nil
	}
	lo, hi := cq.offsets()
	for lo < hi {
		mid := lo + (hi-lo)/2
		t, err := s.storeTimeAt(cq, mid)
		if err != nil {
			if errors.Is(err, errRemoved) {
				lo = mid + 1
				continue
			}
			return 0, s.closedErr("offset by time "+q.String(), err)
		}
		if t >= ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

func (s *Store) storeTimeAt(cq *consumeQueue, off int64) (int64, error) {
	phys, size, _, err := cq.entry(off)
	if err != nil {
		return 0, err
	}
	if size < minRecordSize {
		return 0, &store.CorruptionError{File: cq.q.String(), Offset: off, Reason: fmt.Sprintf("entry size %d", size)}
	}
	var hdr [headerPeek]byte
	if err := s.readAt(phys, hdr[:]); err != nil {
		return 0, err
	}
	h, err := message.PeekHeader(hdr[:])
	if err != nil {
		return 0, &store.CorruptionError{File: segmentName(phys - phys%s.segSize), Offset: phys, Reason: err.Error()}
	}
	return h.StoreTimestamp, nil
}

// checkRead verifies a record a read found through queue q's entry at
// offset off: checkRecord, and that the record belongs there.
func checkRead(rec []byte, phys int64, q store.Queue, off int64) string {
	if why := checkRecord(rec, phys); why != "" {
		return why
	}
	if id, qo := int32(be.Uint32(rec[offRecQueueID:])), int64(be.Uint64(rec[offRecQueueOffset:])); id != q.ID || qo != off {
		return fmt.Sprintf("record at %d is queue %d offset %d", phys, id, qo)
	}
	return ""
}

// segmentFile names the segment holding phys, relative to the data
// directory.
func (s *Store) segmentFile(phys int64) string {
	return filepath.Join("commitlog", segmentName(phys-phys%s.segSize))
}

// readDamage records damage a read met and skipped (the first time for a
// position in the manifest, every time in the log and the skip count).
func (s *Store) readDamage(phys int64, size int32, why string) {
	first := s.damage.firstSeen(phys)
	s.noteDamage(store.CorruptionError{File: s.segmentFile(phys), Offset: phys, Length: int64(size), Reason: why}, 1, first)
}
