package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// The recovery scan. It walks the commit log from `from`, verifying every
// record (checkRecord: layout, position, record or body CRC) and checking
// or writing its consume-queue entry. What it does at a bad record depends
// on where it is:
//
//   - Inside flushed data (below the checkpoint): damage. The scan resynchronises on the next position
//     of the segment where a valid record (magic, size, the commit-log
//     offset it carries, its checksum) or the end-of-file marker starts,
//     copies the bytes in between aside, records the finding and goes on:
//     only the damaged records are lost. Without a valid record after it,
//     the rest of the segment is damaged: a later segment goes on; in the
//     last one the log ends there (the bytes copied aside first).
//   - At or above the checkpoint: a torn tail (a crash lost writes that
//     were never synced). The log is cut there, later segments removed, as
//     RocketMQ's recovery does.

var (
	recMagic   = message.MagicCode
	magicBytes = be.AppendUint32(nil, uint32(recMagic))
	blankBytes = be.AppendUint32(nil, uint32(blankMagic))
)

// scanState is the recovery scan's cursor.
type scanState struct {
	flushed int64 // the checkpoint: every byte below it was synced
	full    bool  // the scan covers the whole log (consume queues are checked against all of it)
}

// scan walks the commit log from `from` and returns the recovered end.
func (s *Store) scan(from int64, st scanState) (int64, error) {
	w := s.newScanWindow()
	idx := int((from - s.segs[0].base) / s.segSize)
	pos := from - s.segs[idx].base
	if s.keys != nil {
		s.keys.mu.Lock()
		defer s.keys.mu.Unlock()
	}
	for {
		seg := s.segs[idx]
		last := idx == len(s.segs)-1
		w.on(seg)
		stop, reason, nextSeg, err := s.scanSegment(w, pos, last, st)
		if err != nil {
			return 0, err
		}
		if nextSeg {
			idx++
			pos = 0
			continue
		}
		pos = stop
		if phys := seg.base + pos; phys >= st.flushed || (last && reason == reasonNoRoom) {
			// The tail past the checkpoint: unwritten (zeros) or torn.
			if reason != "" && reason != reasonZeros {
				s.log.Warn("commitlog: cutting a torn tail after the last good record", "segment", seg.name(), "offset", phys, "reason", reason)
			}
			return s.cutLog(idx, pos)
		}
		// Damage: inside flushed data, or in a segment followed by others.
		at, ok, err := s.skipDamage(seg, pos, last, reason, st)
		switch {
		case err != nil:
			return 0, err
		case ok:
			pos = at
		case !last:
			idx++
			pos = 0
		default:
			return s.cutLog(idx, pos)
		}
	}
}

// Reasons the scan stops at that decide what comes next.
const (
	reasonNoRoom = "no room for an end-of-file marker"
	reasonZeros  = "zeros where a record should be"
)

// scanWindow is the scan's read buffer over one segment: win holds the
// segment's bytes from start on. The buffer is kept across segments (and
// grown for a record larger than it).
type scanWindow struct {
	seg     *segment
	segSize int64
	buf     []byte
	start   int64
	win     []byte
}

// newScanWindow sizes the scan's buffer: 4 MiB, or two of the largest
// messages, but not more than a segment.
func (s *Store) newScanWindow() *scanWindow {
	bufSize := int64(4 << 20)
	if b := 2 * int64(s.maxMsg); b > bufSize {
		bufSize = b
	}
	bufSize = min(bufSize, s.segSize)
	return &scanWindow{segSize: s.segSize, buf: make([]byte, bufSize)}
}

// on points the window at seg, empty.
func (w *scanWindow) on(seg *segment) {
	w.seg, w.start, w.win = seg, 0, w.buf[:0]
}

