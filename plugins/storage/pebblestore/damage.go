package pebblestore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/store"
)

// Corruption handling. Pebble checksums every sstable block and WAL chunk.
// By default it reports on-disk corruption through Logger.Fatalf, which
// this store's logger turns into a panic: a damaged block read by a
// background compaction ended the process. The store instead hands Pebble
// an EventListener.DataCorruption that logs the file and the key range,
// keeps the finding (store.Verifier) and returns: the compaction fails and
// is not retried on that range for a while, reads of the damaged range
// fail with a corruption error, and every other key range is served. WAL
// damage is found before Pebble replays the log (walcheck.go).

var _ store.Verifier = (*Store)(nil)

// maxKeptDamage bounds the findings kept in memory.
const maxKeptDamage = 1000

type damageLog struct {
	mu      sync.Mutex
	list    []store.CorruptionError
	seen    map[string]struct{} // file + range already listed
	skipped atomic.Int64
	// last is the end of the last damaged key range reported, for Verify
	// to go on after it.
	lastEnd []byte
}

// dataCorruption is Pebble's EventListener.DataCorruption: it must not
// block (Pebble calls it in read paths) and must not panic.
func (s *Store) dataCorruption(info pebble.DataCorruptionInfo) {
	ce := store.CorruptionError{
		File:   info.Path,
		Reason: fmt.Sprintf("damaged keys %s: %v", describeKey(info.Bounds.Start)+" .. "+describeKey(info.Bounds.End.Key), info.Details),
	}
	key := info.Path + "\x00" + string(info.Bounds.Start) + "\x00" + string(info.Bounds.End.Key)
	s.damage.skipped.Add(1)
	s.damage.mu.Lock()
	s.damage.lastEnd = slices.Clone(info.Bounds.End.Key)
	_, dup := s.damage.seen[key]
	if !dup {
		if s.damage.seen == nil {
			s.damage.seen = map[string]struct{}{}
		}
		s.damage.seen[key] = struct{}{}
		if len(s.damage.list) < maxKeptDamage {
			s.damage.list = append(s.damage.list, ce)
		}
	}
	s.damage.mu.Unlock()
	if !dup {
		s.log.Error("pebblestore: on-disk corruption; the key range is not served, the rest is", "file", info.Path,
			"from", describeKey(info.Bounds.Start), "to", describeKey(info.Bounds.End.Key), "err", info.Details)
	}
}

// noteDamage records a finding of the store's own checks.
func (s *Store) noteDamage(ce store.CorruptionError, skipped int64) {
	s.log.Error("pebblestore: damaged data", "file", ce.File, "offset", ce.Offset, "length", ce.Length, "reason", ce.Reason, "copy", ce.Copy)
	s.damage.skipped.Add(skipped)
	s.damage.mu.Lock()
	if len(s.damage.list) < maxKeptDamage {
		s.damage.list = append(s.damage.list, ce)
	}
	s.damage.mu.Unlock()
}

// Damage implements store.Verifier.
func (s *Store) Damage() []store.CorruptionError {
	s.damage.mu.Lock()
	defer s.damage.mu.Unlock()
	return slices.Clone(s.damage.list)
}

// Skipped implements store.Verifier: reads refused and records lost to
// damage.
func (s *Store) Skipped() int64 { return s.damage.skipped.Load() }

// describeKey renders a store key for a log line: its kind and, for queue
// entries, the queue and offset.
func describeKey(k []byte) string {
	if len(k) == 0 {
		return "(start)"
	}
	switch k[0] {
	case prefixEntry:
		if i := bytes.IndexByte(k[1:], 0); i >= 0 && len(k) >= 1+i+1+4+8 {
			rest := k[1+i+1:]
			return fmt.Sprintf("queue %s/%d offset %d", k[1:1+i], int32(be.Uint32(rest)), int64(be.Uint64(rest[4:])))
		}
	case prefixPhys:
		if len(k) >= 9 {
			return fmt.Sprintf("physical offset %d", int64(be.Uint64(k[1:])))
		}
	}
	return fmt.Sprintf("%q", k)
}

