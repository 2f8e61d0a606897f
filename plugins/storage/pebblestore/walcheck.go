package pebblestore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/quivermq/quiver/core/store"
)

// WAL damage. Pebble replays its last WAL up to the first chunk it cannot
// read and takes that for the end of the log (a torn write), silently, or
// refuses to open when it sees valid chunks after it: bytes flipped in the
// middle of the WAL dropped every batch after them, the broker's metadata
// documents saved at its stop included. Before Pebble opens, the store
// reads each WAL itself (the record format of pebble/record: 32 KiB blocks
// of checksummed chunks). After a chunk that fails its checksum (its
// length may be damaged too) the reading goes on at the next position of
// the block where valid chunks of the log follow each other with
// contiguous batch sequence numbers (walResync), so a damaged record costs
// only itself; logs without log numbers in their chunk headers (written
// before Pebble's recyclable format) go on at the next block. When valid
// chunks of the same log follow a bad one, it is
// damage, not a torn tail: the WAL is copied aside, the damage is logged,
// listed and written to the damage manifest, and after Pebble opened,
// every batch found after the damage (and every batch of the later WALs
// Pebble replayed, so that their writes stay the last) is applied again,
// in log order and as one batch: the store ends as if only the damaged
// records had never been written. Metadata documents (topic and group
// tables), queue state and deletions are re-applied like the messages.

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
	lost   int      // records lost to bad chunks
	data   []byte   // the WAL as found
	// repaired: the WAL was cut before the damage and given an end
	// (Pebble refused to open on it: a WAL before the last must end
	// cleanly).
	repaired bool
}