// fill reads the segment from at into the window, at least need bytes
// (as many as the buffer holds, up to the segment's end). It reads
// nothing when the segment has fewer than need bytes after at.
func (w *scanWindow) fill(at, need int64) error {
	rem := w.segSize - at
	if need > rem {
		return nil
	}
	if need > int64(len(w.buf)) {
		w.buf = make([]byte, need)
	}
	n := min(int64(len(w.buf)), rem)
	m, err := w.seg.f.ReadAt(w.buf[:n], at)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("commitlog: recover segment %s: %w", w.seg.name(), err)
	}
	w.start, w.win = at, w.buf[:m]
	return nil
}

// ensure makes the window hold [pos, pos+n), reading when it does not;
// false when the file is too short for it.
func (w *scanWindow) ensure(pos, n int64) (bool, error) {
	if pos >= w.start && pos+n <= w.start+int64(len(w.win)) {
		return true, nil
	}
	if err := w.fill(pos, n); err != nil {
		return false, err
	}
	return pos+n <= w.start+int64(len(w.win)), nil
}

// view returns the window's bytes [pos, pos+n); ensure them first.
func (w *scanWindow) view(pos, n int64) []byte {
	return w.win[pos-w.start : pos-w.start+n]
}

// scanSegment verifies and applies the records of the window's segment
// from pos on. It stops where there is no good record, returning that
// position and why (reason), or when an end-of-file marker sends the scan
// to the next segment (nextSeg).
func (s *Store) scanSegment(w *scanWindow, pos int64, last bool, st scanState) (stop int64, reason string, nextSeg bool, err error) {
	for {
		rec, reason, nextSeg, err := s.scanRecord(w, pos, last, st)
		if err != nil || nextSeg || reason != "" {
			return pos, reason, nextSeg, err
		}
		if err := s.applyScanned(w.seg, rec, w.seg.base+pos, st); err != nil {
			return pos, "", false, err
		}
		pos += int64(len(rec))
	}
}

// scanRecord reads the record at pos of the window's segment and verifies
// it: layout, position, checksum, and (past the checkpoint) that an
// unsealed record was not torn. It returns the record, or why there is no
// good record at pos, or nextSeg at an end-of-file marker that a next
// segment follows.
func (s *Store) scanRecord(w *scanWindow, pos int64, last bool, st scanState) (rec []byte, reason string, nextSeg bool, err error) {
	if pos+blankSize > s.segSize {
		return nil, reasonNoRoom, false, nil
	}
	if ok, err := w.ensure(pos, 8); err != nil || !ok {
		return nil, "short segment", false, err
	}
	h := w.view(pos, 8)
	size := int64(int32(be.Uint32(h)))
	magic := int32(be.Uint32(h[4:]))
	if magic == message.BlankMagicCode && size == s.segSize-pos {
		if !last {
			return nil, "", true, nil
		}
		return nil, "end-of-file marker without a next segment", false, nil
	}
	if magic != message.MagicCode {
		if size == 0 && magic == 0 {
			return nil, reasonZeros, false, nil
		}
		return nil, fmt.Sprintf("bad magic %#x", uint32(magic)), false, nil
	}
	if size < minRecordSize || pos+size+blankSize > s.segSize {
		return nil, fmt.Sprintf("bad record size %d", size), false, nil
	}
	if ok, err := w.ensure(pos, size); err != nil || !ok {
		return nil, "short record", false, err
	}
	if pos+size > w.seg.diskSize {
		return nil, fmt.Sprintf("record of %d bytes runs past the end of the file (%d bytes)", size, w.seg.diskSize), false, nil
	}
	rec = w.view(pos, size)
	phys := w.seg.base + pos
	if reason := checkRecord(rec, phys); reason != "" {
		return nil, reason, false, nil
	}
	if tornUnsealed(rec, phys, st) {
		return nil, "record ends with NUL (torn write)", false, nil
	}
	return rec, "", false, nil
}

