package commitlog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// The writer encodes records straight into a shared memory map of the
// active segment (RocketMQ's MappedFile): an Append costs a copy into the
// page cache and no syscall, and what it wrote is in the page cache — as
// durable against a process crash as a pwrite — before it returns. Pages
// are faulted in ahead of the writer with MADV_POPULATE_WRITE, one
// populateAhead at a time, so a full disk shows as an error from
// populate, before anything is written, rather than as SIGBUS on a store;
// the encoding runs with debug.SetPanicOnFault as a second line (kernels
// without MADV_POPULATE_WRITE). Readers keep using pread: the map and the
// file share the page cache. Pages the writer has left dropBehind behind
// are dropped from the map (MADV_DONTNEED), so the window costs the
// process a few MiB of resident memory rather than all of it. Records of
// pwriteMin bytes or more are pwritten into the mapped segment instead
// (the page cache is the same). In sync flush mode, where mapping fails,
// or off Linux, the writer uses one pwrite per run of records per
// segment per group write.
const (
	// mapWindow is how much of a segment is mapped at once.
	mapWindow = 64 << 20
	// populateAhead is how far ahead of the writer the populator faults
	// pages in (populator.go).
	populateAhead = 1 << 20
	// populateAheadOwn is what the writer populates itself when the
	// populator has not got there yet.
	populateAheadOwn = 64 << 10
	pageSize         = 4096
	// dropBehind is how far behind the writer the window's pages are
	// dropped from the process's page tables (MADV_DONTNEED), at most
	// once per dropBehind written. The page cache keeps them: readers
	// pread them, dirty ones are written back as before, and a write
	// there (after a cut) faults them in again. Without it every page the
	// writer passed stayed resident until the window moved: the whole
	// 16 MiB segment of the edge profile, 64 MiB with 1 GiB segments
	// (docs/lab/BENCHMARKS.md, "Edge profile").
	dropBehind = 1 << 20
	// pwriteMin is the record size from which the writer pwrites a
	// record instead of copying it into the map (Store.reserve). Measured
	// on this VM kind (2 GiB written in 64 KiB steps, pwrite and map
	// alternating into one sparse file): a pwrite costs 0.7-0.8 µs per
	// 4 KiB page of new page cache, populating the map's pages 1.05-9.4
	// µs per page (page-table updates, the slow end on memory the guest
	// has not touched lately) plus 0.3 µs to copy. Below a few pages the
	// pwrite's own system call is what a record would pay, so small
	// records keep the map.
	pwriteMin = 16 << 10
)

// errNoPageSpace is populate's EFAULT: a store there would raise SIGBUS.
// It wraps ENOSPC, the cause a caller matches (the broker answers a full
// disk SERVICE_NOT_AVAILABLE).
var errNoPageSpace = fmt.Errorf("no space behind the mapped pages (full disk?): %w", syscall.ENOSPC)

// writeMap is the writer's window on the active segment. Guarded by
// Store.mu.
type writeMap struct {
	seg   *segment
	off   int64  // file offset of b[0], page-aligned
	b     []byte // nil: nothing mapped
	pop   int64  // file offset below which the window's pages are populated
	drop  int64  // file offset below which the window's pages were dropped (dropBehind)
	noMap bool   // mapping failed once: use pwrite for good
	nopo  bool   // no MADV_POPULATE_WRITE: rely on faults
	gen   int64  // the window's populator generation
	asked int64  // file offset up to which the populator was asked
}