// walLog is a WAL with no damage found and its batches, kept to be
// applied again after an earlier WAL's damage.
type walLog struct {
	path    string
	num     uint32
	batches [][]byte
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

// walScan is what scanWAL read of one WAL.
type walScan struct {
	// bad is the offset of the first chunk that could not be read (-1 if
	// none); cut is where the WAL can be cut so that it ends cleanly
	// before it (the start of the record the chunk belongs to).
	bad, cut int64
	// confirmed: a valid chunk of this log follows the bad one (damage,
	// not a torn tail).
	confirmed bool
	// batches are the whole records read, in log order; those from
	// firstAfter on come after the first bad chunk.
	batches    [][]byte
	firstAfter int
	// lost counts the records that bad chunks cost, up to the last valid
	// chunk.
	lost int
}

// walChunk reads the chunk header at off of the block ending at end: its
// header size (0: no chunk type), payload length and type, whether it
// fits the block and whether it is a valid chunk of this log (checksum
// and log number).
func walChunk(b []byte, off, end int, logNum uint32) (hdr, n int, enc byte, fits, ok bool) {
	sum := binary.LittleEndian.Uint32(b[off:])
	n = int(binary.LittleEndian.Uint16(b[off+4:]))
	enc = b[off+6]
	switch {
	case enc >= 1 && enc <= 4:
		hdr = walLegacyHdr
	case enc >= 5 && enc <= 8:
		hdr = walRecycHdr
	case enc >= 9 && enc <= 12:
		hdr = walSyncHdr
	}
	fits = hdr > 0 && off+hdr <= end && off+hdr+n <= end
	ok = fits
	if ok && hdr > walLegacyHdr && binary.LittleEndian.Uint32(b[off+7:]) != logNum {
		ok = false // another log's chunk (recycled file) or the EOF trailer
	}
	if ok && walCRC(b[off+6:off+hdr+n]) != sum {
		ok = false
	}
	return hdr, n, enc, fits, ok
}

// walPadding reports whether the block's end at off is the writer's
// padding (no header fits there).
func walPadding(b []byte, off, end int) bool {
	return binary.LittleEndian.Uint32(b[off:]) == 0 && b[off+4] == 0 && b[off+5] == 0 && b[off+6] == 0 &&
		(off+walRecycHdr > end || (off+walSyncHdr > end && allZero(b[off:end])))
}

// batchSeq reads the sequence number and count of the batch a full or
// first chunk's payload starts.
func batchSeq(payload []byte) (seq uint64, count uint32, ok bool) {
	if len(payload) < 12 {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(payload), binary.LittleEndian.Uint32(payload[8:]), true
}

// walResync looks for where the chunks after a bad one start again in
// its block, when the bad chunk's length cannot be trusted: the first
// position from from on where valid chunks of this log (of the header
// size the log uses; resync is for logs with log numbers in their chunk
// headers) follow each other to the block's end, and where the batches
// they start have sequence numbers at least next and contiguous. The
// chunk that follows a damaged one is the first such position; one
// inside the damaged chunk's payload would have to be a forged chunk
// chain with the log's number and the store's exact sequence numbers.
func walResync(b []byte, from, end int, logNum uint32, family int, next uint64) (int, bool) {
	if family <= walLegacyHdr {
		return 0, false
	}
	for p := from; p+family <= end; p++ {
		if e := b[p+6]; (family == walRecycHdr && (e < 5 || e > 8)) || (family == walSyncHdr && (e < 9 || e > 12)) ||
			binary.LittleEndian.Uint32(b[p+7:]) != logNum {
			continue
		}
		if walChainOK(b, p, end, logNum, next) {
			return p, true
		}
	}
	return 0, false
}

// walChainOK reports whether valid chunks follow each other from p to the
// block's end (or the log's) with contiguous batch sequence numbers, from
// next on.
func walChainOK(b []byte, p, end int, logNum uint32, next uint64) bool {
	chunks, started := 0, false
	for p+walLegacyHdr <= end {
		if chunks > 0 && walPadding(b, p, end) {
			break
		}
		hdr, n, enc, _, ok := walChunk(b, p, end, logNum)
		if !ok {
			// The log's end: zeros, or a recycled file's older chunks.
			return chunks > 0 && (enc == 0 || (hdr > walLegacyHdr && p+hdr <= end && binary.LittleEndian.Uint32(b[p+7:]) != logNum))
		}
		if t := (enc - 1) % 4; t == 0 || t == 1 { // full, first
			seq, count, ok := batchSeq(b[p+hdr : p+hdr+n])
			switch {
			case !ok && t == 1:
				// A first chunk too short to hold the batch header: the
				// writer starts a record in the last bytes of a block
				// (often with no payload at all) and goes on in the next
				// block. Its sequence number is not here to check; the
				// chain ends with it.
			case !ok || seq < next || (started && seq != next):
				return false // before the damage, or not contiguous with the batch before it
			default:
				next, started = seq+uint64(count), true
			}
		}
		chunks++
		p += hdr + n
	}
	return chunks > 0
}

// scanWAL walks a WAL's chunks. After a bad chunk the reading goes on at
// the next valid chunk of its block (walResync), so a damaged record costs
// only itself; where none is found, at the next block.
func scanWAL(b []byte, logNum uint32) walScan {
	sc := walScan{bad: -1, cut: -1}
	var cur []byte
	inRec := false
	recStart := 0
	pending := 0    // bad chunks since the last valid chunk
	family := 0     // header size of the log's chunks
	var next uint64 // sequence number after the last batch read
	for blk := 0; blk < len(b); blk += walBlockSize {
		end := min(blk+walBlockSize, len(b))
		off := blk
		for off+walLegacyHdr <= end {
			if walPadding(b, off, end) {
				break // the writer pads a block's end that no header fits in
			}
			hdr, n, enc, fits, ok := walChunk(b, off, end, logNum)
			if !ok {
				if sc.bad < 0 {
					sc.bad, sc.cut = int64(off), int64(off)
					if inRec {
						sc.cut = int64(recStart)
					}
					sc.firstAfter = len(sc.batches)
				}
				pending++
				inRec, cur = false, cur[:0]
				if p, found := walResync(b, off+1, end, logNum, family, next); found {
					off = p
					continue
				}
				if fits && family <= walLegacyHdr {
					off += hdr + n // no resync without log numbers: trust the length
					continue
				}
				break // no chunk boundary known: look again at the next block
			}
			if family == 0 {
				family = hdr
			}
			if sc.bad >= 0 {
				sc.confirmed = true
				sc.lost += pending
				pending = 0
			}
			payload := b[off+hdr : off+hdr+n]
			switch (enc - 1) % 4 {
			case 0: // full
				sc.batches = append(sc.batches, slices.Clone(payload))
				inRec = false
			case 1: // first
				cur, inRec, recStart = append(cur[:0], payload...), true, off
			case 2: // middle
				if inRec {
					cur = append(cur, payload...)
				}
			case 3: // last
				if inRec {
					sc.batches = append(sc.batches, append(slices.Clone(cur), payload...))
				}
				inRec = false
			}
			if t := (enc - 1) % 4; t == 0 || t == 1 {
				if seq, count, ok := batchSeq(payload); ok {
					next = seq + uint64(count)
				}
			}
			off += hdr + n
		}
	}
	if sc.bad < 0 {
		sc.firstAfter = len(sc.batches)
	}
	return sc
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
// it and returns those with a bad chunk followed by valid ones, and the
// WALs after the first of them (their batches are applied again after
// the damaged WAL's, to stay the last writes). Whether the damage matters
// is known once Pebble has opened: it replays only the WALs not yet
// flushed, and logs where it stopped (confirmWALDamage).
func (s *Store) checkWALs() ([]walDamage, []walLog) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.log"))
	if err != nil {
		return nil, nil
	}
	type numbered struct {
		path string
		num  uint32
	}
	var logs []numbered
	for _, path := range names {
		num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 32)
		if err == nil {
			logs = append(logs, numbered{path, uint32(num)})
		}
	}
	slices.SortFunc(logs, func(a, b numbered) int { return cmp.Compare(a.num, b.num) })
	var dmg []walDamage
	var later []walLog
	for _, l := range logs {
		b, err := os.ReadFile(l.path)
		if err != nil {
			s.log.Error("pebblestore: read WAL to check it", "file", l.path, "err", err)
			continue
		}
		sc := scanWAL(b, l.num)
		if len(dmg) > 0 {
			later = append(later, walLog{path: l.path, num: l.num, batches: sc.batches})
		}
		if sc.bad < 0 || !sc.confirmed {
			continue // clean, or a torn tail
		}
		dmg = append(dmg, walDamage{path: l.path, num: l.num, offset: sc.bad, cut: sc.cut,
			after: sc.batches[sc.firstAfter:], lost: sc.lost, data: b})
	}
	return dmg, later
}

// confirmWALDamage keeps the candidates of WALs Pebble replayed and
// stopped reading in before the damage's end: those lost batches. They are
// copied aside, logged, listed and written to the damage manifest.
func (s *Store) confirmWALDamage(cands []walDamage, stops *walStops) []walDamage {
	var out []walDamage
	for _, d := range cands {
		stop, ok := stops.get(filepath.Base(d.path))
		if !ok || (!d.repaired && stop > d.offset+walBlockSize) {
			continue // not replayed (already flushed), or replay got past it
		}
		ce := store.CorruptionError{File: d.path, Offset: d.offset, Length: int64(len(d.data)) - d.offset,
			Reason: fmt.Sprintf("WAL damaged at offset %d: %d records lost; replay stopped at %d with valid chunks after it; %d batches after the damage are applied again", d.offset, d.lost, stop, len(d.after))}
		if cp, err := s.writeAside(d.path, d.data); err != nil {
			s.log.Error("pebblestore: copy damaged WAL aside", "file", d.path, "err", err)
		} else {
			ce.Copy = cp
		}
		s.noteDamage(ce, int64(max(d.lost, 1)), true)
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

// reapplyWAL applies, once Pebble has opened (and replayed what came
// before the damage), the batches found after the first confirmed WAL
// damage and then every batch of the later WALs Pebble replayed, in log
// order, as one batch. Every write is applied: the last write of a key in
// this sequence is its last write in the log, whatever Pebble replayed
// before, so applying the later WALs' batches a second time only keeps
// them after the damaged WAL's.
func (s *Store) reapplyWAL(dmg []walDamage, later []walLog) error {
	if len(dmg) == 0 {
		return nil
	}
	first := dmg[0]
	for _, d := range dmg[1:] {
		if d.num < first.num {
			first = d
		}
	}
	seqs := [][][]byte{first.after}
	for _, l := range later {
		// A later WAL with damage of its own gives its readable batches.
		if _, replayed := s.walStops.get(filepath.Base(l.path)); l.num > first.num && replayed {
			seqs = append(seqs, l.batches)
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	batches, ops := 0, 0
	for _, seq := range seqs {
		for _, repr := range seq {
			r := batchrepr.Read(repr)
			batches++
			for {
				kind, k, v, ok, err := r.Next()
				if err != nil || !ok {
					break
				}
				switch kind {
				case pebble.InternalKeyKindSet:
					err = b.Set(k, v, nil)
				case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
					err = b.Delete(k, nil)
				case pebble.InternalKeyKindRangeDelete:
					err = b.DeleteRange(k, v, nil)
				default:
					continue // LogData (the sync marker) and kinds the store does not write
				}
				if err != nil {
					return fmt.Errorf("pebblestore: re-apply batches after WAL damage in %s: %w", first.path, err)
				}
				ops++
			}
		}
	}
	if b.Empty() {
		return nil
	}
	if err := s.db.Apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: re-apply batches after WAL damage in %s: %w", first.path, err)
	}
	s.log.Warn("pebblestore: batches after WAL damage applied again", "batches", batches, "writes", ops, "wals", len(seqs))
	return nil
}
