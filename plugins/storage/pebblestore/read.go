package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// defaultQueryMax bounds QueryByKey when max is not positive.
const defaultQueryMax = 32

// Read implements store.Store, following RocketMQ's GetMessageStatus
// table. It scans the queue's entries with one iterator; the iterator
// reads a consistent snapshot, so a read sees a prefix of the appends.
func (s *Store) Read(ctx context.Context, q store.Queue, offset int64, opts store.ReadOptions, into *store.ReadResult) error {
	if into == nil {
		return fmt.Errorf("pebblestore: read %s: nil result: %w", q, store.ErrBadArgument)
	}
	into.Reset()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pebblestore: read %s: %w", q, err)
	}
	if err := s.enter("read " + q.String()); err != nil {
		return err
	}
	defer s.done()
	qs := s.queues.Get(q)
	if qs == nil {
		into.Status = store.NoMessageInQueue
		return nil
	}
	mn, mx := qs.offsets()
	if !into.Classify(offset, mn, mx) {
		return nil
	}
	maxMsgs, maxBytes, maxScan := opts.Limits()
	limit := mx
	if maxScan < limit-offset {
		limit = offset + maxScan
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: entryKey(nil, q, offset),
		UpperBound: entryKey(nil, q, limit),
	})
	if err != nil {
		return fmt.Errorf("pebblestore: read %s: %w", q, err)
	}
	defer it.Close()

	buf := into.Buffer(min(maxBytes, 64<<10))
	var startsArr [64]int
	starts := startsArr[:0]
	cur := offset
	removed, full := false, false
	valid := it.First()
	for {
		if !valid {
			// The end of the range, or entries Pebble cannot read: those
			// are skipped and the read goes on after them.
			if valid, err = s.skipDamaged(it, q, &cur, limit); err != nil {
				into.SetBuffer(buf)
				return err
			}
			if !valid {
				break
			}
		}
		if k := entryOffset(it.Key()); k != cur {
			if mn, _ := qs.offsets(); k > cur && cur >= mn {
				// Entries missing above min: lost to damage (a WAL chunk).
				// Skip them, as the commit log skips damaged records.
				s.damage.skipped.Add(k - cur)
				s.log.Error("pebblestore: queue entries missing; skipped", "queue", q.String(), "from", cur, "to", k)
				cur = k
			} else {
				removed = true // retention or DeleteTopic removed what we read
				break
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			if !pebble.IsCorruptionError(err) {
				into.SetBuffer(buf)
				return fmt.Errorf("pebblestore: read %s at %d: %w", q, cur, err)
			}
			s.readDamage(q, cur, cur+1, err)
			cur++
			valid = cur < limit && it.SeekGE(entryKey(nil, q, cur))
			continue
		}
		if len(v) < entryHeader+minRecordSize {
			s.readDamage(q, cur, cur+1, fmt.Errorf("entry holds %d bytes", len(v)))
			cur++
			valid = it.Next()
			continue
		}
		rec := v[entryHeader:]
		// As RocketMQ: the batch-full check comes before filtering.
		if n := len(starts); n >= maxMsgs || (n > 0 && into.Bytes+len(rec) > maxBytes) {
			full = true
			break
		}
		if (opts.Filter == nil || opts.Filter(int64(be.Uint64(v)))) && (opts.Match == nil || opts.Match(rec)) {
			starts = append(starts, len(buf))
			buf = append(buf, rec...)
			into.QueueOffsets = append(into.QueueOffsets, cur)
			into.Bytes += len(rec)
		}
		cur++
		valid = it.Next()
	}
	if !removed && !full && cur < limit {
		// The iterator ended early: entries below max are gone.
		removed = true
	}
	for i, p := range starts {
		end := len(buf)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		into.Records = append(into.Records, buf[p:end:end])
	}
	into.SetBuffer(buf)
	if removed && len(into.Records) == 0 {
		if qs2 := s.queues.Get(q); qs2 == nil || qs2 != qs {
			into.Status, into.NextOffset = store.NoMessageInQueue, 0
			into.MinOffset, into.MaxOffset = 0, 0
			return nil
		}
		mn, mx = qs.offsets()
		into.MinOffset, into.MaxOffset = mn, mx
		if cur < mn {
			into.Status, into.NextOffset = store.OffsetTooSmall, mn
			return nil
		}
	}
	into.NextOffset = cur
	if len(into.Records) > 0 {
		into.Status = store.Found
	} else {
		into.Status = store.NoMatchedMessage
	}
	return nil
}

