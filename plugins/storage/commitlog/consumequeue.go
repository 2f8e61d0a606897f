package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/store"
)

// cqFile is one consume-queue file holding perFile entries from base.
type cqFile struct {
	base int64 // queue offset of its first entry
	path string
	f    *os.File
}

// consumeQueue indexes one topic/queue: entry i is queue offset i.
type consumeQueue struct {
	q       store.Queue
	dir     string
	perFile int64

	mu    sync.RWMutex // guards files and the tail; held for reads so files are not closed under them
	files []*cqFile    // contiguous, oldest first
	// tail holds the newest entries, from tailFrom up to max, not yet
	// written to the files (write-behind: an append costs no syscall for
	// its consume queue). flushTail writes it out.
	tail     []byte
	tailFrom int64
	dropped  bool // the topic was deleted

	// flushMu serializes flushTail; flushBuf is its scratch.
	flushMu  sync.Mutex
	flushBuf []byte

	min, max atomic.Int64

	// Writer state, guarded by Store.mu.
	next    int64 // next offset to assign
	saved   int64 // next before the current append
	touched bool
	pend    []byte

	// Recovery scan state (scan.go): whether a record of the queue was
	// seen, the queue offset after the last one seen and its position,
	// and a cache of entries read to check them.
	scanned    bool
	rnext      int64
	rlast      int64
	rcache     []byte
	rcacheFrom int64
	// entries below the checkpoint the scan had to add, from where
	rrebuilt, rrebuiltFrom int64
	// entries the scan rewrote, from where, and the first one's story
	rfixed, rfixedFrom int64
	rfixedWhy          string
}

func newConsumeQueue(q store.Queue, dir string, perFile int64) *consumeQueue {
	return &consumeQueue{q: q, dir: dir, perFile: perFile}
}

func cqFileName(base int64) string { return fmt.Sprintf("%020d", base*cqEntrySize) }

// offsets returns min and max, min never above max.
func (c *consumeQueue) offsets() (int64, int64) {
	mx := c.max.Load()
	mn := c.min.Load()
	return min(mn, mx), mx
}

// fileIndex returns the index in files of the file holding offset off, or -1.
// Called with mu held.
func (c *consumeQueue) fileIndex(off int64) int {
	if len(c.files) == 0 || off < c.files[0].base {
		return -1
	}
	i := (off - c.files[0].base) / c.perFile
	if i >= int64(len(c.files)) {
		return -1
	}
	return int(i)
}

// writeEntries writes encoded entries starting at queue offset from,
// creating files as needed.
func (s *Store) writeEntries(c *consumeQueue, from int64, data []byte) error {
	for len(data) > 0 {
		fb := from - from%c.perFile
		n := min(int64(len(data)/cqEntrySize), c.perFile-from%c.perFile)
		c.mu.RLock()
		i := c.fileIndex(from)
		var f *cqFile
		if i >= 0 {
			f = c.files[i]
		}
		c.mu.RUnlock()
		if f == nil {
			var err error
			if f, err = s.createCQFile(c, fb); err != nil {
				return err
			}
		}
		c.mu.RLock()
		_, err := f.f.WriteAt(data[:n*cqEntrySize], (from-fb)*cqEntrySize)
		c.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("commitlog: write consume queue %s file %s: %w", c.q, filepath.Base(f.path), err)
		}
		s.markDirty(f, "")
		data = data[n*cqEntrySize:]
		from += n
	}
	return nil
}

// createCQFile creates the consume-queue file starting at base.
func (s *Store) createCQFile(c *consumeQueue, base int64) (*cqFile, error) {
	c.mu.RLock()
	empty := len(c.files) == 0
	c.mu.RUnlock()
	if empty {
		if err := s.mkdirs(c.dir); err != nil {
			return nil, fmt.Errorf("commitlog: create consume queue %s: %w", c.q, err)
		}
	}
	path := filepath.Join(c.dir, cqFileName(base))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("commitlog: create consume queue %s: %w", c.q, err)
	}
	cf := &cqFile{base: base, path: path, f: f}
	c.mu.Lock()
	if n := len(c.files); n > 0 && c.files[n-1].base+c.perFile != base {
		c.mu.Unlock()
		f.Close()
		return nil, fmt.Errorf("commitlog: consume queue %s: file at %d does not follow %d", c.q, base, c.files[n-1].base)
	}
	c.files = append(c.files, cf)
	c.mu.Unlock()
	s.markDirty(nil, c.dir)
	return cf, nil
}

// mkdirs creates dir and its parents under the consume-queue root and
// remembers which directories need an fsync.
func (s *Store) mkdirs(dir string) error {
	var made []string
	for d := dir; d != s.cqDir && len(d) > len(s.cqDir); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range made {
		s.markDirty(nil, filepath.Dir(d))
	}
	return nil
}

