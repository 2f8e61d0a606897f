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

// recover loads the segments and consume queues and repairs them:
//
//  1. Consume-queue entries at or above the checkpoint (which covers the
//     commit log and every entry below it) are dropped: they may be torn.
//  2. The commit log is scanned (scan.go) from the checkpoint (or the
//     start of the last segment, whichever is lower), or from its start
//     when the key index is on, verifying every record (layout, position,
//     record or body CRC) and checking its consume-queue entry (written
//     when missing, rewritten when wrong). Damage inside flushed data is
//     copied aside and skipped; the scan goes on at the next valid record.
//     A torn tail past the checkpoint is cut off.
//  3. Entries pointing past the recovered end are dropped; after a scan of
//     the whole log, so are entries past a queue's last record.
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
	for _, cq := range s.queues.Snapshot() {
		if err := s.trimQueue(cq, cut, false); err != nil {
			return err
		}
	}
	full := s.keys != nil || s.fullScan
	scanFrom := verifyFrom
	if full {
		scanFrom = first
	}
	end, err := s.scan(scanFrom, scanState{flushed: cut, full: full})
	if err != nil {
		return err
	}
	for _, cq := range s.queues.Snapshot() {
		if len(cq.pend) > 0 {
			from := cq.next - int64(len(cq.pend)/cqEntrySize)
			if err := s.writeEntries(cq, from, cq.pend); err != nil {
				return err
			}
			cq.pend = cq.pend[:0]
		}
		cq.tailFrom = cq.next
	}
	if err := s.finishQueues(full); err != nil {
		return err
	}
	for _, cq := range s.queues.Snapshot() {
		cq.max.Store(cq.next)
	}
	if end < cut {
		for _, cq := range s.queues.Snapshot() {
			if err := s.trimQueue(cq, end, true); err != nil {
				return err
			}
		}
	}
	s.wrote.Store(end)
	s.flushed = min(cut, end)
	s.minPhys.Store(first)
	for _, cq := range s.queues.Snapshot() {
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
			s.queues.Delete(cq.q)
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
		if err := s.loadFloor(t.Name()); err != nil {
			return err
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
			s.queues.Set(q, cq)
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
		if fi.Size() > fileBytes {
			return fmt.Errorf("commitlog: open consume queue %s file %s: %d bytes, want %d (was cq_entries_per_file changed?)", cq.q, name, fi.Size(), fileBytes)
		}
		if !last && fi.Size() != fileBytes {
			// Cut short (damage): extend it with empty entries, which the
			// recovery scan rewrites from the commit log.
			s.noteDamage(store.CorruptionError{File: filepath.Join("consumequeue", cq.q.Topic, strconv.Itoa(int(cq.q.ID)), name),
				Offset: fi.Size(), Length: fileBytes - fi.Size(), Reason: fmt.Sprintf("consume-queue file of %d bytes, want %d; extended, entries rebuilt from the commit log", fi.Size(), fileBytes)}, 0, true)
			if err := f.Truncate(fileBytes); err != nil {
				return fmt.Errorf("commitlog: open consume queue %s file %s: %w", cq.q, name, err)
			}
			s.markDirty(cf, "")
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
	switch {
	case n < cq.next && pastEnd:
		s.log.Warn("commitlog: dropping consume-queue entries past the recovered log", "queue", cq.q.String(), "from", n, "to", cq.next)
	case n < cq.next:
		s.log.Info("commitlog: rebuilding consume-queue entries past the checkpoint", "queue", cq.q.String(), "from", n, "to", cq.next)
	}
	return s.cutQueue(cq, n)
}

// cutQueue drops the entries of cq from n on (during recovery).
func (s *Store) cutQueue(cq *consumeQueue, n int64) error {
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
	// Every entry of a record below off is in the tail of a queue marked
	// before off was published (dispatchEntries): write the tails, then
	// sync the files they went to.
	s.dirtyMu.Lock()
	queues := s.dirtyQ
	s.dirtyQ = map[*consumeQueue]struct{}{}
	s.dirtyMu.Unlock()
	for cq := range queues {
		if err := s.flushTail(cq); err != nil && !errors.Is(err, os.ErrClosed) {
			if isNoSpace(err) {
				s.noteFull(cq, err)
			}
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
		if err := s.syncData(f.f); err != nil && !errors.Is(err, os.ErrClosed) {
			// Sticky (fsyncgate, diskfull.go): the entries the kernel
			// could not write may be gone from the page cache, and a
			// later checkpoint would vouch for them; reopening rebuilds
			// them from the commit log above the last checkpoint.
			err = fmt.Errorf("commitlog: sync consume queue %s: %w: %v", f.path, store.ErrNotDurable, err)
			s.setFailure(err)
			requeue()
			return err
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