// Verify implements store.Verifier: it reads every key of the database
// (Pebble checks each block's checksum) and every queue entry's record
// layout, rate-limited, and reports the damaged key ranges. Where Pebble
// reported the range of a damaged block, the pass goes on after it.
func (s *Store) Verify(ctx context.Context, opts store.VerifyOptions) (store.VerifyReport, error) {
	var rep store.VerifyReport
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed.Load() {
		return rep, fmt.Errorf("pebblestore: verify: %w", store.ErrClosed)
	}
	lower := []byte(nil)
	p := newPacer(opts.BytesPerSecond, s.stop)
	for attempt := 0; attempt < maxKeptDamage; attempt++ {
		it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower})
		if err != nil {
			return rep, fmt.Errorf("pebblestore: verify: %w", err)
		}
		var last []byte
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				break
			}
			rep.Bytes += int64(len(it.Key()) + len(v))
			if k := it.Key(); k[0] == prefixEntry {
				rep.Entries++
				if len(v) < entryHeader+minRecordSize || int(be.Uint32(v[entryHeader:])) != len(v)-entryHeader {
					ce := store.CorruptionError{File: s.dir, Reason: fmt.Sprintf("%s holds no whole record (%d bytes)", describeKey(k), len(v))}
					rep.Damage = append(rep.Damage, ce)
				} else {
					rep.Records++
				}
			}
			last = append(last[:0], it.Key()...)
			if err := p.wait(ctx, rep.Bytes); err != nil {
				it.Close()
				return rep, fmt.Errorf("pebblestore: verify: %w", err)
			}
		}
		ierr := it.Error()
		if ierr == nil {
			if _, err := it.ValueAndErr(); err != nil {
				ierr = err
			}
		}
		it.Close()
		if ierr == nil {
			break
		}
		if ctx.Err() != nil {
			return rep, fmt.Errorf("pebblestore: verify: %w", ctx.Err())
		}
		s.damage.mu.Lock()
		end := slices.Clone(s.damage.lastEnd)
		s.damage.mu.Unlock()
		rep.Damage = append(rep.Damage, store.CorruptionError{File: s.dir,
			Reason: fmt.Sprintf("keys after %s unreadable (to %s): %v", describeKey(last), describeKey(end), ierr)})
		if len(end) == 0 || bytes.Compare(end, last) <= 0 || bytes.Compare(end, lower) <= 0 {
			break // no range to skip to
		}
		lower = end
	}
	if len(rep.Damage) > 0 {
		s.log.Warn("pebblestore: verify found damage", "entries", rep.Entries, "bytes", rep.Bytes, "damage", len(rep.Damage))
	}
	return rep, nil
}

// pacer keeps a reader under a byte rate.
type pacer struct {
	rate  int64
	stop  <-chan struct{}
	start time.Time
}

func newPacer(rate int64, stop <-chan struct{}) *pacer {
	return &pacer{rate: rate, stop: stop, start: time.Now()}
}

// wait sleeps while done bytes are ahead of the rate.
func (p *pacer) wait(ctx context.Context, done int64) error {
	if p.rate <= 0 {
		return ctx.Err()
	}
	ahead := time.Duration(float64(done)/float64(p.rate)*float64(time.Second)) - time.Since(p.start)
	if ahead < 10*time.Millisecond {
		return ctx.Err()
	}
	t := time.NewTimer(ahead)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stop:
		return store.ErrClosed
	case <-t.C:
		return nil
	}
}

// writeAside writes the bytes of a damaged file into <storage.dir>/damaged
// and returns the copy's path.
func (s *Store) writeAside(path string, b []byte) (string, error) {
	dir := filepath.Join(filepath.Dir(s.dir), "damaged")
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "pebble-"+filepath.Base(path))
	if err := durable.WriteFile(dst, b, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}
