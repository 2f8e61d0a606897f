package commitlog

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/quivermq/quiver/core/store"
)

var _ store.Truncater = Provider{}

// TruncateLog implements store.Truncater on the closed store's files.
func (Provider) TruncateLog(ctx context.Context, cfg any, deps store.Deps, offset int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c, err := store.ConfigOf(ID, cfg, NewConfig)
	if err != nil {
		return false, err
	}
	return TruncateDir(deps.Settings.Dir, int64(c.SegmentSize), offset)
}

// TruncateDir cuts the commit log of the closed store in dir (segments of
// segSize bytes) at offset, a record boundary: the segment holding offset
// is zeroed from there on, later segments are removed, and the checkpoint
// is lowered to offset, so that the next Open's recovery (which trusts
// consume-queue entries only below the checkpoint and rebuilds the rest,
// and the key index, from the log) drops every consume-queue and index
// entry at or above offset and ends the log there. A log ending at or
// below offset is left alone; it reports whether anything was cut. The
// directory must not be open (Open holds its lock).
func TruncateDir(dir string, segSize, offset int64) (bool, error) {
	if segSize < minSegmentSize || offset < 0 {
		return false, fmt.Errorf("commitlog: truncate at %d with segment_size %d: %w", offset, segSize, store.ErrBadArgument)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	clDir := filepath.Join(dir, "commitlog")
	ents, err := os.ReadDir(clDir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("commitlog: truncate: list segments: %w", err)
	}
	var bases []int64
	for _, e := range ents {
		if base, ok := parseOffsetName(e.Name()); ok && !e.IsDir() {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) == 0 {
		return false, nil
	}
	if offset < bases[0] {
		return false, fmt.Errorf("commitlog: truncate at %d: the log starts at %d: %w", offset, bases[0], store.ErrOffsetOutOfRange)
	}
	cut := false
	// Later segments go, newest first (a crash leaves a contiguous log).
	for i := len(bases) - 1; i >= 0 && bases[i] > offset; i-- {
		if err := os.Remove(filepath.Join(clDir, segmentName(bases[i]))); err != nil {
			return cut, fmt.Errorf("commitlog: truncate: remove segment %s: %w", segmentName(bases[i]), err)
		}
		bases = bases[:i]
		cut = true
	}
	base := offset - offset%segSize
	if len(bases) > 0 && bases[len(bases)-1] == base {
		zeroed, err := zeroFrom(filepath.Join(clDir, segmentName(base)), offset-base, segSize)
		if err != nil {
			return cut, err
		}
		cut = cut || zeroed
	}
	if err := syncDir(clDir); err != nil {
		return cut, fmt.Errorf("commitlog: truncate: %w", err)
	}
	if err := lowerCheckpoint(filepath.Join(dir, checkpointName), offset); err != nil {
		return cut, err
	}
	return cut, nil
}

// zeroFrom clears a segment file from pos to its end (as a never-written
// tail) and reports whether anything but zeros was there.
func zeroFrom(path string, pos, segSize int64) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("commitlog: truncate: %w", err)
	}
	defer f.Close()
	var head [8]byte
	n, err := f.ReadAt(head[:], pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("commitlog: truncate: read %s: %w", path, err)
	}
	written := false
	for _, b := range head[:n] {
		written = written || b != 0
	}
	if !written {
		return false, nil
	}
	if err := f.Truncate(pos); err != nil {
		return false, fmt.Errorf("commitlog: truncate %s: %w", path, err)
	}
	if err := f.Truncate(segSize); err != nil {
		return false, fmt.Errorf("commitlog: truncate %s: %w", path, err)
	}
	if err := fdatasync(f); err != nil {
		return false, fmt.Errorf("commitlog: truncate: sync %s: %w", path, err)
	}
	return true, nil
}

// lowerCheckpoint makes the checkpoint at most offset (keeping its
// reserved bytes); a missing or damaged one is left alone (recovery then
// starts from the last segment, which holds offset).
func lowerCheckpoint(path string, offset int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("commitlog: truncate: checkpoint: %w", err)
	}
	defer f.Close()
	var b [checkpointSize]byte
	if n, _ := f.ReadAt(b[:], 0); n < checkpointSize || crc32.ChecksumIEEE(b[:16]) != be.Uint32(b[16:]) {
		return nil
	}
	if int64(be.Uint64(b[:])) <= offset {
		return nil
	}
	be.PutUint64(b[:], uint64(offset))
	be.PutUint32(b[16:], crc32.ChecksumIEEE(b[:16]))
	if _, err := f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("commitlog: truncate: write checkpoint: %w", err)
	}
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("commitlog: truncate: sync checkpoint: %w", err)
	}
	return nil
}
