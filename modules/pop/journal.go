package pop

import (
	"bufio"
	"bytes"
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
type journal struct {
	dir  string
	f    *os.File
	seq  uint64 // last sequence number written
	n    int    // records in the journal file
	log  *slog.Logger
	buf  []byte
	lost bool // a write failed: the file's tail is unknown until reopened
}

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
func openJournal(dir string, log *slog.Logger, apply func(record), load func(*snapshot)) (*journal, error) {
	j := &journal{dir: dir, log: log}
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
	j.f = f
	return j, nil
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
			return good, nil
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

// write appends recs (numbering them) and fsyncs. On error nothing may be
// assumed written; the caller does not apply recs.
func (j *journal) write(recs []record) error {
	if len(recs) == 0 {
		return nil
	}
	if j.lost {
		return errors.New("pop: journal: an earlier write failed; restart the broker")
	}
	j.buf = j.buf[:0]
	seq := j.seq
	for i := range recs {
		seq++
		recs[i].Seq = seq
		body, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("pop: encode record: %w", err)
		}
		j.buf = fmt.Appendf(j.buf, "%08x ", crc32.Checksum(body, castagnoli))
		j.buf = append(j.buf, body...)
		j.buf = append(j.buf, '\n')
	}
	if _, err := j.f.Write(j.buf); err != nil {
		j.lost = true
		return fmt.Errorf("pop: write journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		j.lost = true
		return fmt.Errorf("pop: sync journal: %w", err)
	}
	j.seq = seq
	j.n += len(recs)
	return nil
}

// compact writes snap (covering every record written so far) durably and
// starts an empty journal. A crash between the two steps is harmless:
// replay skips the records the snapshot covers.
func (j *journal) compact(snap *snapshot) error {
	snap.Seq = j.seq
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("pop: encode snapshot: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(j.dir, snapshotFile), b, 0o644); err != nil {
		return fmt.Errorf("pop: save snapshot: %w", err)
	}
	p := filepath.Join(j.dir, journalFile)
	if err := durable.WriteFile(p, nil, 0o644); err != nil {
		return fmt.Errorf("pop: reset journal: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		j.lost = true
		return fmt.Errorf("pop: reopen journal: %w", err)
	}
	j.f.Close()
	j.f = f
	j.n = 0
	return nil
}

func (j *journal) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("pop: close journal: %w", err)
	}
	return nil
}
