package commitlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

const (
	checkpointName = "checkpoint"
	checkpointSize = 20 // int64 flushed offset, int64 reserved, uint32 crc
	// dispatchFlush bounds the consume-queue bytes buffered per queue
	// while recovery re-dispatches.
	dispatchFlush = 64 << 10
)

// recover loads the segments and consume queues and repairs the tail:
//
//  1. Consume-queue entries at or above the checkpoint (which covers the
//     commit log and every entry below it) are dropped: they may be torn.
//  2. The commit log is scanned from the checkpoint (or the start of the
//     last segment, whichever is lower), verifying magic, size and body
//     CRC; records above the checkpoint are re-dispatched. The first bad
//     record ends the log: the rest is cut off.
//  3. Entries pointing past the recovered end are dropped.
//
// With the key index on, the whole log is scanned (without CRC checks
// below the verified tail) to rebuild it.
func (s *Store) recover() error {
	for _, d := range []string{s.dir, s.clDir, s.cqDir, s.metaDir} {
		if err := durable.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("commitlog: create %s: %w", d, err)
		}
	}
	if err := s.loadSegments(); err != nil {
		return err
	}
	ckpt, ckOK, err := s.openCheckpoint()
	if err != nil {
		return err
	}
	if err := s.loadQueues(); err != nil {
		return err
	}
	first, last := s.segs[0].base, s.segs[len(s.segs)-1].base
	verifyFrom, cut := last, last
	if ckOK && ckpt >= first {
		cut = ckpt
		verifyFrom = min(ckpt, last)
	}
	for _, cq := range s.queues {
		if err := s.trimQueue(cq, cut, false); err != nil {
			return err
		}
	}
	scanFrom := verifyFrom
	if s.keys != nil {
		scanFrom = first
	}
	end, err := s.scan(scanFrom, verifyFrom, cut)
	if err != nil {
		return err
	}
	for _, cq := range s.queues {
		if len(cq.pend) > 0 {
			from := cq.next - int64(len(cq.pend)/cqEntrySize)
			if err := s.writeEntries(cq, from, cq.pend); err != nil {
				return err
			}
			cq.pend = cq.pend[:0]
		}
		cq.max.Store(cq.next)
		cq.tailFrom = cq.next
	}
	if end < cut {
		for _, cq := range s.queues {
			if err := s.trimQueue(cq, end, true); err != nil {
				return err
			}
		}
	}
	s.wrote.Store(end)
	s.flushed = min(cut, end)
	s.minPhys.Store(first)
	for q, cq := range s.queues {
		cq.mu.RLock()
		lo := int64(0)
		if len(cq.files) > 0 {
			lo = cq.files[0].base
		}
		cq.mu.RUnlock()
		mn, err := cq.firstAtOrAbove(lo, cq.next, first)
		if err != nil {
			return err
		}
		cq.min.Store(mn)
		if cq.next == 0 && len(cq.files) == 0 {
			delete(s.queues, q)
		}
	}
	// Segments the scan did not reach get their last store time from mtime.
	for _, seg := range s.segs {
		if seg.lastTS.Load() == 0 && seg.base+s.segSize <= scanFrom {
			if fi, err := seg.f.Stat(); err == nil {
				seg.lastTS.Store(fi.ModTime().UnixMilli())
			}
		}
	}
	return nil
}