// tornUnsealed reports a record without the checksum property (written
// before it existed) that the checkpoint does not vouch for and that ends
// with NUL: its body CRC does not cover the topic and properties, and a
// write torn after the body leaves zeros up to the record's end, while
// producers never end a record with NUL. A record without properties
// legitimately ends with its zero length.
func tornUnsealed(rec []byte, phys int64, st scanState) bool {
	if _, sealed := recordCRC(rec); sealed || phys < st.flushed || rec[len(rec)-1] != 0 {
		return false
	}
	v, _ := parseRecord(rec)
	return !emptyProperties(rec, string(v.topic))
}

// applyScanned indexes a good record the scan read at phys in seg (key
// index and consume queue, unless its topic was deleted after it: below
// the topic's floor) and notes its store time.
func (s *Store) applyScanned(seg *segment, rec []byte, phys int64, st scanState) error {
	v, _ := parseRecord(rec)
	if fl, ok := s.floors[string(v.topic)]; !ok || phys >= fl {
		if s.keys != nil {
			s.keys.addRawLocked(v.topic, v.props, phys)
		}
		if err := s.indexRecord(v, phys, int32(len(rec)), st); err != nil {
			return err
		}
	}
	seg.lastTS.Store(v.storeTS)
	s.lastTS = max(s.lastTS, v.storeTS)
	return nil
}

// skipDamage handles damage at pos of seg (inside flushed data, or in a
// segment followed by others): it looks for the next valid record of the
// segment, where the scan resumes (ok), and copies the damaged bytes
// aside: up to that record, else to the segment's end (the scan goes on
// in the next segment when seg is not the last), else, in the last
// segment, up to the checkpoint or the last non-zero byte (the log then
// ends at pos).
func (s *Store) skipDamage(seg *segment, pos int64, last bool, reason string, st scanState) (at int64, ok bool, err error) {
	at, ok, nz, err := s.resync(seg, pos, last)
	switch {
	case err != nil:
		return 0, false, err
	case ok:
		s.quarantine(seg, pos, at, at, reason, 0)
	case !last:
		s.quarantine(seg, pos, s.segSize, nz, reason+"; no valid record after it in the segment", 0)
	default:
		s.quarantine(seg, pos, max(nz, min(st.flushed-seg.base, s.segSize)), nz, reason+"; no valid record after it: the log ends here", 0)
	}
	return at, ok, nil
}

// cutLog ends the log at pos of segment idx: the rest of the segment is
// cut off (then the sparse file re-extended) and later segments removed.
func (s *Store) cutLog(idx int, pos int64) (int64, error) {
	seg := s.segs[idx]
	if err := seg.f.Truncate(pos); err != nil {
		return 0, fmt.Errorf("commitlog: cut segment %s: %w", seg.name(), err)
	}
	if err := seg.f.Truncate(s.segSize); err != nil {
		return 0, fmt.Errorf("commitlog: cut segment %s: %w", seg.name(), err)
	}
	for _, later := range s.segs[idx+1:] {
		s.log.Error("commitlog: removing segment after the recovered end", "segment", later.name())
		later.f.Close()
		if err := os.Remove(later.path); err != nil {
			return 0, fmt.Errorf("commitlog: remove segment %s: %w", later.name(), err)
		}
	}
	if len(s.segs) > idx+1 {
		s.segs = s.segs[:idx+1]
		if err := syncDir(s.clDir); err != nil {
			return 0, fmt.Errorf("commitlog: %w", err)
		}
	}
	return seg.base + pos, nil
}

// resyncWindow is how much of a segment resync reads at a time.
const resyncWindow = 1 << 20