// maxDamageProbes bounds the entries one read probes past damage; the
// next read goes on from there.
const maxDamageProbes = 4096

// skipDamaged is called when it is not positioned: at the end of its range
// (false, nil), or on entries Pebble cannot read (a damaged sstable block
// fails its checksum). Then it probes the queue's offsets from *cur one by
// one until one can be read, skips and records those that cannot, and
// leaves it positioned on the first readable entry (true) or *cur at the
// end of the probed range (false): a damaged entry costs only itself, and
// the read answers a next offset past it.
func (s *Store) skipDamaged(it *pebble.Iterator, q store.Queue, cur *int64, limit int64) (bool, error) {
	err := it.Error()
	if err == nil {
		return false, nil
	}
	if !pebble.IsCorruptionError(err) {
		return false, fmt.Errorf("pebblestore: read %s at %d: %w", q, *cur, err)
	}
	from := *cur
	end := min(limit, from+maxDamageProbes)
	key := make([]byte, 0, 32)
	o := from
	valid := false
	for ; o < end; o++ {
		valid = it.SeekGE(entryKey(key[:0], q, o))
		if valid {
			break
		}
		if err := it.Error(); err == nil {
			break // no entry at or after o in the range
		} else if !pebble.IsCorruptionError(err) {
			return false, fmt.Errorf("pebblestore: read %s at %d: %w", q, o, err)
		}
	}
	if o > from {
		s.readDamage(q, from, o, err)
	}
	*cur = o
	return valid, nil
}

// readDamage records queue entries [from, to) of q a read could not read
// and skipped: logged and counted every time, listed and written to the
// damage manifest the first time.
func (s *Store) readDamage(q store.Queue, from, to int64, cause error) {
	ce := store.CorruptionError{File: s.dir, Offset: from, Length: to - from,
		Reason: fmt.Sprintf("queue %s offsets %d..%d unreadable, skipped: %s", q, from, to-1, firstLine(cause))}
	key := fmt.Sprintf("read\x00%s\x00%d", q, from)
	s.damage.mu.Lock()
	_, seen := s.damage.seen[key]
	if !seen && len(s.damage.seen) < maxKeptDamage {
		if s.damage.seen == nil {
			s.damage.seen = map[string]struct{}{}
		}
		s.damage.seen[key] = struct{}{}
	}
	s.damage.mu.Unlock()
	if seen {
		s.damage.skipped.Add(to - from)
		s.log.Error("pebblestore: damaged queue entries skipped", "queue", q.String(), "from", from, "to", to, "err", firstLine(cause))
		return
	}
	s.noteDamage(ce, to-from, true)
}

// firstLine is err's message without the detail lines Pebble's errors
// carry.
func firstLine(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// Lookup implements store.Store: the record at a physical offset.
func (s *Store) Lookup(ctx context.Context, phys int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pebblestore: lookup: %w", err)
	}
	if err := s.enter("lookup"); err != nil {
		return nil, err
	}
	defer s.done()
	mn, end := s.minPhys.Load(), s.end.Load()
	if phys < 0 || phys < mn || phys >= end {
		return nil, fmt.Errorf("pebblestore: lookup %d outside [%d, %d): %w", phys, mn, end, store.ErrOffsetOutOfRange)
	}
	v, err := s.get(physKey(nil, phys))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("pebblestore: lookup %d: no record there: %w", phys, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: lookup %d: %w", phys, err)
	}
	pv, ok := parsePhysValue(v)
	if !ok {
		return nil, &store.CorruptionError{File: s.dir, Offset: phys, Reason: "bad physical index value"}
	}
	rec, err := s.entryRecord(pv.q, pv.off, phys)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: lookup %d: %w", phys, err)
	}
	return rec, nil
}

// entryRecord returns a copy of the record of q at off, checking that it
// is the record at phys (a deleted and recreated topic reuses offsets).
func (s *Store) entryRecord(q store.Queue, off, phys int64) ([]byte, error) {
	v, closer, err := s.db.Get(entryKey(nil, q, off))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%s offset %d is gone: %w", q, off, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if len(v) < entryHeader+minRecordSize {
		return nil, &store.CorruptionError{File: s.dir, Offset: phys, Reason: fmt.Sprintf("queue %s entry %d holds %d bytes", q, off, len(v))}
	}
	rec := v[entryHeader:]
	if int64(be.Uint64(rec[recOffPhys:])) != phys {
		return nil, fmt.Errorf("%s offset %d holds another record: %w", q, off, store.ErrNotFound)
	}
	return append([]byte(nil), rec...), nil
}

