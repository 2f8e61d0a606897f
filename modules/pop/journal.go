package pop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/durable"
)

// Files under <dataDir>/pop:
//
//	secret        the handle key (32 random bytes, hex), made once
//	state.json    a snapshot of every queue's state, with the journal
//	              sequence number it covers
//	journal       records after the snapshot, one a line:
//	              "<crc32c hex> <json>\n"; a torn or damaged tail is cut
//	              off when the journal is opened (nothing after it was
//	              acknowledged: every write is fsynced before the call
//	              that made it returns)
const (
	secretFile   = "secret"
	snapshotFile = "state.json"
	journalFile  = "journal"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record kinds.
const (
	kindPop = "pop" // (re)delivered: entry set to (attempt, until, nonce); next raised to X
	kindAck = "ack" // entry removed (acked, forwarded to the DLQ, or its message is gone)
	kindInv = "inv" // invisibility changed: until and nonce replaced
	kindAdv = "adv" // next raised to X (messages the filter skipped)
	kindRst = "rst" // next set to X, in-flight entries at or past it dropped (the queue was cut)
)

// record is one journal line.
type record struct {
	Seq     uint64 `json:"s"`
	Kind    string `json:"k"`
	Group   string `json:"g"`
	Topic   string `json:"t"`
	Queue   int32  `json:"q"`
	Offset  int64  `json:"o,omitempty"`
	Attempt int32  `json:"a,omitempty"`
	Until   int64  `json:"u,omitempty"` // unix ms
	Nonce   uint64 `json:"n,omitempty"`
	Next    int64  `json:"x,omitempty"`
}

// snapshot is state.json.
type snapshot struct {
	Seq    uint64      `json:"seq"`
	Queues []snapQueue `json:"queues"`
}

type snapQueue struct {
	Group    string      `json:"group"`
	Topic    string      `json:"topic"`
	Queue    int32       `json:"queue"`
	Next     int64       `json:"next"`
	InFlight []snapEntry `json:"inFlight,omitempty"`
}

type snapEntry struct {
	Offset  int64  `json:"offset"`
	Attempt int32  `json:"attempt"`
	Until   int64  `json:"until"`
	Nonce   uint64 `json:"nonce"`
}

// journal is the append-only log of state changes plus its snapshot.
//
// Group commit: callers append records under the service's state lock
// (append numbers and encodes them into pend, so the file order is the
// order the state changed in) and then, without that lock, wait for the
// batch their records belong to. One flusher goroutine writes everything
// pending at once and fsyncs it: one fsync covers every record appended
// before it started, so under load the cost of an fsync is shared by all
// the calls that arrived while the previous one ran. A call answers only
// once its batch is durable. A failed write or sync fails its batch and
// every later one: the file's tail is unknown until the journal is
// reopened (restart), so nothing after it is reported durable.
type journal struct {
	dir  string
	log  *slog.Logger
	wrap func(syncFile) syncFile // tests: wraps each file appended to

	// Guarded by the caller's state lock (Service.mu).
	seq uint64 // last sequence number assigned
	n   int    // records since the last snapshot

	mu       sync.Mutex
	wake     *sync.Cond // the flusher waits on it for work
	pend     []byte     // encoded records not yet taken by the flusher
	spare    []byte     // the buffer last written, reused for pend
	cur      *batch     // the batch pend's records belong to
	inflight *batch     // the batch being written and synced, or nil
	snap     *snapshot  // a compaction for the flusher to do first
	err      error      // sticky: a write or sync failed
	closing  bool
	stopped  chan struct{}

	f     syncFile      // the flusher's alone once it runs
	syncs atomic.Uint64 // fsyncs of the journal file (benchmarks)
}

// syncFile is what the journal appends to: an *os.File, or in tests a
// wrapper that fails.
type syncFile interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// batch is the records one write and fsync makes durable. done is closed
// once that is over; err is its outcome.
type batch struct {
	done chan struct{}
	err  error
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// loadSecret returns the handle key, making it on first use.
func loadSecret(dir string) ([]byte, error) {
	p := filepath.Join(dir, secretFile)
	b, err := os.ReadFile(p)
	if err == nil {
		key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
		if err != nil || len(key) < 16 {
			return nil, fmt.Errorf("pop: secret %s is damaged", p)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pop: read secret: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("pop: make secret: %w", err)
	}
	if err := durable.WriteFile(p, []byte(hex.EncodeToString(key)), 0o600); err != nil {
		return nil, fmt.Errorf("pop: save secret: %w", err)
	}
	return key, nil
}

// openJournal loads the snapshot and replays the journal into apply, cutting
// a damaged tail, and leaves the journal open for appends.
func openJournal(dir string, log *slog.Logger, wrap func(syncFile) syncFile, apply func(record), load func(*snapshot)) (*journal, error) {
	j := &journal{dir: dir, log: log, wrap: wrap}
	var snap snapshot
	b, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &snap); err != nil {
			return nil, fmt.Errorf("pop: decode %s: %w", snapshotFile, err)
		}
		load(&snap)
		j.seq = snap.Seq
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("pop: read %s: %w", snapshotFile, err)
	}
	p := filepath.Join(dir, journalFile)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = durable.CreateFile(p, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("pop: open journal: %w", err)
	}
	good, err := j.replay(f, snap.Seq, apply)
	if err != nil {
		f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pop: stat journal: %w", err)
	}
	if fi.Size() != good {
		log.Warn("cutting damaged journal tail", "file", p, "at", good, "size", fi.Size())
		err := f.Truncate(good)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("pop: cut journal tail: %w", err)
		}
	}
	if _, err := f.Seek(good, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pop: seek journal: %w", err)
	}
	j.f = j.wrapFile(f)
	j.wake = sync.NewCond(&j.mu)
	j.cur = newBatch()
	j.stopped = make(chan struct{})
	go j.run()
	return j, nil
}

