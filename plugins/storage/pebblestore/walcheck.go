package pebblestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/quivermq/quiver/core/store"
)

// WAL damage. Pebble replays its last WAL up to the first chunk it cannot
// read and takes that for the end of the log (a torn write), silently:
// bytes flipped in the middle of the WAL dropped every batch after them.
// Before Pebble opens, the store reads each WAL itself (the record format
// of pebble/record: 32 KiB blocks of checksummed chunks). When a bad chunk
// is followed by valid chunks of the same log, it is damage, not a torn
// tail: the WAL is copied aside, the damage is logged and listed, and
// after Pebble opened, the batches found after the damage are applied
// again (their keys are the records' own, so re-applying is idempotent);
// only the batches in the damaged chunks are lost.

const (
	walBlockSize = 32 << 10
	walLegacyHdr = 7
	walRecycHdr  = 11
	walSyncHdr   = 19
)

var walCRCTable = crc32.MakeTable(crc32.Castagnoli)

// walCRC is Pebble's masked CRC-32C (internal/crc).
func walCRC(b []byte) uint32 {
	c := crc32.Update(0, walCRCTable, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walDamage is what checkWALs found in one WAL.
type walDamage struct {
	path   string
	num    uint32
	offset int64    // first bad chunk
	cut    int64    // start of the record holding it
	after  [][]byte // whole batches found after the damage
	data   []byte   // the WAL as found
	// repaired: the WAL was cut before the damage and given an end
	// (Pebble refused to open on it: a WAL before the last must end
	// cleanly).
	repaired bool
}

// repairWAL copies a damaged WAL aside and cuts it before the damage with
// an end-of-log trailer (a chunk naming the next log number, which Pebble
// reads as a clean end), so Pebble replays what precedes the damage and
// goes on with the later WALs.
func (s *Store) repairWAL(d *walDamage) error {
	if _, err := s.writeAside(d.path, d.data); err != nil {
		return err
	}
	b := append([]byte(nil), d.data[:d.cut]...)
	if rem := walBlockSize - len(b)%walBlockSize; rem < walRecycHdr {
		b = append(b, make([]byte, rem)...)
	}
	var t [walRecycHdr]byte
	t[6] = 5 // recyclable full chunk
	binary.LittleEndian.PutUint32(t[7:], d.num+1)
	binary.LittleEndian.PutUint32(t[0:], walCRC(t[6:]))
	b = append(b, t[:]...)
	b = append(b, make([]byte, walBlockSize-len(b)%walBlockSize)...)
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: cut damaged WAL %s: %w", d.path, err)
	}
	d.repaired = true
	s.log.Warn("pebblestore: damaged WAL cut before the damage so the database opens (the original is copied aside)", "file", d.path, "cut", d.cut)
	return nil
}

// scanWALCut walks a WAL's chunks. It returns the offset of the first
// chunk it could not read (-1 if none), where the WAL can be cut so that it
// ends cleanly before the damage (the start of the record the first bad
// chunk belongs to), the whole records that follow it in later blocks, and
// whether any valid chunk of this log follows it.
func scanWALCut(b []byte, logNum uint32) (bad, cut int64, after [][]byte, confirmed bool) {
	bad, cut = -1, -1
	var cur []byte
	inRec := false
	recStart := 0
	for blk := 0; blk < len(b); blk += walBlockSize {
		end := min(blk+walBlockSize, len(b))
		off := blk
		for off+walLegacyHdr <= end {
			sum := binary.LittleEndian.Uint32(b[off:])
			n := int(binary.LittleEndian.Uint16(b[off+4:]))
			enc := b[off+6]
			if sum == 0 && n == 0 && enc == 0 && (off+walRecycHdr > end || (off+walSyncHdr > end && allZero(b[off:end]))) {
				break // the writer pads a block's end that no header fits in
			}
			hdr := 0
			switch {
			case enc >= 1 && enc <= 4:
				hdr = walLegacyHdr
			case enc >= 5 && enc <= 8:
				hdr = walRecycHdr
			case enc >= 9 && enc <= 12:
				hdr = walSyncHdr
			}
			ok := hdr > 0 && off+hdr+n <= end
			if ok && hdr > walLegacyHdr && binary.LittleEndian.Uint32(b[off+7:]) != logNum {
				ok = false // another log's chunk (recycled file) or the EOF trailer
			}
			if ok && walCRC(b[off+6:off+hdr+n]) != sum {
				ok = false
			}
			if !ok {
				if bad < 0 {
					bad, cut = int64(off), int64(off)
					if inRec {
						cut = int64(recStart)
					}
				}
				inRec, cur = false, cur[:0]
				break // look again at the next block
			}
			if bad >= 0 {
				confirmed = true
			}
			payload := b[off+hdr : off+hdr+n]
			switch (enc - 1) % 4 {
			case 0: // full
				if bad >= 0 {
					after = append(after, append([]byte(nil), payload...))
				}
				inRec = false
			case 1: // first
				cur, inRec, recStart = append(cur[:0], payload...), true, off
			case 2: // middle
				if inRec {
					cur = append(cur, payload...)
				}
			case 3: // last
				if inRec && bad >= 0 {
					after = append(after, append(append([]byte(nil), cur...), payload...))
				}
				inRec = false
			}
			off += hdr + n
		}
	}
	return bad, cut, after, confirmed
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkWALs reads the WALs of the database directory before Pebble opens
// it and returns those with a bad chunk followed by valid ones. Whether
// the damage matters is known once Pebble has opened: it replays only the
// WALs not yet flushed, and logs where it stopped (confirmWALDamage).
func (s *Store) checkWALs() []walDamage {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.log"))
	if err != nil {
		return nil
	}
	var out []walDamage
	for _, path := range names {
		num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 32)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			s.log.Error("pebblestore: read WAL to check it", "file", path, "err", err)
			continue
		}
		bad, cut, after, confirmed := scanWALCut(b, uint32(num))
		if bad < 0 || !confirmed {
			continue // clean, or a torn tail
		}
		out = append(out, walDamage{path: path, num: uint32(num), offset: bad, cut: cut, after: after, data: b})
	}
	return out
}