// OffsetByTime implements store.Store by bisecting the queue on store
// time (store timestamps never decrease: Append keeps them monotonic).
func (s *Store) OffsetByTime(ctx context.Context, q store.Queue, ts int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pebblestore: offset by time: %w", err)
	}
	if err := s.enter("offset by time"); err != nil {
		return 0, err
	}
	defer s.done()
	qs := s.queues.Get(q)
	if qs == nil {
		return 0, nil
	}
	lo, hi := qs.offsets()
	if lo >= hi {
		return lo, nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: entryKey(nil, q, lo), UpperBound: entryKey(nil, q, hi)})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: offset by time %s: %w", q, err)
	}
	defer it.Close()
	key := make([]byte, 0, 32)
	for lo < hi {
		mid := lo + (hi-lo)/2
		key = entryKey(key[:0], q, mid)
		if !it.SeekGE(key) || entryOffset(it.Key()) != mid {
			if err := it.Error(); pebble.IsCorruptionError(err) {
				// A damaged entry: its store time is taken from the next
				// readable one (store times never decrease), the damaged
				// ones are skipped by the reads that start there.
				at := mid
				if found, _ := s.skipDamaged(it, q, &at, hi); !found {
					hi = mid
					continue
				}
			} else if err != nil {
				return 0, fmt.Errorf("pebblestore: offset by time %s: %w", q, err)
			} else {
				lo = mid + 1 // removed under us
				continue
			}
		}
		v, err := it.ValueAndErr()
		if err != nil || len(v) < entryHeader+minRecordSize {
			lo = mid + 1 // damaged: not the answer
			continue
		}
		h, err := message.PeekHeader(v[entryHeader:])
		if err != nil {
			lo = mid + 1
			continue
		}
		if h.StoreTimestamp >= ts {
			hi = mid
		} else {
			lo = max(mid, entryOffset(it.Key())) + 1
		}
	}
	if mn, _ := qs.offsets(); lo < mn {
		lo = mn
	}
	return lo, nil
}

// QueryByKey implements store.KeyIndexer: up to max of the newest records
// of topic carrying key whose store time is in [begin, end], oldest first.
// It walks the key's entries newest first, bucket by bucket, jumping over
// buckets without keys.
func (s *Store) QueryByKey(ctx context.Context, topic, key string, begin, end int64, max int) ([][]byte, error) {
	if err := s.enter("query by key"); err != nil {
		return nil, err
	}
	defer s.done()
	if max <= 0 {
		max = defaultQueryMax
	}
	end = min(end, s.lastStoreTS.Load())
	if key == "" || end < begin || end < 0 {
		return nil, nil
	}
	lowB, highB := bucketOf(begin), bucketOf(end)
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: bucketKey(lowB), UpperBound: prefixEnd(bucketKey(highB))})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: query by key: %w", err)
	}
	defer it.Close()
	var out [][]byte
	var pfx []byte
	b := highB
	for len(out) < max {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("pebblestore: query by key: %w", err)
		}
		pfx = keyPrefix(pfx[:0], b, topic, key)
		valid := it.SeekLT(prefixEnd(pfx))
		for ; valid && len(out) < max && bytes.HasPrefix(it.Key(), pfx); valid = it.Prev() {
			k, v := it.Key(), it.Value()
			if len(k) != len(pfx)+8 || len(v) != 20 {
				continue
			}
			ts := int64(be.Uint64(v))
			if ts < begin || ts > end {
				continue
			}
			phys := int64(be.Uint64(k[len(pfx):]))
			if phys < s.minPhys.Load() {
				continue
			}
			q := store.Queue{Topic: topic, ID: int32(be.Uint32(v[8:]))}
			rec, err := s.entryRecord(q, int64(be.Uint64(v[12:])), phys)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if off := int64(be.Uint64(v[12:])); pebble.IsCorruptionError(err) {
				s.readDamage(q, off, off+1, err) // a damaged record costs only itself
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("pebblestore: query by key: %w", err)
			}
			out = append(out, rec)
		}
		if err := it.Error(); err != nil {
			return nil, fmt.Errorf("pebblestore: query by key: %w", err)
		}
		if !valid || len(out) >= max || b == lowB {
			break
		}
		// The iterator is on the key before this bucket's run: continue in
		// its bucket, or the previous one if it is still this bucket.
		nb := be.Uint32(it.Key()[1:5])
		if nb >= b {
			nb = b - 1
		}
		if nb < lowB {
			break
		}
		b = nb
	}
	slices.Reverse(out)
	return out, nil
}
