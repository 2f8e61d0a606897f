package pebblestore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
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

	// manifestMu orders appends to the damage manifest; manifestSeen
	// holds the findings it lists (read from it at the first append), so
	// damage met again after a restart is listed once.
	manifestMu   sync.Mutex
	manifestSeen map[string]struct{}
}

// DamageDir is the directory under the data directory (storage.dir) that
// holds the copies of damaged files and the damage manifest, as for the
// CommitLog engine.
const DamageDir = "damaged"

// ManifestName is the damage manifest in DamageDir: one JSON object a
// line, in the CommitLog engine's format, read by mq store verify.
const ManifestName = "MANIFEST.jsonl"

// manifestEntry is one line of the damage manifest (the CommitLog
// engine's ManifestEntry).
type manifestEntry struct {
	Time    time.Time `json:"time"`
	File    string    `json:"file"`
	Offset  int64     `json:"offset"`
	Length  int64     `json:"length"`
	Reason  string    `json:"reason"`
	Copy    string    `json:"copy,omitempty"`
	Skipped int64     `json:"skipped"`
}

func (e manifestEntry) key() string {
	return fmt.Sprintf("%s\x00%d\x00%d\x00%s", e.File, e.Offset, e.Length, e.Reason)
}

// dataDir is the data directory (storage.dir) the store is in.
func (s *Store) dataDir() string { return filepath.Dir(s.dir) }

