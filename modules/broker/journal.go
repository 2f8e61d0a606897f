package broker

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/durable"
)

// A journal makes a metadata table's changes cost O(1): each change is one
// record appended to <dataDir>/config/<name>.journal and made durable with
// one fdatasync, instead of a rewrite of the whole document (1.1 MB at
// 5,000 topics). The whole document (the snapshot, kept by the metaStore
// as before, so migration and the Java-shaped files are unchanged) is
// written in the background once the journal has grown past a threshold,
// and then the journal is cut to the records that came after it. A
// snapshot names the last journal record it holds (its journal sequence),
// so a crash between the snapshot and the cut only replays records the
// snapshot already has, which is harmless: every record sets or deletes
// one entry.
//
// Record framing: [length u32][crc32c(payload) u32][payload], payload the
// JSON of a journalRecord. A torn or damaged tail (a crash during an
// append) ends the replay and is cut off when the journal is opened.
type journal struct {
	mu   sync.Mutex
	path string
	f    *os.File
	seq  uint64 // sequence of the last record written
	recs int    // records in the file
	buf  []byte
	// appends counts successful appends (one write and fsync each).
	appends atomic.Int64
}

// journalRecord is one change: Value is the entry's new JSON, absent for
// a deletion. Version is the table's data version after the change, where
// the table has one.
type journalRecord struct {
	Seq     uint64          `json:"seq"`
	Name    string          `json:"name"`
	Value   json.RawMessage `json:"value,omitempty"`
	Version json.RawMessage `json:"dataVersion,omitempty"`
}

const (
	journalHeader  = 8
	journalMaxRec  = 16 << 20
	journalMinRecs = 1024 // compaction threshold floor
)

var journalCRC = crc32.MakeTable(crc32.Castagnoli)

// openJournal opens (creating durably) the journal at path and returns
// the whole records in it, in order; a torn tail is cut. held is the
// journal sequence the table's document holds (its JournalSeq): the next
// record is numbered above both it and the last record in the file, so
// sequences never go back. A clean stop folds the journal into the
// document and empties the file; numbering the next start's records from
// the file alone (from 1 again) made the replay after a later crash skip
// them as already held, and lose them (issue 37).
func openJournal(path string, held uint64, log *slog.Logger) (*journal, []journalRecord, error) {
	if err := durable.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("broker: journal %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		f, err = durable.CreateFile(path, 0o644)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("broker: journal %s: %w", path, err)
	}
	recs, good, err := readJournal(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("broker: journal %s: %w", path, err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > good {
		log.Warn("metadata journal: torn or damaged tail cut (a crash during a change that was not acknowledged)",
			"file", path, "offset", good, "bytes", fi.Size()-good)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("broker: journal %s: cut tail: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("broker: journal %s: cut tail: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("broker: journal %s: %w", path, err)
	}
	j := &journal{path: path, f: f, recs: len(recs), seq: held}
	if len(recs) > 0 {
		j.seq = max(held, recs[len(recs)-1].Seq)
	}
	return j, recs, nil
}

// readJournal reads whole records from r and the offset after the last.
func readJournal(r io.Reader) ([]journalRecord, int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []journalRecord
	var off int64
	var hdr [journalHeader]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return out, off, nil //nolint:nilerr // end, or a torn header: replay stops at the last whole record
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n == 0 || n > journalMaxRec {
			return out, off, nil
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return out, off, nil //nolint:nilerr // a torn record body ends the replay
		}
		if crc32.Checksum(p, journalCRC) != binary.BigEndian.Uint32(hdr[4:]) {
			return out, off, nil
		}
		var rec journalRecord
		if err := json.Unmarshal(p, &rec); err != nil {
			return out, off, nil //nolint:nilerr // a damaged record ends the replay
		}
		if len(out) > 0 && rec.Seq <= out[len(out)-1].Seq {
			return out, off, nil // not a continuation: stale bytes
		}
		out = append(out, rec)
		off += journalHeader + int64(n)
	}
}

// append writes recs (their sequences assigned here) with one write and
// one fdatasync; when it returns nil they are durable.
func (j *journal) append(recs []journalRecord) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("broker: journal %s: closed", j.path)
	}
	b := j.buf[:0]
	seq := j.seq
	for i := range recs {
		seq++
		recs[i].Seq = seq
		p, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("broker: journal %s: encode %s: %w", j.path, recs[i].Name, err)
		}
		var hdr [journalHeader]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(p)))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(p, journalCRC))
		b = append(append(b, hdr[:]...), p...)
	}
	if cap(b) <= 1<<20 {
		j.buf = b
	}
	if _, err := j.f.Write(b); err != nil {
		j.rewindAfterFailure()
		return fmt.Errorf("broker: journal %s: write: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		j.rewindAfterFailure()
		return fmt.Errorf("broker: journal %s: sync: %w", j.path, err)
	}
	j.seq = seq
	j.recs += len(recs)
	j.appends.Add(1)
	return nil
}

// rewindAfterFailure drops a failed append's bytes, so a later append
// does not follow a half-written record (replay would stop there).
func (j *journal) rewindAfterFailure() {
	if off, err := j.tailOffset(); err == nil {
		_ = j.f.Truncate(off)
		_, _ = j.f.Seek(off, io.SeekStart)
	}
}

// tailOffset is the end of the last whole record.
func (j *journal) tailOffset() (int64, error) {
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	_, off, err := readJournal(j.f)
	return off, err
}

// lastSeq is the sequence of the last record appended.
func (j *journal) lastSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// size is the number of records in the file.
func (j *journal) size() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.recs
}

// cut rewrites the journal keeping only the records after upto (those a
// snapshot holding everything up to upto does not have): a new file is
// written and fsynced, renamed over the journal and the directory
// fsynced.
func (j *journal) cut(upto uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("broker: journal %s: closed", j.path)
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("broker: journal %s: cut: %w", j.path, err)
	}
	recs, off, err := readJournal(j.f)
	if err != nil {
		return fmt.Errorf("broker: journal %s: cut: %w", j.path, err)
	}
	if _, err := j.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("broker: journal %s: cut: %w", j.path, err)
	}
	var b []byte
	kept := 0
	for _, r := range recs {
		if r.Seq <= upto {
			continue
		}
		p, err := json.Marshal(&r)
		if err != nil {
			return fmt.Errorf("broker: journal %s: cut: %w", j.path, err)
		}
		var hdr [journalHeader]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(p)))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(p, journalCRC))
		b = append(append(b, hdr[:]...), p...)
		kept++
	}
	if err := durable.WriteFile(j.path, b, 0o644); err != nil {
		return fmt.Errorf("broker: journal cut: %w", err)
	}
	nf, err := os.OpenFile(j.path, os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("broker: journal %s: reopen: %w", j.path, err)
	}
	if _, err := nf.Seek(int64(len(b)), io.SeekStart); err != nil {
		nf.Close()
		return fmt.Errorf("broker: journal %s: reopen: %w", j.path, err)
	}
	j.f.Close()
	j.f = nf
	j.recs = kept
	return nil
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// compactor runs a table's snapshot-and-cut in the background, one at a
// time, and waits for it on close.
type compactor struct {
	running atomic.Bool
	wg      sync.WaitGroup
}

// maybe starts run when the journal holds more than max(journalMinRecs,
// live/4) records and no compaction is running.
func (c *compactor) maybe(j *journal, live int, run func()) {
	if j == nil || j.size() <= max(journalMinRecs, live/4) {
		return
	}
	if !c.running.CompareAndSwap(false, true) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.running.Store(false)
		run()
	}()
}

func (c *compactor) wait() { c.wg.Wait() }
