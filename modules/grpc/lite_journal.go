package grpc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/quivermq/quiver/core/durable"
)

// liteJournal is the append-only log of what the parent queues cannot
// say about lite topics: the consumer offsets of the groups (an 'O' record
// each time an ack moves one) and the deletions by TTL (a 'D' record: the
// lite topic's messages up to that commit-log offset belong to the deleted
// topic, whatever the parent queues still hold). Each record is
// length + CRC-32 + payload; a torn tail (SIGKILL mid-write) is cut at
// open. Writes are fsynced before the RPC that made them answers. At open
// the journal is read whole and rewritten with only what is still live
// (one 'O' per group and lite topic, the deletions), so it does not grow
// across restarts.
type liteJournal struct {
	mu   sync.Mutex
	path string
	f    *os.File
	w    *bufio.Writer
	size int64
	// base is the size the last compaction left; compacting is set while
	// one runs, and pending then keeps what is appended meanwhile.
	base       int64
	compacting bool
	pending    []liteRecord
	// closed is set by close: a second close (Server.Stop runs twice when
	// a test and its cleanup both stop it) returns nil.
	closed bool
}

// liteCompactMin is how much a journal grows past what its last
// compaction left before it is compacted while serving (also when it is
// four times that size).
var liteCompactMin int64 = 64 << 20

const (
	liteRecOffset = 'O'
	liteRecDelete = 'D'
)

// liteRecord is one journal record.
type liteRecord struct {
	kind                byte
	parent, name, group string // group: 'O' only
	value               int64  // 'O': committed lite offset; 'D': boundary commit-log offset
}

func (r liteRecord) encode(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, r.kind)
	for _, s := range []string{r.parent, r.name, r.group} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, r.value)
	payload := b[start+8:]
	binary.BigEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[start+4:], crc32.ChecksumIEEE(payload))
	return b
}

var errLiteRecord = errors.New("malformed lite journal record")

// decodeLiteRecord decodes one record's payload; its strings are p's
// bytes (valid while p is).
func decodeLiteRecord(p []byte) (kind byte, parent, name, group []byte, value int64, err error) {
	if len(p) < 1 {
		return 0, nil, nil, nil, 0, errLiteRecord
	}
	kind = p[0]
	p = p[1:]
	var ss [3][]byte
	for i := range ss {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return 0, nil, nil, nil, 0, errLiteRecord
		}
		ss[i] = p[k : k+int(n)]
		p = p[k+int(n):]
	}
	v, k := binary.Varint(p)
	if k <= 0 {
		return 0, nil, nil, nil, 0, errLiteRecord
	}
	return kind, ss[0], ss[1], ss[2], v, nil
}

// readLiteJournal reads every whole record of path; a missing file has
// none. It answers where the whole records end.
func readLiteJournal(path string, each func(liteRecord)) (int64, error) {
	return scanLiteJournal(path, func(kind byte, parent string, name []byte, group string, value int64) {
		each(liteRecord{kind: kind, parent: parent, name: string(name), group: group, value: value})
	})
}

// scanLiteJournal reads every whole record of path as readLiteJournal
// does, without making a string of each lite topic's name: name is valid
// during the call only. The parent and group names (few, repeated in
// every record) are made once.
func scanLiteJournal(path string, each func(kind byte, parent string, name []byte, group string, value int64)) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lite journal: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only
	r := bufio.NewReaderSize(f, 1<<16)
	var good int64
	var hdr [8]byte
	buf := make([]byte, 0, 256)
	interned := map[string]string{}
	intern := func(b []byte) string {
		if s, ok := interned[string(b)]; ok {
			return s
		}
		s := string(b)
		if len(interned) < 4096 {
			interned[s] = s
		}
		return s
	}
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return good, nil // end, or a torn header
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<16 {
			return good, nil
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return good, nil
		}
		if crc32.ChecksumIEEE(buf) != binary.BigEndian.Uint32(hdr[4:]) {
			return good, nil
		}
		kind, parent, name, group, value, err := decodeLiteRecord(buf)
		if err != nil {
			return good, nil
		}
		each(kind, intern(parent), name, intern(group), value)
		good += 8 + int64(n)
	}
}

