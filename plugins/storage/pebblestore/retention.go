package pebblestore

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// DeleteBefore implements store.Store: it deletes every message stored
// before t (see the package documentation) and returns the record bytes
// deleted. The disk space is released as Pebble compacts the ranges.
func (s *Store) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pebblestore: delete before: %w", err)
	}
	if err := s.enter("delete before"); err != nil {
		return 0, err
	}
	defer s.done()
	s.retMu.Lock()
	defer s.retMu.Unlock()
	cutoff := t.UnixMilli()
	minP, end := s.minPhys.Load(), s.end.Load()
	if minP >= end {
		return 0, nil
	}
	cut, keepTS, err := s.firstAtOrAfter(ctx, minP, end, cutoff)
	if err != nil {
		return 0, err
	}
	if cut <= minP {
		return 0, nil
	}

	b := s.db.NewBatch()
	defer b.Close()
	type move struct {
		qs  *queueState
		min int64
	}
	var moves []move
	for _, qs := range s.queues.Snapshot() {
		mn, mx := qs.offsets()
		if mn >= mx {
			continue
		}
		newMin, err := s.firstEntryAtOrAbove(ctx, qs.q, mn, mx, cut)
		if err != nil {
			return 0, err
		}
		if newMin <= mn {
			continue
		}
		_ = b.DeleteRange(entryKey(nil, qs.q, mn), entryKey(nil, qs.q, newMin), nil)
		_ = b.Set(queueStateKey(qs.q), be.AppendUint64(nil, uint64(newMin)), nil)
		moves = append(moves, move{qs, newMin})
	}
	_ = b.DeleteRange(physKey(nil, minP), physKey(nil, cut), nil)
	// Every key of a bucket ending at or before keepTS belongs to a record
	// stored before keepTS, hence before cut.
	if kb := bucketOf(keepTS); kb > 0 {
		_ = b.DeleteRange(bucketKey(0), bucketKey(kb), nil)
	}
	_ = b.Set(stateMinPhys, be.AppendUint64(nil, uint64(cut)), nil)

	// Publish the new minimums first: a reader that then finds the
	// entries gone answers OFFSET_TOO_SMALL with the new min.
	s.minPhys.Store(cut)
	for _, m := range moves {
		m.qs.min.Store(m.min)
	}
	if err := s.guard("delete before", func() error { return s.db.Apply(b, pebble.Sync) }); err != nil {
		return 0, err
	}
	s.log.Info("pebblestore: deleted messages", "before", t.UTC(), "bytes", cut-minP, "queues", len(moves))
	return cut - minP, nil
}

// firstAtOrAfter bisects the physical offsets [lo, hi) for the first
// record stored at or after ts. It returns its offset (hi when there is
// none) and its store time (ts when there is none).
func (s *Store) firstAtOrAfter(ctx context.Context, lo, hi, ts int64) (int64, int64, error) {
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: physKey(nil, lo), UpperBound: physKey(nil, hi)})
	if err != nil {
		return 0, 0, fmt.Errorf("pebblestore: delete before: %w", err)
	}
	defer it.Close()
	// probe returns the first record at or after x: its offset and time
	// (ok false when none).
	key := make([]byte, 0, 9)
	probe := func(x int64) (int64, int64, bool, error) {
		if !it.SeekGE(physKey(key[:0], x)) {
			return 0, 0, false, it.Error()
		}
		pv, ok := parsePhysValue(it.Value())
		if !ok {
			return 0, 0, false, &store.CorruptionError{File: s.dir, Offset: x, Reason: "bad physical index value"}
		}
		return int64(be.Uint64(it.Key()[1:])), pv.ts, true, nil
	}
	// Find the smallest x in [lo, hi] whose first record at or after it
	// is stored at or after ts (or does not exist).
	l, h := lo, hi
	for l < h {
		mid := l + (h-l)/2
		_, t, ok, err := probe(mid)
		if err != nil {
			return 0, 0, fmt.Errorf("pebblestore: delete before: %w", err)
		}
		if !ok || t >= ts {
			h = mid
		} else {
			l = mid + 1
		}
	}
	p, t, ok, err := probe(l)
	if err != nil {
		return 0, 0, fmt.Errorf("pebblestore: delete before: %w", err)
	}
	if !ok {
		return hi, ts, nil
	}
	return p, t, nil
}

// firstEntryAtOrAbove bisects the offsets [lo, hi) of q for the first
// entry whose record's physical offset is at least phys (hi if none).
func (s *Store) firstEntryAtOrAbove(ctx context.Context, q store.Queue, lo, hi, phys int64) (int64, error) {
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: entryKey(nil, q, lo), UpperBound: entryKey(nil, q, hi)})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: delete before: %w", err)
	}
	defer it.Close()
	key := make([]byte, 0, 32)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !it.SeekGE(entryKey(key[:0], q, mid)) {
			if err := it.Error(); err != nil {
				return 0, fmt.Errorf("pebblestore: delete before: %w", err)
			}
			hi = mid
			continue
		}
		off := entryOffset(it.Key())
		v := it.Value()
		if len(v) < entryHeader+minRecordSize {
			return 0, &store.CorruptionError{File: s.dir, Offset: off, Reason: fmt.Sprintf("queue %s entry %d holds %d bytes", q, off, len(v))}
		}
		h, err := message.PeekHeader(v[entryHeader:])
		if err != nil {
			return 0, &store.CorruptionError{File: s.dir, Offset: off, Reason: err.Error()}
		}
		if h.CommitLogOffset >= phys {
			hi = mid
		} else {
			lo = max(mid, off) + 1
		}
	}
	return lo, nil
}

// DeleteTopic implements store.TopicDeleter: it deletes the topic's
// entries (and so its records), queue states and key-index entries. The
// 'm' keys of its records stay until retention passes them; Lookup
// answers ErrNotFound for them.
func (s *Store) DeleteTopic(ctx context.Context, topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pebblestore: delete topic %s: %w", topic, err)
	}
	if err := s.enter("delete topic " + topic); err != nil {
		return err
	}
	defer s.done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retMu.Lock()
	defer s.retMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := topicRange(prefixEntry, topic)
	_ = b.DeleteRange(lo, hi, nil)
	lo, hi = topicRange(prefixQueueState, topic)
	_ = b.DeleteRange(lo, hi, nil)
	// The topic's key-index entries, bucket by bucket.
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{prefixKey}, UpperBound: []byte{prefixKey + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: delete topic %s: %w", topic, err)
	}
	for valid := it.First(); valid; {
		bk := be.Uint32(it.Key()[1:5])
		p := be.AppendUint32([]byte{prefixKey}, bk)
		_ = b.DeleteRange(append(append(append([]byte(nil), p...), topic...), 0), append(append(append([]byte(nil), p...), topic...), 1), nil)
		if bk == ^uint32(0) {
			break
		}
		valid = it.SeekGE(bucketKey(bk + 1))
	}
	if err := firstErr(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("pebblestore: delete topic %s: %w", topic, err)
	}
	if err := s.guard("delete topic", func() error { return s.db.Apply(b, pebble.Sync) }); err != nil {
		return err
	}
	s.queues.DeleteTopic(topic)
	return nil
}