// relPath names path relative to the data directory when it is inside it.
func (s *Store) relPath(path string) string {
	if rel, err := filepath.Rel(s.dataDir(), path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}

// appendManifest appends a finding to the damage manifest and syncs it,
// unless the manifest lists it already. A failure is logged: the finding
// is still logged, listed and counted.
func (s *Store) appendManifest(ce store.CorruptionError, skipped int64) {
	e := manifestEntry{Time: time.Now().UTC(), File: s.relPath(ce.File), Offset: ce.Offset, Length: ce.Length,
		Reason: ce.Reason, Skipped: skipped}
	if ce.Copy != "" {
		e.Copy = s.relPath(ce.Copy)
	}
	d := &s.damage
	d.manifestMu.Lock()
	defer d.manifestMu.Unlock()
	dir := filepath.Join(s.dataDir(), DamageDir)
	path := filepath.Join(dir, ManifestName)
	if d.manifestSeen == nil {
		d.manifestSeen = map[string]struct{}{}
		if b, err := os.ReadFile(path); err == nil {
			for _, line := range bytes.Split(b, []byte("\n")) {
				var old manifestEntry
				if json.Unmarshal(line, &old) == nil {
					d.manifestSeen[old.key()] = struct{}{}
				}
			}
		}
	}
	if _, ok := d.manifestSeen[e.key()]; ok {
		return
	}
	if err := writeManifestLine(dir, path, e); err != nil {
		s.log.Error("pebblestore: write damage manifest", "err", err)
		return
	}
	if len(d.manifestSeen) < maxKeptDamage {
		d.manifestSeen[e.key()] = struct{}{}
	}
}

func writeManifestLine(dir, path string, e manifestEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && statErr != nil {
		err = durable.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
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
		s.log.Error("pebblestore: on-disk corruption; reads skip the damaged entries, the rest is served", "file", info.Path,
			"from", describeKey(info.Bounds.Start), "to", describeKey(info.Bounds.End.Key), "err", fmt.Sprint(info.Details))
		s.appendManifest(ce, 0)
	}
}

// noteDamage records a finding of the store's own checks: it logs it,
// keeps it, counts skipped and, when persist is set, appends it to the
// damage manifest.
func (s *Store) noteDamage(ce store.CorruptionError, skipped int64, persist bool) {
	s.log.Error("pebblestore: damaged data skipped", "file", ce.File, "offset", ce.Offset, "length", ce.Length,
		"reason", ce.Reason, "skipped", skipped, "copy", ce.Copy)
	s.damage.skipped.Add(skipped)
	s.damage.mu.Lock()
	if len(s.damage.list) < maxKeptDamage {
		s.damage.list = append(s.damage.list, ce)
	}
	s.damage.mu.Unlock()
	if persist {
		s.appendManifest(ce, skipped)
	}
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
// layout, rate-limited, and reports the damage. Queue entries are read
// queue by queue as Read reads them: an unreadable entry is probed past
// (skipDamaged), so the report names the damaged queue offsets and every
// other entry is checked. In the other keys (metadata, indexes), where
// Pebble reported the key range of a damaged file, the pass goes on after
// it.
func (s *Store) Verify(ctx context.Context, opts store.VerifyOptions) (store.VerifyReport, error) {
	var rep store.VerifyReport
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed.Load() {
		return rep, fmt.Errorf("pebblestore: verify: %w", store.ErrClosed)
	}
	p := newPacer(opts.BytesPerSecond, s.stop)
	if err := s.verifyKeys(ctx, p, nil, []byte{prefixEntry}, &rep); err != nil {
		return rep, err
	}
	queues := s.queues.Snapshot()
	slices.SortFunc(queues, func(a, b *queueState) int {
		return bytes.Compare(entryKey(nil, a.q, 0), entryKey(nil, b.q, 0))
	})
	for _, qs := range queues {
		if err := s.verifyQueue(ctx, p, qs, &rep); err != nil {
			return rep, err
		}
	}
	if err := s.verifyKeys(ctx, p, []byte{prefixEntry + 1}, nil, &rep); err != nil {
		return rep, err
	}
	if len(rep.Damage) > 0 {
		s.log.Warn("pebblestore: verify found damage", "entries", rep.Entries, "bytes", rep.Bytes, "damage", len(rep.Damage))
	}
	return rep, nil
}

// verifyQueue reads the entries of one queue, skipping damaged ones.
func (s *Store) verifyQueue(ctx context.Context, p *pacer, qs *queueState, rep *store.VerifyReport) error {
	mn, mx := qs.offsets()
	if mn >= mx {
		return nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: entryKey(nil, qs.q, mn), UpperBound: entryKey(nil, qs.q, mx)})
	if err != nil {
		return fmt.Errorf("pebblestore: verify %s: %w", qs.q, err)
	}
	defer it.Close()
	cur := mn
	valid := it.First()
	for {
		if !valid {
			from := cur
			if valid, err = s.skipDamaged(it, qs.q, &cur, mx); err != nil {
				return fmt.Errorf("pebblestore: verify: %w", err)
			}
			if cur > from {
				rep.Damage = append(rep.Damage, store.CorruptionError{File: s.dir, Offset: from, Length: cur - from,
					Reason: fmt.Sprintf("queue %s offsets %d..%d unreadable", qs.q, from, cur-1)})
			}
			if !valid {
				if cur >= mx || it.Error() == nil {
					return nil
				}
				continue // the probes stopped: go on from cur
			}
		}
		k := it.Key()
		cur = entryOffset(k) + 1
		v, err := it.ValueAndErr()
		switch {
		case err != nil:
			rep.Damage = append(rep.Damage, store.CorruptionError{File: s.dir, Offset: cur - 1, Length: 1,
				Reason: fmt.Sprintf("queue %s offsets %d..%d unreadable: %s", qs.q, cur-1, cur-1, firstLine(err))})
			valid = cur < mx && it.SeekGE(entryKey(nil, qs.q, cur))
			continue
		case len(v) < entryHeader+minRecordSize || int(be.Uint32(v[entryHeader:])) != len(v)-entryHeader:
			rep.Entries++
			rep.Damage = append(rep.Damage, store.CorruptionError{File: s.dir, Offset: cur - 1, Length: 1,
				Reason: fmt.Sprintf("%s holds no whole record (%d bytes)", describeKey(k), len(v))})
		default:
			rep.Entries++
			rep.Records++
		}
		rep.Bytes += int64(len(k) + len(v))
		if err := p.wait(ctx, rep.Bytes); err != nil {
			return fmt.Errorf("pebblestore: verify: %w", err)
		}
		valid = it.Next()
	}
}

// verifyKeys reads the keys in [lower, upper). Where a read fails, the
// pass goes on after the end of the damaged file's key range Pebble
// reported.
func (s *Store) verifyKeys(ctx context.Context, p *pacer, lower, upper []byte, rep *store.VerifyReport) error {
	for attempt := 0; attempt < maxKeptDamage; attempt++ {
		it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return fmt.Errorf("pebblestore: verify: %w", err)
		}
		var last []byte
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				break
			}
			rep.Bytes += int64(len(it.Key()) + len(v))
			last = append(last[:0], it.Key()...)
			if err := p.wait(ctx, rep.Bytes); err != nil {
				it.Close()
				return fmt.Errorf("pebblestore: verify: %w", err)
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
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pebblestore: verify: %w", ctx.Err())
		}
		s.damage.mu.Lock()
		end := slices.Clone(s.damage.lastEnd)
		s.damage.mu.Unlock()
		rep.Damage = append(rep.Damage, store.CorruptionError{File: s.dir,
			Reason: fmt.Sprintf("keys after %s unreadable (to %s): %s", describeKey(last), describeKey(end), firstLine(ierr))})
		if len(end) == 0 || bytes.Compare(end, last) <= 0 || bytes.Compare(end, lower) <= 0 || (upper != nil && bytes.Compare(end, upper) >= 0) {
			return nil // no range to skip to
		}
		lower = end
	}
	return nil
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
	dir := filepath.Join(s.dataDir(), DamageDir)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "pebble-"+filepath.Base(path))
	if err := durable.WriteFile(dst, b, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}