// resync looks in seg after pos for the next position where a valid
// record starts (or the end-of-file marker, unless seg is the last
// segment). It also returns the end of the last non-zero byte it read
// (the extent of the damage when nothing valid follows).
func (s *Store) resync(seg *segment, pos int64, last bool) (at int64, ok bool, nz int64, err error) {
	limit := min(s.segSize, seg.diskSize)
	nz = pos
	buf := make([]byte, resyncWindow+8)
	var rec []byte
	for w := pos; w < limit; w += resyncWindow {
		n := min(int64(len(buf)), limit-w)
		m, rerr := seg.f.ReadAt(buf[:n], w)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, false, nz, fmt.Errorf("commitlog: recover segment %s: %w", seg.name(), rerr)
		}
		b := buf[:m]
		for k := 0; ; {
			j := nextMagic(b, k)
			if j < 0 {
				break
			}
			k = j + 1
			q := w + int64(j) - 4 // the candidate record starts 4 bytes before its magic
			if j < 4 || q <= pos || int64(j)-4 >= resyncWindow {
				continue
			}
			size := int64(int32(be.Uint32(b[j-4:])))
			if bytes.Equal(b[j:j+4], blankBytes) {
				if !last && size == s.segSize-q {
					return q, true, nz, nil
				}
				continue
			}
			if size < minRecordSize || q+size+blankSize > s.segSize || q+size > limit || size > int64(s.maxMsg)+(64<<10) {
				continue
			}
			if int64(j)-4+size <= int64(len(b)) {
				rec = b[j-4 : int64(j)-4+size]
			} else {
				rec = append(rec[:0], make([]byte, size)...)
				if _, rerr := seg.f.ReadAt(rec, q); rerr != nil && !errors.Is(rerr, io.EOF) {
					return 0, false, nz, fmt.Errorf("commitlog: recover segment %s: %w", seg.name(), rerr)
				}
			}
			if checkRecord(rec, seg.base+q) == "" {
				return q, true, nz, nil
			}
		}
		if i := lastNonZero(b[:min(int64(len(b)), resyncWindow)]); i >= 0 {
			nz = w + int64(i) + 1
		}
	}
	return 0, false, nz, nil
}

// nextMagic returns the index in b at or after k of the next record or
// end-of-file magic code, or -1.
func nextMagic(b []byte, k int) int {
	if k >= len(b) {
		return -1
	}
	i := bytes.Index(b[k:], magicBytes)
	j := bytes.Index(b[k:], blankBytes)
	switch {
	case i < 0 && j < 0:
		return -1
	case i < 0 || (j >= 0 && j < i):
		i = j
	}
	if i+4 > len(b)-k {
		return -1
	}
	return k + i
}

func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// indexRecord checks the consume-queue entry of a record the scan read,
// writing it when it is missing and rewriting it when it points elsewhere.
// Entries of records the scan found lost (a later record of the queue came
// first) become fillers: size 0, skipped by reads.
func (s *Store) indexRecord(v recordView, phys int64, size int32, st scanState) error {
	q := store.Queue{Topic: string(v.topic), ID: v.queueID}
	if checkTopic(q.Topic) != nil || q.ID < 0 {
		s.log.Warn("commitlog: recovered record with an unusable queue", "offset", phys, "queue", q.String())
		return nil //nolint:nilerr // the record is skipped (logged), not the recovery
	}
	cq := s.queues.GetOrCreate(q)
	qoff := v.queueOffset
	if cq.scanned && qoff < cq.rnext {
		s.log.Warn("commitlog: record repeats an earlier queue offset; not indexed", "offset", phys, "queue", q.String(), "queue_offset", qoff, "next", cq.rnext)
		return nil
	}
	if cq.scanned && qoff > cq.rnext {
		// The records in between were lost (damage the scan skipped).
		if err := s.fillLost(cq, cq.rnext, qoff, phys); err != nil {
			return err
		}
	}
	first := !cq.scanned
	cq.scanned, cq.rnext, cq.rlast = true, qoff+1, phys
	var e [cqEntrySize]byte
	putEntry(e[:], phys, size, recoveredTagsCode(v))
	filesEnd := cq.next - int64(len(cq.pend)/cqEntrySize)
	switch {
	case qoff < filesEnd:
		return s.checkEntry(cq, qoff, e[:])
	case qoff < cq.next:
		return nil // dispatched by this scan
	case qoff > cq.next && cq.next == 0 && len(cq.files) == 0 && len(cq.pend) == 0:
		// The queue's consume queue is gone (its first records may be
		// gone too): index it from this record on; min starts here.
		s.log.Warn("commitlog: rebuilding a consume queue from the commit log", "queue", q.String(), "from", qoff)
		cq.next = qoff
	case qoff > cq.next && (st.full || !first):
		// The queue's entries stop short (a consume-queue file cut off):
		// every record since is in this scan, so what is missing before
		// this one was lost with the log's damage or retention.
		if err := s.fillLost(cq, cq.next, qoff, phys); err != nil {
			return err
		}
	case qoff > cq.next:
		s.log.Warn("commitlog: recovered record leaves a gap in its queue; not indexed (run mq store verify)", "offset", phys, "queue", q.String(), "queue_offset", qoff, "next", cq.next)
		cq.scanned = false
		return nil
	}
	if phys < st.flushed {
		// Below the checkpoint the entry should have been there: the
		// consume queue was cut or lost.
		if cq.rrebuilt == 0 {
			cq.rrebuiltFrom = qoff
		}
		cq.rrebuilt++
	}
	return s.pendEntry(cq, e[:])
}