// openLiteJournal writes live (the compacted state) to a fresh journal in
// dir, replacing the old one atomically, and opens it for appending.
func openLiteJournal(dir string, live []liteRecord) (*liteJournal, error) {
	if err := durable.MkdirAll(dir, 0o755); err != nil { // its entry in the data directory durable too
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	path := filepath.Join(dir, "lite.journal")
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var b []byte
	var size int64
	for _, r := range live {
		b = r.encode(b[:0])
		size += int64(len(b))
		if _, err := w.Write(b); err != nil {
			f.Close() //nolint:errcheck,gosec // the write error is the one to report
			return nil, fmt.Errorf("lite journal: %w", err)
		}
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close() //nolint:errcheck,gosec // the write error is the one to report
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close() //nolint:errcheck,gosec // the rename error is the one to report
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil { // the rename
		f.Close() //nolint:errcheck,gosec // the sync error is the one to report
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		f.Close() //nolint:errcheck,gosec // the seek error is the one to report
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	return &liteJournal{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), size: size, base: size}, nil
}

// reopenLiteJournal opens the journal in dir for appending as it is, cut
// to its whole records (good bytes: a torn tail goes): the start found
// every record of it live, so a rewrite would copy it unchanged.
func reopenLiteJournal(dir string, good int64) (*liteJournal, error) {
	path := filepath.Join(dir, "lite.journal")
	f, err := os.OpenFile(path, os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() != good {
		if err = f.Truncate(good); err == nil {
			err = f.Sync()
		}
	}
	if err == nil {
		_, err = f.Seek(good, io.SeekStart)
	}
	if err != nil {
		f.Close() //nolint:errcheck,gosec // the first error is the one to report
		return nil, fmt.Errorf("lite journal: %w", err)
	}
	return &liteJournal{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), size: good, base: good}, nil
}

// append writes recs and makes them durable.
func (j *liteJournal) append(recs []liteRecord) error {
	if j == nil || len(recs) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var b []byte
	for _, r := range recs {
		b = r.encode(b)
	}
	if _, err := j.w.Write(b); err != nil {
		return fmt.Errorf("lite journal: %w", err)
	}
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("lite journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("lite journal: sync: %w", err)
	}
	j.size += int64(len(b))
	if j.compacting {
		j.pending = append(j.pending, recs...)
	}
	return nil
}

// needsCompaction says whether the journal grew enough to be compacted.
func (j *liteJournal) needsCompaction() bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	grown := j.size - j.base
	return grown > liteCompactMin && j.size > 4*j.base
}

// compact rewrites the journal with what is live, without stopping
// appends: the deletions are copied from the journal as it is, each
// snapshot chunk returns the groups' offsets of some lite topics (each
// call with the index held briefly; nil when done), and what was appended
// meanwhile goes last, so it wins at replay. The new file replaces the old
// one atomically.
func (j *liteJournal) compact(chunk func() []liteRecord) error {
	j.mu.Lock()
	if err := j.w.Flush(); err != nil {
		j.mu.Unlock()
		return fmt.Errorf("lite journal: %w", err)
	}
	j.compacting, j.pending = true, nil
	j.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			j.mu.Lock()
			j.compacting, j.pending = false, nil
			j.mu.Unlock()
		}
	}()
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("lite journal: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var size int64
	var werr error
	write := func(recs []liteRecord) {
		var b []byte
		for _, r := range recs {
			b = r.encode(b[:0])
			if werr == nil {
				_, werr = w.Write(b)
				size += int64(len(b))
			}
		}
	}
	if _, err := readLiteJournal(j.path, func(r liteRecord) {
		if r.kind == liteRecDelete {
			write([]liteRecord{r})
		}
	}); err != nil {
		f.Close() //nolint:errcheck,gosec // the read error is the one to report
		return err
	}
	for recs := chunk(); recs != nil; recs = chunk() {
		write(recs)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	write(j.pending)
	if werr == nil {
		werr = w.Flush()
	}
	if werr == nil {
		werr = f.Sync()
	}
	if werr == nil {
		werr = os.Rename(tmp, j.path)
	}
	if werr == nil {
		werr = durable.SyncDir(filepath.Dir(j.path))
	}
	if werr != nil {
		f.Close() //nolint:errcheck,gosec // the write error is the one to report
		return fmt.Errorf("lite journal: compact: %w", werr)
	}
	if err := j.f.Close(); err != nil {
		f.Close() //nolint:errcheck,gosec // the close error is the one to report
		return fmt.Errorf("lite journal: %w", err)
	}
	// The new file, reopened for appending.
	nf, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o644)
	f.Close() //nolint:errcheck,gosec // synced above; nf takes over
	if err != nil {
		return fmt.Errorf("lite journal: %w", err)
	}
	j.f, j.w, j.size, j.base = nf, bufio.NewWriterSize(nf, 1<<16), size, size
	j.compacting, j.pending, ok = false, nil, true
	return nil
}

func (j *liteJournal) close() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if err := j.w.Flush(); err != nil {
		j.f.Close() //nolint:errcheck,gosec // the flush error is the one to report
		return fmt.Errorf("lite journal: %w", err)
	}
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("lite journal: %w", err)
	}
	return nil
}