func (j *journal) wrapFile(f *os.File) syncFile {
	if j.wrap != nil {
		return j.wrap(f)
	}
	return f
}

// replay applies the records after seq and returns the length of the
// intact prefix of the file.
func (j *journal) replay(f *os.File, after uint64, apply func(record)) (int64, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, os.ErrClosed) {
			return 0, fmt.Errorf("pop: read journal: %w", err)
		}
		if len(line) == 0 || line[len(line)-1] != '\n' {
			return good, nil // end, or a torn last line
		}
		rec, ok := parseLine(line[:len(line)-1])
		if !ok {
			return good, nil
		}
		good += int64(len(line))
		j.n++
		if rec.Seq > j.seq {
			j.seq = rec.Seq
		}
		if rec.Seq > after {
			apply(rec)
		}
		if err != nil {
			return good, nil //nolint:nilerr // a torn or damaged tail ends the replay at the last good record
		}
	}
}

func parseLine(line []byte) (record, bool) {
	var rec record
	if len(line) < 10 || line[8] != ' ' {
		return rec, false
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], line[:8]); err != nil {
		return rec, false
	}
	want := uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
	if crc32.Checksum(line[9:], castagnoli) != want {
		return rec, false
	}
	if err := json.Unmarshal(line[9:], &rec); err != nil {
		return rec, false
	}
	return rec, true
}

// append numbers recs, encodes them into the pending buffer and returns
// the batch that will make them durable; the caller applies them to its
// state, releases its lock and waits for the batch. Called with the
// state lock held, so records are numbered in the order the state changes.
// After a failed write it appends nothing and returns the error.
func (j *journal) append(recs []record) (*batch, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return nil, j.lostError()
	}
	for i := range recs {
		j.seq++
		recs[i].Seq = j.seq
		j.pend = appendRecord(j.pend, &recs[i])
	}
	j.n += len(recs)
	j.wake.Signal()
	return j.cur, nil
}

func (j *journal) lostError() error {
	return fmt.Errorf("pop: journal: an earlier write failed; restart the broker: %w", j.err)
}

// barrier returns the batch that makes every record appended so far
// durable, nil when they all are. A call that answers from the state
// without appending (an ack of an acked message, a stale handle) waits
// for it, so it never reports what a crash could undo. Called with the
// state lock held.
func (j *journal) barrier() *batch {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case len(j.pend) > 0:
		return j.cur
	case j.inflight != nil:
		return j.inflight
	case j.err != nil:
		b := newBatch()
		b.err = j.lostError()
		close(b.done)
		return b
	}
	return nil
}

// wait returns once b is durable (nil), or the error that kept it from
// being so, or ctx's error (the records may still become durable).
func (j *journal) wait(ctx context.Context, b *batch) error {
	if b == nil {
		return nil
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return fmt.Errorf("pop: waiting for the journal: %w", ctx.Err())
	}
}

// compactLater hands the flusher snap, the state after every record
// appended so far, to write as the new snapshot before it writes anything
// more. Called with the state lock held.
func (j *journal) compactLater(snap *snapshot) {
	snap.Seq = j.seq
	j.n = 0
	j.mu.Lock()
	j.snap = snap
	j.wake.Signal()
	j.mu.Unlock()
}