// confirmWALDamage keeps the candidates of WALs Pebble replayed and
// stopped reading in before the damage's end: those lost batches. They are
// copied aside, logged and listed.
func (s *Store) confirmWALDamage(cands []walDamage, stops *walStops) []walDamage {
	var out []walDamage
	for _, d := range cands {
		stop, ok := stops.get(filepath.Base(d.path))
		if !ok || (!d.repaired && stop > d.offset+walBlockSize) {
			continue // not replayed (already flushed), or replay got past it
		}
		ce := store.CorruptionError{File: d.path, Offset: d.offset, Length: int64(len(d.data)) - d.offset,
			Reason: fmt.Sprintf("WAL damaged at offset %d: replay stopped at %d with valid chunks after it; %d batches after the damage are applied again", d.offset, stop, len(d.after))}
		if cp, err := s.writeAside(d.path, d.data); err != nil {
			s.log.Error("pebblestore: copy damaged WAL aside", "file", d.path, "err", err)
		} else {
			ce.Copy = cp
		}
		s.noteDamage(ce, 1)
		out = append(out, d)
	}
	return out
}

// walStops records where Pebble's WAL replay stopped in each WAL file (its
// "stopped reading at offset" log line).
type walStops struct {
	mu sync.Mutex
	at map[string]int64
}

func (w *walStops) put(file string, off int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[string]int64{}
	}
	w.at[filepath.Base(file)] = off
}

func (w *walStops) get(file string) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	off, ok := w.at[file]
	return off, ok
}

// noteInfo picks Pebble's replay line out of its log.
func (w *walStops) noteInfo(format string, args []any) {
	if w == nil || !strings.Contains(format, "stopped reading at offset") {
		return
	}
	for _, a := range args {
		if o, ok := a.(wal.Offset); ok && o.PhysicalFile != "" {
			w.put(o.PhysicalFile, o.Physical)
		}
	}
}

// reapplyWAL applies the batches found after WAL damage once Pebble has
// opened (and replayed what came before it).
func (s *Store) reapplyWAL(dmg []walDamage) error {
	n := 0
	for _, d := range dmg {
		for _, repr := range d.after {
			// Only the message keys (records, physical index, key
			// index): they are written once and never change, so applying
			// them late is safe. Metadata, queue state and deletions
			// could undo later writes; they are left out.
			b := s.db.NewBatch()
			r := batchrepr.Read(repr)
			for {
				kind, k, v, ok, err := r.Next()
				if err != nil || !ok {
					break
				}
				if kind != pebble.InternalKeyKindSet || len(k) == 0 || (k[0] != prefixEntry && k[0] != prefixPhys && k[0] != prefixKey) {
					continue
				}
				if err := b.Set(k, v, nil); err != nil {
					b.Close()
					return fmt.Errorf("pebblestore: re-apply batches after WAL damage in %s: %w", d.path, err)
				}
			}
			if b.Empty() {
				b.Close()
				continue
			}
			if err := s.db.Apply(b, pebble.Sync); err != nil {
				b.Close()
				return fmt.Errorf("pebblestore: re-apply batches after WAL damage in %s: %w", d.path, err)
			}
			b.Close()
			n++
		}
	}
	if n > 0 {
		s.log.Warn("pebblestore: batches after WAL damage applied again", "batches", n)
	}
	return nil
}