func (s *Store) markDirty(f *cqFile, dir string) {
	s.dirtyMu.Lock()
	if f != nil {
		s.dirtyCQ[f] = struct{}{}
	}
	if dir != "" {
		s.dirtyDirs[dir] = struct{}{}
	}
	s.dirtyMu.Unlock()
}

func (c *consumeQueue) isDropped() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dropped
}

// appendTail adds encoded entries after max and publishes the new max.
// It reports whether the tail should be flushed. Called by the writer.
func (c *consumeQueue) appendTail(entries []byte, next int64) bool {
	c.mu.Lock()
	c.tail = append(c.tail, entries...)
	full := len(c.tail) >= cqTailFlush
	c.mu.Unlock()
	c.max.Store(next)
	return full
}

// cqTailFlush is the tail size at which the writer writes it out.
const cqTailFlush = 256 * cqEntrySize

// flushTail writes the tail to the files. Readers keep reading the tail
// from memory until the write is done.
func (s *Store) flushTail(c *consumeQueue) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.RLock()
	from, dropped := c.tailFrom, c.dropped
	c.flushBuf = append(c.flushBuf[:0], c.tail...)
	c.mu.RUnlock()
	if dropped || len(c.flushBuf) == 0 {
		return nil
	}
	if err := s.writeEntries(c, from, c.flushBuf); err != nil {
		return err
	}
	c.mu.Lock()
	n := copy(c.tail, c.tail[len(c.flushBuf):])
	c.tail = c.tail[:n]
	c.tailFrom += int64(len(c.flushBuf) / cqEntrySize)
	c.mu.Unlock()
	if cap(c.flushBuf) > 4*cqTailFlush {
		c.flushBuf = nil
	}
	return nil
}

// readEntries reads n entries from queue offset from into dst.
func (c *consumeQueue) readEntries(from int64, n int, dst []byte) ([]byte, error) {
	dst = dst[:0]
	c.mu.RLock()
	defer c.mu.RUnlock()
	for n > 0 {
		if from >= c.tailFrom {
			i := (from - c.tailFrom) * cqEntrySize
			if i >= int64(len(c.tail)) {
				return dst, fmt.Errorf("commitlog: read consume queue %s at %d past its end: %w", c.q, from, store.ErrOffsetOutOfRange)
			}
			k := min(int64(n)*cqEntrySize, int64(len(c.tail))-i)
			dst = append(dst, c.tail[i:i+k]...)
			n -= int(k / cqEntrySize)
			from += k / cqEntrySize
			continue
		}
		i := c.fileIndex(from)
		if i < 0 {
			return dst, errRemoved
		}
		f := c.files[i]
		k := int(min(int64(n), f.base+c.perFile-from, c.tailFrom-from))
		s := len(dst)
		dst = append(dst, make([]byte, k*cqEntrySize)...)
		m, err := f.f.ReadAt(dst[s:], (from-f.base)*cqEntrySize)
		if err != nil && !(errors.Is(err, io.EOF) && m == k*cqEntrySize) {
			return dst[:s], fmt.Errorf("commitlog: read consume queue %s file %s: %w", c.q, filepath.Base(f.path), err)
		}
		n -= k
		from += int64(k)
	}
	return dst, nil
}

// entry reads one entry.
func (c *consumeQueue) entry(off int64) (phys int64, size int32, tagsCode int64, err error) {
	var b [cqEntrySize]byte
	if _, err := c.readEntries(off, 1, b[:0]); err != nil {
		return 0, 0, 0, err
	}
	phys, size, tagsCode = getEntry(b[:])
	return phys, size, tagsCode, nil
}

// firstAtOrAbove returns the first offset in [lo, hi) whose entry points at
// or above phys, or hi. Entries grow with the offset.
func (c *consumeQueue) firstAtOrAbove(lo, hi, phys int64) (int64, error) {
	var ferr error
	i := sort.Search(int(hi-lo), func(i int) bool {
		p, size, _, err := c.entry(lo + int64(i))
		if err != nil {
			if ferr == nil && !errors.Is(err, errRemoved) {
				ferr = err
			}
			return false
		}
		// Fillers (size 0, scan.go) point at the next record of their
		// queue, so the entries keep growing with the offset.
		return (size > 0 || p > 0) && p >= phys
	})
	return lo + int64(i), ferr
}

func (c *consumeQueue) closeFiles() {
	c.mu.Lock()
	for _, f := range c.files {
		f.f.Close()
	}
	c.mu.Unlock()
}