// Recovery over damage. The store's state keys (format version, min_phys,
// the queue states) and the ends of the indexes are read when the store
// opens; when Pebble cannot read them (a damaged sstable block), recover
// finds what it needs elsewhere instead of refusing to open: the
// findings are logged, listed and written to the damage manifest.

// stateDamaged records a state key or index end Pebble cannot read.
func (s *Store) stateDamaged(what string, err error) {
	s.noteDamage(store.CorruptionError{File: s.dir, Reason: fmt.Sprintf("%s unreadable: %s", what, firstLine(err))}, 0, true)
}

// firstPhys is the first physical offset of the physical index (0 when it
// cannot be read): min_phys when its key is damaged.
func (s *Store) firstPhys() int64 {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPhys}, UpperBound: []byte{prefixPhys + 1}})
	if err != nil {
		return 0
	}
	defer it.Close()
	if it.First() {
		return int64(be.Uint64(it.Key()[1:]))
	}
	return 0
}

// queueEndFromPhys is the end of q's offsets (its last offset + 1) when
// its last entries cannot be read: the physical index, read from its end
// back, names the queue offset of each record. 0 when none is found.
func (s *Store) queueEndFromPhys(q store.Queue, cause error) int64 {
	s.noteDamage(store.CorruptionError{File: s.dir, Reason: fmt.Sprintf("last entries of queue %s unreadable: %s", q, firstLine(cause))}, 0, true)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPhys}, UpperBound: []byte{prefixPhys + 1}})
	if err != nil {
		return 0
	}
	defer it.Close()
	for valid := it.Last(); valid; valid = it.Prev() {
		if pv, ok := parsePhysValue(it.Value()); ok && pv.q == q {
			return pv.off + 1
		}
	}
	if err := it.Error(); err != nil {
		s.log.Error("pebblestore: the end of a queue with damaged entries is not known", "queue", q.String(), "err", firstLine(err))
	}
	return 0
}

// queuesFromEntries adds the queues whose state keys cannot be read,
// from their entries: a queue starts at its first entry and ends after
// its last. Their state keys are written again with their next append.
func (s *Store) queuesFromEntries(cause error) {
	s.stateDamaged("queue states", cause)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEntry}, UpperBound: []byte{prefixEntry + 1}})
	if err != nil {
		return
	}
	defer it.Close()
	var pfx []byte
	added := 0
	for valid := it.First(); valid; valid = it.SeekGE(prefixEnd(pfx)) {
		q, ok := parseQueueKey(it.Key(), true)
		if !ok {
			break
		}
		pfx = appendQueuePrefix(pfx[:0], prefixEntry, q)
		if s.queues.Get(q) != nil {
			continue
		}
		mn := entryOffset(it.Key())
		mx := mn + 1
		if it.SeekLT(prefixEnd(pfx)) && bytes.HasPrefix(it.Key(), pfx) {
			mx = entryOffset(it.Key()) + 1
		} else if err := it.Error(); err != nil {
			mx = max(mx, s.queueEndFromPhys(q, err))
		}
		qs := &queueState{q: q}
		qs.min.Store(mn)
		qs.max.Store(mx)
		s.queues.Set(q, qs)
		added++
	}
	if err := it.Error(); err != nil {
		s.log.Error("pebblestore: queues after damaged entries not found", "err", firstLine(err))
	}
	s.log.Warn("pebblestore: queues found from their entries", "queues", added)
}

// endFromQueues sets the next physical offset and the last store time
// from the queues' last records when the end of the physical index cannot
// be read.
func (s *Store) endFromQueues() {
	for _, qs := range s.queues.Snapshot() {
		_, mx := qs.offsets()
		if mx == 0 {
			continue
		}
		v, closer, err := s.db.Get(entryKey(nil, qs.q, mx-1))
		if err != nil {
			continue
		}
		if len(v) >= entryHeader+minRecordSize {
			rec := v[entryHeader:]
			s.next = max(s.next, int64(be.Uint64(rec[recOffPhys:]))+int64(len(rec)))
			if h, err := message.PeekHeader(rec); err == nil {
				s.lastTS = max(s.lastTS, h.StoreTimestamp)
			}
		}
		_ = closer.Close()
	}
	s.end.Store(s.next)
	s.lastStoreTS.Store(s.lastTS)
}
