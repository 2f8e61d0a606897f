package grpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// The lite index snapshot: every lite topic as the index holds it (its
// parent, name, first lite offset, the commit-log offsets of its
// messages, the stamp its TTL counts from) and, for each queue of the
// LITE parents, the queue offset up to which its records are in the
// snapshot. A start loads it and reads only the parent queues' records
// after those positions, then replays the lite journal as a full rebuild
// does: a restart costs the snapshot's size, not the parent's history.
//
// It is derived state: the parent queues and the journal hold everything
// it says, and a missing, damaged (checksum, version, truncated) or stale
// snapshot (a queue behind its position or holding another record there:
// records lost by a power loss after the snapshot was synced) is set aside
// for the full rebuild, with the reason logged. The consumer groups'
// offsets are not in it (the journal keeps them).
//
// File: lite/lite.snapshot, written to lite.snapshot.tmp, fsynced, renamed
// over the old one and the directory fsynced; a crash at any point leaves
// the old snapshot or the new one, and a leftover .tmp is ignored. Layout
// (integers varint-encoded; strings a uvarint length and bytes):
//
//	"QVLITESN" version created-ms topics-hint queues{topic id pos cl}
//	records: 'P' id name hint   a parent, before its first lite topic
//	         'T' parent-id name base last n n×(cl+1)
//	         'E' count
//	CRC-32C of everything before it, 4 bytes big-endian
//
// It is written a chunk of lite topics at a time, each chunk encoded into
// one reused buffer with the index held and written out after: no copy
// of the index is ever made.

const (
	liteSnapshotFile    = "lite.snapshot"
	liteSnapshotVersion = 1
	// liteSnapshotChunk is how many lite topics one hold of the index
	// encodes while a snapshot is written.
	liteSnapshotChunk = 1024
)

var (
	liteSnapshotMagic = []byte("QVLITESN")
	liteCastagnoli    = crc32.MakeTable(crc32.Castagnoli)
	// errLiteSnapshotMoved: lite topics were deleted while a snapshot was
	// written a chunk at a time (only the sweep deletes, and a snapshot
	// written on its goroutine never meets this); it is written again later.
	errLiteSnapshotMoved = errors.New("lite topics were deleted while the snapshot was written")
	errLiteSnapshotStop  = errors.New("stopping")
)

// liteKey names a lite topic.
type liteKey struct{ parent, name string }

// liteQueuePos is where a snapshot stands in one parent queue: the
// records at queue offsets below pos are in it; cl is the commit-log
// offset of the record at pos-1 (-1 for none), checked at load.
type liteQueuePos struct {
	q   store.Queue
	pos int64
	cl  int64
}

// liteQueues lists the queues of the LITE parent topics.
func (s *Server) liteQueues() []store.Queue {
	return liteParentQueues(s.b.TopicConfigs().TopicConfigTable)
}

// recordAt answers the commit-log offset of the record at off in q.
func recordAt(ctx context.Context, st store.Store, q store.Queue, off int64, rr *store.ReadResult) (int64, error) {
	rr.Reset()
	if err := st.Read(ctx, q, off, store.ReadOptions{MaxMessages: 1, MaxBytes: 1}, rr); err != nil {
		return -1, fmt.Errorf("read %s at %d: %w", q, off, err)
	}
	if len(rr.Records) == 0 || len(rr.QueueOffsets) > 0 && rr.QueueOffsets[0] != off {
		return -1, fmt.Errorf("read %s at %d: no record there (%v)", q, off, rr.Status)
	}
	h, err := message.PeekHeader(rr.Records[0])
	if err != nil {
		return -1, fmt.Errorf("read %s at %d: %w", q, off, err)
	}
	return h.CommitLogOffset, nil
}

