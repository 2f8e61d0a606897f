package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/quivermq/quiver/core/store"
)

// errRemoved reports a read below the retained commit log (deleted by
// retention while a reader held its consume-queue entry).
var errRemoved = errors.New("commitlog: segment removed")

// segment is one commit-log file of segSize bytes starting at base.
type segment struct {
	base int64
	path string
	f    *os.File
	// lastTS is the store time of the segment's last message (0 if it has
	// none), used by retention.
	lastTS atomic.Int64
	// diskSize is the file size found on open (segSize unless the file
	// was cut short); recovery treats bytes past it as never written.
	diskSize int64
}

func (g *segment) name() string { return filepath.Base(g.path) }

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// createSegment creates the segment starting at base, sized segSize (a
// sparse file), and makes it the active one.
func (s *Store) createSegment(base int64) (*segment, error) {
	path := filepath.Join(s.clDir, segmentName(base))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("commitlog: create segment %s: %w", segmentName(base), err)
	}
	if err := f.Truncate(s.segSize); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("commitlog: size segment %s: %w", segmentName(base), err)
	}
	if err := syncDir(s.clDir); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("commitlog: create segment %s: %w", segmentName(base), err)
	}
	seg := &segment{base: base, path: path, f: f, diskSize: s.segSize}
	s.segMu.Lock()
	s.segs = append(s.segs, seg)
	s.segMu.Unlock()
	return seg, nil
}

// activeSegment returns the segment being written.
func (s *Store) activeSegment() *segment {
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	return s.segs[len(s.segs)-1]
}

// readAt reads len(p) bytes of the commit log at phys, which must not
// cross a segment end.
func (s *Store) readAt(phys int64, p []byte) error {
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	if len(s.segs) == 0 || phys < s.segs[0].base {
		return errRemoved
	}
	i := (phys - s.segs[0].base) / s.segSize
	if i >= int64(len(s.segs)) {
		return fmt.Errorf("commitlog: read at %d: %w", phys, store.ErrOffsetOutOfRange)
	}
	seg := s.segs[i]
	pos := phys - seg.base
	if pos+int64(len(p)) > s.segSize {
		return fmt.Errorf("commitlog: read of %d bytes at %d crosses the end of segment %s: %w", len(p), phys, seg.name(), store.ErrOffsetOutOfRange)
	}
	n, err := seg.f.ReadAt(p, pos)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(p)) {
		return fmt.Errorf("commitlog: read segment %s at %d: %w", seg.name(), pos, err)
	}
	return nil
}

// syncDir fsyncs a directory so new or removed entries are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