// pendEntry appends an entry to the queue being rebuilt.
func (s *Store) pendEntry(cq *consumeQueue, e []byte) error {
	cq.pend = append(cq.pend, e...)
	cq.next++
	if len(cq.pend) >= dispatchFlush {
		from := cq.next - int64(len(cq.pend)/cqEntrySize)
		if err := s.writeEntries(cq, from, cq.pend); err != nil {
			return err
		}
		cq.pend = cq.pend[:0]
	}
	return nil
}

// fillLost makes the entries [from, to) of cq fillers pointing at phys
// (the next record of the queue, so entries keep growing with the offset).
func (s *Store) fillLost(cq *consumeQueue, from, to, phys int64) error {
	var e [cqEntrySize]byte
	putEntry(e[:], phys, 0, 0)
	lost := int64(0)
	for o := from; o < to; o++ {
		filesEnd := cq.next - int64(len(cq.pend)/cqEntrySize)
		switch {
		case o < filesEnd:
			p, size, _, err := s.cachedEntry(cq, o)
			if err != nil {
				return err
			}
			if size == 0 && p == phys {
				continue
			}
			lost++
			if err := s.rewriteEntry(cq, o, e[:]); err != nil {
				return err
			}
		case o < cq.next:
			// In this scan's pending entries: cannot be (they follow
			// records seen in order).
		default:
			lost++
			if err := s.pendEntry(cq, e[:]); err != nil {
				return err
			}
		}
	}
	if lost > 0 {
		s.noteDamage(store.CorruptionError{File: cq.q.String(), Offset: from, Length: to - from,
			Reason: fmt.Sprintf("queue offsets [%d, %d) have no valid record in the commit log; their entries skip", from, to)}, lost, true)
	}
	return nil
}

// checkEntry compares the entry at qoff with want (position and size; the
// tag code is the broker's and is kept) and rewrites it when they differ.
func (s *Store) checkEntry(cq *consumeQueue, qoff int64, want []byte) error {
	p, size, _, err := s.cachedEntry(cq, qoff)
	if err != nil {
		return err
	}
	wp, wsize, _ := getEntry(want)
	if p == wp && size == wsize {
		return nil
	}
	if cq.rfixed == 0 {
		cq.rfixedFrom = qoff
		cq.rfixedWhy = fmt.Sprintf("entry %d pointed at %d (%d bytes), the record is at %d (%d bytes)", qoff, p, size, wp, wsize)
	}
	cq.rfixed++
	return s.rewriteEntry(cq, qoff, want)
}