// loadSegments opens the commit-log segments, creating the first one.
func (s *Store) loadSegments() error {
	ents, err := os.ReadDir(s.clDir)
	if err != nil {
		return fmt.Errorf("commitlog: list segments: %w", err)
	}
	var bases []int64
	for _, e := range ents {
		base, ok := parseOffsetName(e.Name())
		if !ok || e.IsDir() {
			s.log.Warn("commitlog: ignoring unknown file in commit log directory", "file", e.Name())
			continue
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) == 0 {
		_, err := s.createSegment(0)
		return err
	}
	for i, base := range bases {
		name := segmentName(base)
		if base%s.segSize != 0 || (i > 0 && base != bases[i-1]+s.segSize) {
			return fmt.Errorf("commitlog: open segment %s: does not follow the segment before it with segment_size %d (was segment_size changed?)", name, s.segSize)
		}
		path := filepath.Join(s.clDir, name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("commitlog: open segment %s: %w", name, err)
		}
		seg := &segment{base: base, path: path, f: f}
		s.segs = append(s.segs, seg)
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("commitlog: open segment %s: %w", name, err)
		}
		seg.diskSize = fi.Size()
		switch {
		case fi.Size() > s.segSize:
			return fmt.Errorf("commitlog: open segment %s: %d bytes is more than segment_size %d (was segment_size changed?)", name, fi.Size(), s.segSize)
		case fi.Size() < s.segSize:
			s.log.Warn("commitlog: segment shorter than segment_size; extending", "segment", name, "size", fi.Size())
			if err := f.Truncate(s.segSize); err != nil {
				return fmt.Errorf("commitlog: open segment %s: %w", name, err)
			}
		}
	}
	return nil
}

