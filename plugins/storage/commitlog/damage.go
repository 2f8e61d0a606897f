package commitlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/store"
)

// Damage handling. Damaged bytes are never zeroed or overwritten in place:
// before recovery skips or cuts them they are copied to
// damaged/<segment>-<offset>-<length> under the data directory, and each
// finding is appended to damaged/MANIFEST.jsonl (one JSON object a line,
// read by `mq store verify`), logged with its segment and offset, kept in
// memory for Verifier.Damage and counted in Verifier.Skipped.

// DamageDir is the directory under the data directory that holds the
// copies of damaged bytes and the manifest.
const DamageDir = "damaged"

// ManifestName is the damage manifest in DamageDir.
const ManifestName = "MANIFEST.jsonl"

// maxKeptDamage bounds the damage list kept in memory.
const maxKeptDamage = 1000

// ManifestEntry is one line of the damage manifest.
type ManifestEntry struct {
	Time   time.Time `json:"time"`
	File   string    `json:"file"`
	Offset int64     `json:"offset"`
	Length int64     `json:"length"`
	Reason string    `json:"reason"`
	Copy   string    `json:"copy,omitempty"`
	// Skipped is how many messages (or index entries) the damage cost.
	Skipped int64 `json:"skipped"`
}

// damageLog is the store's record of what it found.
type damageLog struct {
	mu      sync.Mutex
	list    []store.CorruptionError
	dropped int // findings not kept once list reached maxKeptDamage
	seen    map[int64]struct{}
	skipped atomic.Int64
}

// firstSeen reports whether a read meets damage at phys for the first time.
func (d *damageLog) firstSeen(phys int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[phys]; ok {
		return false
	}
	if d.seen == nil {
		d.seen = map[int64]struct{}{}
	}
	if len(d.seen) < maxKeptDamage {
		d.seen[phys] = struct{}{}
	}
	return true
}

func (d *damageLog) add(ce store.CorruptionError, skipped int64) {
	d.skipped.Add(skipped)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.list) >= maxKeptDamage {
		d.dropped++
		return
	}
	d.list = append(d.list, ce)
}

// Damage implements store.Verifier.
func (s *Store) Damage() []store.CorruptionError {
	s.damage.mu.Lock()
	defer s.damage.mu.Unlock()
	return append([]store.CorruptionError(nil), s.damage.list...)
}

// Skipped implements store.Verifier.
func (s *Store) Skipped() int64 { return s.damage.skipped.Load() }

// noteDamage records a finding: logs it, keeps it and, when persist is
// set, appends it to the manifest.
func (s *Store) noteDamage(ce store.CorruptionError, skipped int64, persist bool) {
	s.log.Error("commitlog: damaged data skipped", "file", ce.File, "offset", ce.Offset, "length", ce.Length,
		"reason", ce.Reason, "skipped", skipped, "copy", ce.Copy)
	s.damage.add(ce, skipped)
	if !persist {
		return
	}
	if err := s.appendManifest(ManifestEntry{Time: time.Now().UTC(), File: ce.File, Offset: ce.Offset, Length: ce.Length,
		Reason: ce.Reason, Copy: ce.Copy, Skipped: skipped}); err != nil {
		s.log.Error("commitlog: write damage manifest", "err", err)
	}
}

// quarantine copies the bytes [pos, end) of seg aside (their non-zero
// part up to nz) and records the damage. skipped is how many messages it
// costs, when known.
func (s *Store) quarantine(seg *segment, pos, end, nz int64, reason string, skipped int64) {
	ce := store.CorruptionError{File: filepath.Join("commitlog", seg.name()), Offset: seg.base + pos, Length: end - pos, Reason: reason}
	persist := true
	if hi := min(end, nz); hi > pos {
		cp, existed, err := s.copyAside(seg, pos, hi)
		if err != nil {
			s.log.Error("commitlog: copy damaged bytes aside", "segment", seg.name(), "offset", seg.base+pos, "err", err)
		}
		// Met again on a later open: the manifest has it already.
		ce.Copy, persist = cp, !existed
	}
	s.noteDamage(ce, skipped, persist)
}

// copyAside copies [pos, end) of seg to a new file in the damage directory
// and syncs it; it returns the file's path relative to the data directory
// and whether that copy existed already (the same damage found on an
// earlier open: damaged bytes skipped stay in the segment).
func (s *Store) copyAside(seg *segment, pos, end int64) (string, bool, error) {
	dir := filepath.Join(s.dir, DamageDir)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	name := fmt.Sprintf("%s-%020d-%d", seg.name(), seg.base+pos, end-pos)
	path := filepath.Join(dir, name)
	f, err := durable.CreateFile(path, 0o644)
	if errors.Is(err, os.ErrExist) {
		return filepath.Join(DamageDir, name), true, nil
	}
	if err != nil {
		return "", false, err
	}
	_, err = io.Copy(f, io.NewSectionReader(seg.f, pos, end-pos))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("commitlog: copy %s [%d, %d) aside: %w", seg.name(), pos, end, err)
	}
	return filepath.Join(DamageDir, name), false, nil
}

// appendManifest appends one entry to the damage manifest and syncs it.
func (s *Store) appendManifest(e ManifestEntry) error {
	dir := filepath.Join(s.dir, DamageDir)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ManifestName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: open damage manifest: %w", err)
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
		return fmt.Errorf("commitlog: append damage manifest: %w", err)
	}
	return nil
}

// ReadManifest reads the damage manifest of the data directory dir (none:
// no entries).
func ReadManifest(dir string) ([]ManifestEntry, error) {
	b, err := os.ReadFile(filepath.Join(dir, DamageDir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("commitlog: read damage manifest: %w", err)
	}
	var out []ManifestEntry
	for i, line := range splitLines(b) {
		var e ManifestEntry
		if err := json.Unmarshal(line, &e); err != nil {
			// A torn last line (crash while appending) is not fatal.
			return out, fmt.Errorf("commitlog: damage manifest line %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