// cachedEntry reads the entry at off through the queue's scan cache.
func (s *Store) cachedEntry(cq *consumeQueue, off int64) (int64, int32, int64, error) {
	n := int64(len(cq.rcache) / cqEntrySize)
	if off < cq.rcacheFrom || off >= cq.rcacheFrom+n {
		filesEnd := cq.next - int64(len(cq.pend)/cqEntrySize)
		k := min(int64(entryBlock), filesEnd-off)
		b, err := cq.readEntries(off, int(k), cq.rcache[:0])
		if err != nil {
			return 0, 0, 0, fmt.Errorf("commitlog: check consume queue %s at %d: %w", cq.q, off, err)
		}
		cq.rcache, cq.rcacheFrom = b, off
	}
	p, size, tags := getEntry(cq.rcache[(off-cq.rcacheFrom)*cqEntrySize:])
	return p, size, tags, nil
}

// rewriteEntry overwrites the entry at off in the queue's files.
func (s *Store) rewriteEntry(cq *consumeQueue, off int64, e []byte) error {
	if err := s.writeEntries(cq, off, e); err != nil {
		return err
	}
	if n := int64(len(cq.rcache) / cqEntrySize); off >= cq.rcacheFrom && off < cq.rcacheFrom+n {
		copy(cq.rcache[(off-cq.rcacheFrom)*cqEntrySize:], e)
	}
	return nil
}

// finishQueues ends the scan: after a scan of the whole log, entries past
// a queue's last record (none of them found in the log: garbage, or the
// entries of damaged last records) are dropped. The scan state goes.
func (s *Store) finishQueues(full bool) error {
	for _, cq := range s.queues.Snapshot() {
		if cq.rfixed > 0 {
			s.noteDamage(store.CorruptionError{File: cq.q.String(), Offset: cq.rfixedFrom, Length: cq.rfixed,
				Reason: fmt.Sprintf("%d consume-queue entries from %d disagreed with the commit log and were rewritten (first: %s)", cq.rfixed, cq.rfixedFrom, cq.rfixedWhy)},
				cq.rfixed, true)
		}
		if cq.rrebuilt > 0 {
			s.noteDamage(store.CorruptionError{File: cq.q.String(), Offset: cq.rrebuiltFrom, Length: cq.rrebuilt,
				Reason: fmt.Sprintf("%d consume-queue entries below the checkpoint were missing; rebuilt from the commit log", cq.rrebuilt)},
				cq.rrebuilt, true)
		}
		if full && cq.scanned && cq.next > cq.rnext && len(cq.files) > 0 {
			s.noteDamage(store.CorruptionError{File: cq.q.String(), Offset: cq.rnext, Length: cq.next - cq.rnext,
				Reason: fmt.Sprintf("consume-queue entries [%d, %d) follow the queue's last record in the commit log; dropped", cq.rnext, cq.next)},
				cq.next-cq.rnext, true)
			if err := s.cutQueue(cq, cq.rnext); err != nil {
				return err
			}
		}
		cq.scanned, cq.rnext, cq.rlast, cq.rcache, cq.rcacheFrom = false, 0, 0, nil, 0
		cq.rrebuilt, cq.rrebuiltFrom, cq.rfixed, cq.rfixedFrom, cq.rfixedWhy = 0, 0, 0, 0, ""
	}
	return nil
}

// floorName is the file a deleted topic leaves in its consume-queue
// directory: the commit-log offset below which the topic's records belong
// to the deleted incarnation and are not indexed again.
const floorName = "floor"

// writeFloor records a deleted topic's floor (durably).
func (s *Store) writeFloor(topic string, off int64) error {
	dir := filepath.Join(s.cqDir, topic)
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, floorName), []byte(strconv.FormatInt(off, 10)), 0o644); err != nil {
		return err
	}
	s.floors[topic] = off
	return nil
}

// loadFloor reads a topic's floor, if it has one.
func (s *Store) loadFloor(topic string) error {
	b, err := os.ReadFile(filepath.Join(s.cqDir, topic, floorName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("commitlog: read floor of %s: %w", topic, err)
	}
	off, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		s.log.Warn("commitlog: ignoring a damaged topic floor", "topic", topic, "err", err)
		return nil
	}
	s.floors[topic] = off
	return nil
}