// loadQueues opens every consume queue under consumequeue/<topic>/<id>/.
func (s *Store) loadQueues() error {
	topics, err := os.ReadDir(s.cqDir)
	if err != nil {
		return fmt.Errorf("commitlog: list consume queues: %w", err)
	}
	for _, t := range topics {
		if !t.IsDir() || checkTopic(t.Name()) != nil {
			continue
		}
		ids, err := os.ReadDir(filepath.Join(s.cqDir, t.Name()))
		if err != nil {
			return fmt.Errorf("commitlog: list consume queues of %s: %w", t.Name(), err)
		}
		for _, id := range ids {
			qid, err := strconv.ParseInt(id.Name(), 10, 32)
			if !id.IsDir() || err != nil || qid < 0 {
				continue
			}
			q := store.Queue{Topic: t.Name(), ID: int32(qid)}
			cq := newConsumeQueue(q, filepath.Join(s.cqDir, t.Name(), id.Name()), s.perFile)
			s.queues[q] = cq
			if err := s.loadQueue(cq); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) loadQueue(cq *consumeQueue) error {
	ents, err := os.ReadDir(cq.dir)
	if err != nil {
		return fmt.Errorf("commitlog: list consume queue %s: %w", cq.q, err)
	}
	var offs []int64
	for _, e := range ents {
		off, ok := parseOffsetName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	fileBytes := s.perFile * cqEntrySize
	for i, off := range offs {
		name := fmt.Sprintf("%020d", off)
		if off%fileBytes != 0 || (i > 0 && off != offs[i-1]+fileBytes) {
			return fmt.Errorf("commitlog: open consume queue %s file %s: does not follow the file before it with cq_entries_per_file %d (was it changed?)", cq.q, name, s.perFile)
		}
		path := filepath.Join(cq.dir, name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("commitlog: open consume queue %s file %s: %w", cq.q, name, err)
		}
		cf := &cqFile{base: off / cqEntrySize, path: path, f: f}
		cq.files = append(cq.files, cf)
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("commitlog: open consume queue %s file %s: %w", cq.q, name, err)
		}
		last := i == len(offs)-1
		if fi.Size() > fileBytes || (!last && fi.Size() != fileBytes) {
			return fmt.Errorf("commitlog: open consume queue %s file %s: %d bytes, want %d (was cq_entries_per_file changed?)", cq.q, name, fi.Size(), fileBytes)
		}
		if last {
			cq.next = cf.base + fi.Size()/cqEntrySize
			cq.tailFrom = cq.next
		}
	}
	return nil
}

// trimQueue drops the queue's trailing entries that are empty or point at
// or above cut, and cuts its files to match. pastEnd says cut is the
// recovered end of the log (else it is the checkpoint, above which entries
// are rebuilt from the log).
func (s *Store) trimQueue(cq *consumeQueue, cut int64, pastEnd bool) error {
	if len(cq.files) == 0 {
		return nil
	}
	lo := cq.files[0].base
	n := cq.next
	buf := make([]byte, 0, 1024*cqEntrySize)
	for n > lo {
		k := min(n-lo, 1024)
		eb, err := cq.readEntries(n-k, int(k), buf)
		if err != nil {
			return err
		}
		i := int(k) - 1
		for ; i >= 0; i-- {
			phys, size, _ := getEntry(eb[i*cqEntrySize:])
			if size > 0 && phys < cut {
				break
			}
		}
		if i >= 0 {
			n = n - k + int64(i) + 1
			break
		}
		n -= k
	}
	for len(cq.files) > 1 && cq.files[len(cq.files)-1].base >= n {
		f := cq.files[len(cq.files)-1]
		f.f.Close()
		if err := os.Remove(f.path); err != nil {
			return fmt.Errorf("commitlog: trim consume queue %s: %w", cq.q, err)
		}
		cq.files = cq.files[:len(cq.files)-1]
		s.markDirty(nil, cq.dir)
	}
	lastF := cq.files[len(cq.files)-1]
	if n < lastF.base {
		n = lastF.base
	}
	size := (n - lastF.base) * cqEntrySize
	if fi, err := lastF.f.Stat(); err != nil || fi.Size() != size {
		switch {
		case n < cq.next && pastEnd:
			s.log.Warn("commitlog: dropping consume-queue entries past the recovered log", "queue", cq.q.String(), "from", n, "to", cq.next)
		case n < cq.next:
			s.log.Info("commitlog: rebuilding consume-queue entries past the checkpoint", "queue", cq.q.String(), "from", n, "to", cq.next)
		}
		if err := lastF.f.Truncate(size); err != nil {
			return fmt.Errorf("commitlog: trim consume queue %s: %w", cq.q, err)
		}
		s.markDirty(lastF, "")
	}
	cq.next = n
	cq.tailFrom = n
	cq.max.Store(n)
	return nil
}

// scan walks the commit log from `from`, verifying records at or above
// verifyFrom and re-dispatching those at or above dispatchFrom. It cuts the
// log after the last good record and returns its end.
func (s *Store) scan(from, verifyFrom, dispatchFrom int64) (int64, error) {
	bufSize := int64(4 << 20)
	if b := 2 * int64(s.maxMsg); b > bufSize {
		bufSize = b
	}
	bufSize = min(bufSize, s.segSize)
	buf := make([]byte, bufSize)
	first := s.segs[0].base
	idx := int((from - first) / s.segSize)
	pos := from - s.segs[idx].base
	if s.keys != nil {
		s.keys.mu.Lock()
		defer s.keys.mu.Unlock()
	}
	for {
		seg := s.segs[idx]
		winStart, win := int64(0), buf[:0]
		fill := func(at, need int64) error {
			rem := s.segSize - at
			if need > rem {
				return nil
			}
			if need > int64(len(buf)) {
				buf = make([]byte, need)
			}
			n := min(int64(len(buf)), rem)
			m, err := seg.f.ReadAt(buf[:n], at)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("commitlog: recover segment %s: %w", seg.name(), err)
			}
			winStart, win = at, buf[:m]
			return nil
		}
		reason := ""
		nextSeg := false // the segment ended with an end-of-file marker
		for {
			if pos+blankSize > s.segSize {
				reason = "no room for an end-of-file marker"
				break
			}
			if pos+8 > winStart+int64(len(win)) || pos < winStart {
				if err := fill(pos, 8); err != nil {
					return 0, err
				}
				if pos+8 > winStart+int64(len(win)) {
					reason = "short segment"
					break
				}
			}
			h := win[pos-winStart:]
			size := int64(int32(be.Uint32(h)))
			magic := int32(be.Uint32(h[4:]))
			if magic == message.BlankMagicCode && size == s.segSize-pos {
				if idx+1 < len(s.segs) {
					nextSeg = true
					break
				}
				reason = "end-of-file marker without a next segment"
				break
			}
			if magic != message.MagicCode {
				reason = fmt.Sprintf("bad magic %#x", uint32(magic))
				if size == 0 && magic == 0 {
					reason = "" // never written: the normal end
					if idx+1 < len(s.segs) {
						reason = "unwritten space before the end-of-file marker"
					}
				}
				break
			}
			if size < minRecordSize || pos+size+blankSize > s.segSize {
				reason = fmt.Sprintf("bad record size %d", size)
				break
			}
			if pos+size > winStart+int64(len(win)) {
				if err := fill(pos, size); err != nil {
					return 0, err
				}
				if pos+size > winStart+int64(len(win)) {
					reason = "short record"
					break
				}
			}
			if pos+size > seg.diskSize {
				reason = fmt.Sprintf("record of %d bytes runs past the end of the file (%d bytes)", size, seg.diskSize)
				break
			}
			rec := win[pos-winStart : pos-winStart+size]
			phys := seg.base + pos
			if phys >= verifyFrom {
				m, _, err := message.DecodeStored(rec)
				switch {
				case err != nil:
					reason = err.Error()
				case !m.VerifyCRC():
					reason = "body CRC mismatch"
				case m.CommitLogOffset != phys:
					reason = fmt.Sprintf("record says it is at %d", m.CommitLogOffset)
				case phys >= dispatchFrom && m.Topic == "":
					reason = "record has no topic (torn write)"
				case phys >= dispatchFrom && rec[len(rec)-1] == 0 && !emptyProperties(rec, m.Topic):
					// The body CRC does not cover the topic and properties.
					// A write torn after the body leaves zeros up to the
					// record's end; producers never end a record with NUL
					// (topics cannot hold it), so distrust such a record
					// when the checkpoint does not vouch for it. A record
					// without properties legitimately ends with its zero
					// length; a tear after its body would have zeroed the
					// topic length, caught above.
					reason = "record ends with NUL (torn write)"
				}
				if reason != "" {
					break
				}
			}
			v, ok := parseRecord(rec)
			if !ok || v.phys != phys {
				reason = "malformed record"
				break
			}
			if s.keys != nil {
				s.keys.addRawLocked(v.topic, v.props, phys)
			}
			if phys >= dispatchFrom {
				if err := s.redispatch(v, phys, int32(size)); err != nil {
					return 0, err
				}
			}
			seg.lastTS.Store(v.storeTS)
			s.lastTS = max(s.lastTS, v.storeTS)
			pos += size
		}
		if nextSeg {
			idx++
			pos = 0
			continue
		}
		if reason != "" && seg.base+pos < verifyFrom {
			// Damage below the checkpoint, met by the key-index scan: that
			// part of the log is trusted, so never cut it; skip to where
			// the next known record boundary is.
			s.log.Error("commitlog: damaged record below the checkpoint; the key index skips the rest of its segment",
				"segment", seg.name(), "offset", seg.base+pos, "reason", reason)
			if verifyFrom < seg.base+s.segSize {
				pos = verifyFrom - seg.base
			} else {
				idx++
				pos = 0
			}
			continue
		}
		end := seg.base + pos
		if reason != "" {
			s.log.Warn("commitlog: cutting the commit log after its last good record", "segment", seg.name(), "offset", end, "reason", reason)
		}
		// Zero the tail (cut, then re-extend the sparse file).
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
		return end, nil
	}
}

// redispatch appends the consume-queue entry of a recovered record when
// its queue does not hold it yet.
func (s *Store) redispatch(v recordView, phys int64, size int32) error {
	q := store.Queue{Topic: string(v.topic), ID: v.queueID}
	if checkTopic(q.Topic) != nil || q.ID < 0 {
		s.log.Warn("commitlog: recovered record with an unusable queue", "offset", phys, "queue", q.String())
		return nil
	}
	cq := s.queueFor(q)
	switch {
	case v.queueOffset < cq.next:
		return nil
	case v.queueOffset > cq.next && cq.next == 0 && len(cq.files) == 0 && len(cq.pend) == 0:
		// The queue's consume queue is gone (its first records may be
		// gone too): index it from this record on; min starts here.
		s.log.Warn("commitlog: rebuilding a consume queue from the commit log", "queue", q.String(), "from", v.queueOffset)
		cq.next = v.queueOffset
	case v.queueOffset > cq.next:
		s.log.Warn("commitlog: recovered record leaves a gap in its queue; not indexed", "offset", phys, "queue", q.String(), "queue_offset", v.queueOffset, "next", cq.next)
		return nil
	}
	tags := recoveredTagsCode(v)
	var e [cqEntrySize]byte
	putEntry(e[:], phys, size, tags)
	cq.pend = append(cq.pend, e[:]...)
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

// emptyProperties reports a record that legitimately ends with NUL: its
// properties length is zero and sits right after the topic.
func emptyProperties(rec []byte, topic string) bool {
	n := len(rec)
	tl := len(topic)
	return tl > 0 && n >= tl+3 && rec[n-1] == 0 && rec[n-2] == 0 && int(rec[n-3-tl]) == tl && string(rec[n-2-tl:n-2]) == topic
}

// recoveredTagsCode recomputes the tag code of a re-dispatched record: the
// broker's code is not in the record, so it must be a pure function of it,
// message.TagsCode of the TAGS property, which is what the broker stores
// for every message. (Schedulers read delivery times from the record, not
// from the tag code.)
func recoveredTagsCode(v recordView) int64 {
	return message.TagsCode(string(propValue(v.props, message.PropertyTags)))
}

func parseOffsetName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil
}

// openCheckpoint opens the checkpoint file and reads the flushed offset.
func (s *Store) openCheckpoint() (int64, bool, error) {
	path := filepath.Join(s.dir, checkpointName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, false, fmt.Errorf("commitlog: open checkpoint: %w", err)
	}
	s.ckFile = f
	if statErr != nil {
		if err := syncDir(s.dir); err != nil {
			return 0, false, fmt.Errorf("commitlog: %w", err)
		}
	}
	var b [checkpointSize]byte
	n, err := f.ReadAt(b[:], 0)
	if n < checkpointSize {
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("commitlog: read checkpoint: %w", err)
		}
		return 0, false, nil
	}
	if crc32.ChecksumIEEE(b[:16]) != be.Uint32(b[16:]) {
		s.log.Warn("commitlog: checkpoint is damaged; recovering from the last segment")
		return 0, false, nil
	}
	return int64(be.Uint64(b[:])), true, nil
}