// snapshotLite writes the lite index snapshot. done (nil at stop) makes
// it give up between chunks.
func (s *Server) snapshotLite(ctx context.Context, done <-chan struct{}) error {
	x := s.lite
	dir := s.b.DataDir()
	if x == nil || dir == "" {
		return nil
	}
	x.snapMu.Lock()
	defer x.snapMu.Unlock()
	start := time.Now()
	queues := s.liteQueues()
	st := s.b.Store()
	// The positions, taken with no send between its put and its index
	// update (each holds its stripe across both): every record below them
	// is in the index.
	pos := make([]liteQueuePos, len(queues))
	for i := range x.stripes {
		x.stripes[i].Lock()
	}
	var err error
	for i, q := range queues {
		pos[i].q = q
		if _, pos[i].pos, err = st.Offsets(q); err != nil {
			break
		}
	}
	x.mu.Lock()
	gen, changes, hint := x.removals, x.changes, len(x.all)
	x.mu.Unlock()
	for i := range x.stripes {
		x.stripes[i].Unlock()
	}
	if err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	// cmax: the newest record below the positions. Messages the index got
	// after them are left out (their records are read at load), so that
	// the snapshot never names a record a power loss may take back.
	cmax := int64(-1)
	var rr store.ReadResult
	for i := range pos {
		pos[i].cl = -1
		if pos[i].pos == 0 {
			continue
		}
		lo, _, err := st.Offsets(pos[i].q)
		if err != nil {
			return fmt.Errorf("lite snapshot: %w", err)
		}
		if lo >= pos[i].pos {
			continue // retention took them all
		}
		if pos[i].cl, err = recordAt(ctx, st, pos[i].q, pos[i].pos-1, &rr); err != nil {
			return fmt.Errorf("lite snapshot: %w", err)
		}
		cmax = max(cmax, pos[i].cl)
	}

	path := filepath.Join(dir, "lite", liteSnapshotFile)
	tmp := path + ".tmp"
	if err := durable.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()      //nolint:errcheck,gosec // the first error is the one reported
			os.Remove(tmp) //nolint:errcheck,gosec // a leftover .tmp is ignored at load
		}
	}()
	crc := crc32.New(liteCastagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<16)
	b := append([]byte(nil), liteSnapshotMagic...)
	b = binary.AppendUvarint(b, liteSnapshotVersion)
	b = binary.AppendVarint(b, start.UnixMilli())
	b = binary.AppendUvarint(b, uint64(hint))
	b = binary.AppendUvarint(b, uint64(len(pos)))
	for _, p := range pos {
		b = appendLiteString(b, p.q.Topic)
		b = binary.AppendUvarint(b, uint64(p.q.ID))
		b = binary.AppendVarint(b, p.pos)
		b = binary.AppendVarint(b, p.cl)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	count, err := x.writeSnapshotTopics(w, cmax, gen, done)
	if err != nil {
		return err
	}
	b = append(b[:0], 'E')
	b = binary.AppendUvarint(b, count)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	if _, err := f.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("lite snapshot: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	if liteSnapshotBeforeRename != nil {
		if err := liteSnapshotBeforeRename(tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	ok = true
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("lite snapshot: %w", err)
	}
	x.mu.Lock()
	x.snapChanges, x.snapAt = changes, time.Now()
	x.mu.Unlock()
	s.log.Info("grpc: lite snapshot written", "topics", count, "took", time.Since(start))
	return nil
}

// writeSnapshotTopics writes the snapshot's lite topics to w, each with
// its messages up to commit-log offset cmax, a chunk at a time: each
// chunk is encoded into one buffer (reused) with the index held, and
// written to w after. It gives up if a lite topic is deleted meanwhile
// (removals moves from gen) or done is closed. It answers how many lite
// topics it wrote.
func (x *liteIndex) writeSnapshotTopics(w io.Writer, cmax int64, gen uint64, done <-chan struct{}) (uint64, error) {
	var b []byte
	pids := map[*liteParent]uint64{}
	var count uint64
	for next := 0; ; {
		select {
		case <-done:
			return 0, errLiteSnapshotStop
		default:
		}
		x.mu.Lock()
		if x.removals != gen {
			x.mu.Unlock()
			return 0, fmt.Errorf("lite snapshot: %w", errLiteSnapshotMoved)
		}
		end := min(next+liteSnapshotChunk, len(x.all))
		b = b[:0]
		for _, t := range x.all[next:end] {
			// The messages the positions cover: a prefix, commit-log
			// offsets growing with lite offsets; none, and the topic is
			// left to the records (as a full rebuild would find it).
			k := len(t.offs)
			for k > 0 && (t.offs[k-1] < 0 || t.offs[k-1] > cmax) {
				k--
			}
			if k == 0 {
				continue
			}
			id, known := pids[t.parent]
			if !known {
				id = uint64(len(pids))
				pids[t.parent] = id
				b = append(b, 'P')
				b = binary.AppendUvarint(b, id)
				b = appendLiteString(b, t.parent.name)
				b = binary.AppendUvarint(b, uint64(len(t.parent.topics)))
			}
			b = append(b, 'T')
			b = binary.AppendUvarint(b, id)
			b = appendLiteString(b, t.name)
			b = binary.AppendVarint(b, t.base)
			b = binary.AppendVarint(b, t.last)
			b = binary.AppendUvarint(b, uint64(k))
			for _, cl := range t.offs[:k] {
				b = binary.AppendUvarint(b, uint64(cl+1))
			}
			count++
		}
		next = end
		last := next >= len(x.all)
		x.mu.Unlock()
		if _, err := w.Write(b); err != nil {
			return 0, fmt.Errorf("lite snapshot: %w", err)
		}
		if last {
			return count, nil
		}
	}
}

// liteSnapshotBeforeRename, set by tests, runs between the snapshot's
// sync and its rename: an error stands for a crash there.
var liteSnapshotBeforeRename func(tmp string) error

func appendLiteString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// liteSnapshotReader reads a snapshot, every byte but the checksum
// through the CRC.
type liteSnapshotReader struct {
	r    *bufio.Reader
	left int64 // bytes of the file not yet read: a bound for counts
}

func (r *liteSnapshotReader) byte() (byte, error) {
	c, err := r.r.ReadByte()
	r.left--
	return c, err
}

func (r *liteSnapshotReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(r)
	return v, err
}

func (r *liteSnapshotReader) varint() (int64, error) {
	return binary.ReadVarint(r)
}

// ReadByte makes r an io.ByteReader for the varint decoders.
func (r *liteSnapshotReader) ReadByte() (byte, error) { return r.byte() }

// count reads a count of things each at least one byte long.
func (r *liteSnapshotReader) count() (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(max(r.left, 0)) {
		return 0, fmt.Errorf("count %d beyond the file", n)
	}
	return int(n), nil
}

func (r *liteSnapshotReader) string() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > 1<<16 {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	b, err := r.r.Peek(int(n))
	if err != nil {
		return "", err
	}
	s := string(b)
	r.r.Discard(int(n)) //nolint:errcheck,gosec // peeked
	r.left -= int64(n)
	return s, nil
}

// liteSpan is one parent queue's offsets at start.
type liteSpan struct{ lo, hi int64 }

// loadLiteSnapshot fills x from the snapshot at path, the lite topics of
// the parents in spans (the LITE parents' queues now) only, and answers
// where it stands in each queue it knows. A lite topic the journal
// deleted after the snapshot (all its messages at or before the
// deletion's boundary) is left out, and used notes the deletion. Any
// error means the snapshot is not to be used (os.ErrNotExist: there is
// none); x may then hold part of it.
func (s *Server) loadLiteSnapshot(ctx context.Context, path string, x *liteIndex, spans map[store.Queue]liteSpan,
	deleted map[liteKey]int64, used map[liteKey]bool,
) (map[store.Queue]int64, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close() //nolint:errcheck // read only
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	if size < int64(len(liteSnapshotMagic))+4 {
		return nil, 0, fmt.Errorf("%d bytes: truncated", size)
	}
	crc := crc32.New(liteCastagnoli)
	r := &liteSnapshotReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, size-4), crc), 1<<20), left: size - 4}
	bad := func(what string, err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	magic := make([]byte, len(liteSnapshotMagic))
	if _, err := io.ReadFull(r.r, magic); err != nil || string(magic) != string(liteSnapshotMagic) {
		return nil, 0, errors.New("not a lite snapshot (magic)")
	}
	r.left -= int64(len(magic))
	v, err := r.uvarint()
	if err != nil {
		return nil, 0, bad("version", err)
	}
	if v != liteSnapshotVersion {
		return nil, 0, fmt.Errorf("version %d, this broker reads %d", v, liteSnapshotVersion)
	}
	if _, err := r.varint(); err != nil { // written at
		return nil, 0, bad("header", err)
	}
	hint, err := r.count()
	if err != nil {
		return nil, 0, bad("header", err)
	}
	nq, err := r.count()
	if err != nil {
		return nil, 0, bad("header", err)
	}
	st := s.b.Store()
	var rr store.ReadResult
	from := make(map[store.Queue]int64, nq)
	for range nq {
		topic, err := r.string()
		if err != nil {
			return nil, 0, bad("queue", err)
		}
		id, err := r.uvarint()
		if err != nil {
			return nil, 0, bad("queue", err)
		}
		pos, err := r.varint()
		if err != nil {
			return nil, 0, bad("queue", err)
		}
		cl, err := r.varint()
		if err != nil {
			return nil, 0, bad("queue", err)
		}
		q := store.Queue{Topic: topic, ID: int32(id)}
		sp, live := spans[q]
		if !live {
			continue // no longer a LITE parent's queue
		}
		if pos > sp.hi {
			return nil, 0, fmt.Errorf("stale: queue %s ends at %d, before the snapshot's %d (records lost after it was written)", q, sp.hi, pos)
		}
		if cl >= 0 && pos-1 >= sp.lo {
			got, err := recordAt(ctx, st, q, pos-1, &rr)
			if err != nil {
				return nil, 0, fmt.Errorf("stale: %w", err)
			}
			if got != cl {
				return nil, 0, fmt.Errorf("stale: queue %s holds commit-log offset %d at %d, the snapshot %d", q, got, pos-1, cl)
			}
		}
		from[q] = pos
	}
	parentOK := map[string]bool{}
	for q := range spans {
		parentOK[q.Topic] = true
	}
	x.all = make([]*liteTopic, 0, hint)
	var parents []*liteParent // by id; nil: a parent no longer LITE
	var count uint64
	for {
		tag, err := r.byte()
		if err != nil {
			return nil, 0, bad("record", err)
		}
		switch tag {
		case 'P':
			id, err := r.uvarint()
			if err != nil || id != uint64(len(parents)) {
				return nil, 0, bad("parent", errors.Join(err, errors.New("ids out of order")))
			}
			name, err := r.string()
			if err != nil {
				return nil, 0, bad("parent", err)
			}
			n, err := r.count()
			if err != nil {
				return nil, 0, bad("parent", err)
			}
			var p *liteParent
			if parentOK[name] {
				if p = x.parents[name]; p == nil {
					p = &liteParent{name: name, topics: make(map[string]*liteTopic, min(n, x.cfg.TopicQuota))}
					x.parents[name] = p
				}
			}
			parents = append(parents, p)
		case 'T':
			id, err := r.uvarint()
			if err != nil || id >= uint64(len(parents)) {
				return nil, 0, bad("lite topic", errors.Join(err, errors.New("unknown parent")))
			}
			name, err := r.string()
			if err != nil {
				return nil, 0, bad("lite topic", err)
			}
			base, err := r.varint()
			if err != nil {
				return nil, 0, bad("lite topic", err)
			}
			last, err := r.varint()
			if err != nil {
				return nil, 0, bad("lite topic", err)
			}
			n, err := r.count()
			if err != nil || n == 0 {
				return nil, 0, bad("lite topic", errors.Join(err, errors.New("no messages")))
			}
			offs := make([]int64, n)
			for i := range offs {
				v, err := r.uvarint()
				if err != nil {
					return nil, 0, bad("lite topic", err)
				}
				offs[i] = int64(v) - 1
			}
			count++
			p := parents[id]
			if p == nil {
				continue
			}
			k := liteKey{p.name, name}
			if d, ok := deleted[k]; ok && offs[n-1] <= d {
				used[k] = true // deleted after the snapshot
				continue
			}
			if p.topics[name] != nil {
				return nil, 0, fmt.Errorf("lite topic %s of %s twice", name, p.name)
			}
			if len(p.topics) >= x.cfg.TopicQuota {
				return nil, 0, fmt.Errorf("parent topic %s has %d lite topics, grpc.lite.topic_quota: %w", p.name, len(p.topics), errLiteQuota)
			}
			t := &liteTopic{name: name, parent: p, offs: offs, base: base, last: last, pos: int32(len(x.all))}
			p.topics[name] = t
			x.all = append(x.all, t)
		case 'E':
			n, err := r.uvarint()
			if err != nil {
				return nil, 0, bad("end", err)
			}
			if n != count {
				return nil, 0, fmt.Errorf("end: %d lite topics, the snapshot says %d", count, n)
			}
			if _, err := r.r.ReadByte(); err != io.EOF { //nolint:errorlint // io.EOF is returned bare
				return nil, 0, errors.New("bytes after the end")
			}
			var sum [4]byte
			if _, err := io.ReadFull(f, sum[:]); err != nil {
				return nil, 0, bad("checksum", err)
			}
			if binary.BigEndian.Uint32(sum[:]) != crc.Sum32() {
				return nil, 0, errors.New("checksum mismatch")
			}
			return from, int(count), nil
		default:
			return nil, 0, fmt.Errorf("record type %q", tag)
		}
	}
}