// run is the flusher: it compacts when asked, then writes and fsyncs all
// pending records at once, until the journal closes with nothing pending.
func (j *journal) run() {
	defer close(j.stopped)
	j.mu.Lock()
	for {
		for len(j.pend) == 0 && j.snap == nil && !j.closing {
			j.wake.Wait()
		}
		if len(j.pend) == 0 && j.snap == nil {
			j.mu.Unlock()
			return
		}
		snap := j.snap
		j.snap = nil
		var buf []byte
		var b *batch
		if len(j.pend) > 0 {
			buf, b = j.pend, j.cur
			j.pend, j.cur, j.inflight = j.spare[:0], newBatch(), b
		}
		failed := j.err
		j.mu.Unlock()

		var err error
		if snap != nil && failed == nil {
			// Everything the snapshot covers is either in the file or
			// in buf, which goes to the new file after it.
			err = j.compact(snap)
		}
		if b != nil && err == nil {
			if failed != nil {
				err = failed
			} else {
				err = j.writeSync(buf)
			}
		}

		j.mu.Lock()
		if err != nil && j.err == nil {
			j.err = err
			j.log.Error("pop journal failed: no later record is durable until a restart", "err", err)
		}
		if b != nil {
			if err != nil {
				b.err = j.lostError()
			}
			close(b.done)
			j.inflight = nil
			j.spare = buf[:0]
		}
	}
}

func (j *journal) writeSync(buf []byte) error {
	if _, err := j.f.Write(buf); err != nil {
		return fmt.Errorf("pop: write journal: %w", err)
	}
	j.syncs.Add(1)
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("pop: sync journal: %w", err)
	}
	return nil
}

// compact writes snap durably and starts an empty journal. A crash
// between the two steps is harmless: replay skips the records the
// snapshot covers. A snapshot that could not be written is logged and
// the journal goes on growing (the next compaction tries again); a journal
// that could not be reset or reopened is an error, since appends to the
// old file could be lost.
func (j *journal) compact(snap *snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		j.log.Error("pop journal compaction", "err", fmt.Errorf("pop: encode snapshot: %w", err))
		return nil
	}
	if err := durable.WriteFile(filepath.Join(j.dir, snapshotFile), b, 0o644); err != nil {
		j.log.Error("pop journal compaction", "err", fmt.Errorf("pop: save snapshot: %w", err))
		return nil
	}
	p := filepath.Join(j.dir, journalFile)
	if err := durable.WriteFile(p, nil, 0o644); err != nil {
		return fmt.Errorf("pop: reset journal: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("pop: reopen journal: %w", err)
	}
	if err := j.f.Close(); err != nil {
		j.log.Warn("close old pop journal", "err", err)
	}
	j.f = j.wrapFile(f)
	return nil
}

// close writes what is pending, stops the flusher and closes the file.
// Called with the state lock held, after the last append.
func (j *journal) close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		return nil
	}
	j.closing = true
	j.wake.Signal()
	j.mu.Unlock()
	<-j.stopped
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("pop: close journal: %w", err)
	}
	return nil
}

// appendRecord appends r's journal line, "<crc32c hex> <json>\n", without
// reflection: the same JSON encoding/json writes for record (parseLine
// reads both).
func appendRecord(buf []byte, r *record) []byte {
	at := len(buf)
	buf = append(buf, "00000000 {\"s\":"...)
	body := at + 9
	buf = strconv.AppendUint(buf, r.Seq, 10)
	buf = append(buf, `,"k":`...)
	buf = appendJSONString(buf, r.Kind)
	buf = append(buf, `,"g":`...)
	buf = appendJSONString(buf, r.Group)
	buf = append(buf, `,"t":`...)
	buf = appendJSONString(buf, r.Topic)
	buf = append(buf, `,"q":`...)
	buf = strconv.AppendInt(buf, int64(r.Queue), 10)
	if r.Offset != 0 {
		buf = append(buf, `,"o":`...)
		buf = strconv.AppendInt(buf, r.Offset, 10)
	}
	if r.Attempt != 0 {
		buf = append(buf, `,"a":`...)
		buf = strconv.AppendInt(buf, int64(r.Attempt), 10)
	}
	if r.Until != 0 {
		buf = append(buf, `,"u":`...)
		buf = strconv.AppendInt(buf, r.Until, 10)
	}
	if r.Nonce != 0 {
		buf = append(buf, `,"n":`...)
		buf = strconv.AppendUint(buf, r.Nonce, 10)
	}
	if r.Next != 0 {
		buf = append(buf, `,"x":`...)
		buf = strconv.AppendInt(buf, r.Next, 10)
	}
	buf = append(buf, '}')
	sum := crc32.Checksum(buf[body:], castagnoli)
	hex.Encode(buf[at:at+8], []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	return append(buf, '\n')
}

// appendJSONString appends s as a JSON string: printable ASCII as is,
// anything else through encoding/json (escapes, invalid UTF-8).
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