// checkpoint syncs the commit log and the consume queues, then records the
// synced commit-log offset: every record and consume-queue entry below it
// is durable.
func (s *Store) checkpoint() error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	off, err := s.syncCommitLog()
	if err != nil {
		return err
	}
	// Every entry of a record below off is in a queue marked before off was
	// published: write the tails, then sync the files they went to.
	s.dirtyMu.Lock()
	queues := s.dirtyQ
	s.dirtyQ = map[*consumeQueue]struct{}{}
	s.dirtyMu.Unlock()
	for cq := range queues {
		if err := s.flushTail(cq); err != nil && !errors.Is(err, os.ErrClosed) {
			s.dirtyMu.Lock()
			for cq := range queues {
				s.dirtyQ[cq] = struct{}{}
			}
			s.dirtyMu.Unlock()
			return err
		}
	}
	s.dirtyMu.Lock()
	files, dirs := s.dirtyCQ, s.dirtyDirs
	s.dirtyCQ, s.dirtyDirs = map[*cqFile]struct{}{}, map[string]struct{}{}
	s.dirtyMu.Unlock()
	requeue := func() {
		s.dirtyMu.Lock()
		for f := range files {
			s.dirtyCQ[f] = struct{}{}
		}
		for d := range dirs {
			s.dirtyDirs[d] = struct{}{}
		}
		s.dirtyMu.Unlock()
	}
	for f := range files {
		if err := fdatasync(f.f); err != nil && !errors.Is(err, os.ErrClosed) {
			requeue()
			return fmt.Errorf("commitlog: sync consume queue %s: %w", f.path, err)
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			requeue()
			return fmt.Errorf("commitlog: %w", err)
		}
	}
	if s.ckFile == nil || (s.ckValid && s.ckOff == off) {
		return nil
	}
	var b [checkpointSize]byte
	be.PutUint64(b[:], uint64(off))
	be.PutUint32(b[16:], crc32.ChecksumIEEE(b[:16]))
	if _, err := s.ckFile.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("commitlog: write checkpoint: %w", err)
	}
	if err := fdatasync(s.ckFile); err != nil {
		return fmt.Errorf("commitlog: sync checkpoint: %w", err)
	}
	s.ckOff, s.ckValid = off, true
	return nil
}