// room returns the n bytes of seg at pos to encode into, mapping and
// populating as needed. A nil slice and nil error mean: no map, use pwrite.
func (s *Store) room(seg *segment, pos, n int64) ([]byte, error) {
	w := &s.wmap
	if w.noMap || s.pop == nil {
		// Sync mode (no populator) writes with pwrite: fdatasync after stores through
		// the map slows down once the writer has moved through a large
		// part of the segment (a broker with flush=sync sent 1 KiB
		// one at a time at 3.3k msg/s fresh and 1.2k msg/s after an
		// 80 MB burst, against 3.4k with pwrite throughout;
		// docs/lab/BENCHMARKS.md), and the copy the map saves is small
		// next to an fdatasync.
		return nil, nil
	}
	if w.seg != seg || w.b == nil || pos < w.off || pos+n > w.off+int64(len(w.b)) {
		s.unmapWriter()
		off := pos &^ (pageSize - 1)
		size := min(s.segSize-off, max(mapWindow, pos+n-off))
		b, err := mapFile(seg.f, off, int(size))
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil, err
			}
			s.log.Warn("commitlog: cannot map the active segment, writing with pwrite", "segment", seg.name(), "err", err)
			w.noMap = true
			return nil, nil
		}
		w.seg, w.off, w.b, w.pop, w.asked, w.drop = seg, off, b, off, off, off
	}
	winEnd := w.off + int64(len(w.b))
	end := pos + n
	if end > w.pop && !w.nopo {
		w.pop = max(w.pop, min(s.pop.populated(w.gen), winEnd))
	}
	if end > w.pop && !w.nopo {
		from := max(w.pop, pos&^(pageSize-1))
		to := min(winEnd, (max(end, from+populateAheadOwn)+pageSize-1)&^(pageSize-1))
		if err := populate(w.b[from-w.off : to-w.off]); err != nil {
			if !errors.Is(err, errPopulateUnsupported) {
				return nil, fmt.Errorf("commitlog: write segment %s at %d: %w", seg.name(), pos, err)
			}
			w.nopo = true
		} else {
			w.pop = to
		}
	}
	if !w.nopo && w.pop < winEnd && w.pop-end < populateAhead/2 && w.asked < w.pop+populateAhead/2 {
		from := max(w.pop, w.asked)
		to := min(winEnd, from+populateAhead)
		if s.pop.ask(popJob{b: w.b, off: w.off, from: from, to: to, gen: w.gen}) {
			w.asked = to
		}
	}
	if to := (pos - dropBehind) &^ (pageSize - 1); to-w.drop >= dropBehind {
		// Best effort: a failure only leaves the pages resident.
		if err := release(w.b[w.drop-w.off : to-w.off]); err == nil {
			w.drop = to
		}
	}
	return w.b[pos-w.off : pos-w.off+n : pos-w.off+n], nil
}

// unmapWriter drops the writer's window (its pages stay in the page cache).
func (s *Store) unmapWriter() {
	w := &s.wmap
	if s.pop != nil {
		w.gen = s.pop.invalidate() // waits for a job on this window
	}
	if w.b != nil {
		unmapFile(w.b) //nolint:errcheck // munmap of our own mapping; nothing else to do if it fails
	}
	w.seg, w.b, w.off, w.pop, w.asked, w.drop = nil, nil, 0, 0, 0, 0
}

// forgetPopulated is called after seg was cut at pos: pages from there on
// are gone and must be populated again. Called with Store.mu held.
func (s *Store) forgetPopulated(seg *segment, pos int64) {
	if w := &s.wmap; w.seg == seg {
		w.pop = min(w.pop, max(w.off, pos&^(pageSize-1)))
		if s.pop != nil {
			w.gen = s.pop.invalidate()
		}
		w.asked = w.pop
		w.drop = min(w.drop, w.pop)
	}
}

// errFault is a fault (SIGBUS) while encoding into the map.
type errFault struct{ addr uintptr }

func (e errFault) Error() string {
	return fmt.Sprintf("fault at %#x writing the mapped segment (full disk or I/O error)", e.addr)
}

// faultError turns a recovered fault panic (debug.SetPanicOnFault) into
// an error and re-panics anything else.
func faultError(r any) error {
	fe, ok := r.(interface{ Addr() uintptr })
	if !ok {
		panic(r)
	}
	return errFault{fe.Addr()}
}
