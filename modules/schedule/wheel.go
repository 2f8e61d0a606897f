package schedule

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/durable"
)

// entry is one pending timer: its delivery time and where the held message
// is in the commit log. Entries order by (At, Offset).
type entry struct {
	At     int64 // epoch ms
	Offset int64 // commit-log offset of the held message
}

const entrySize = 16

func (e entry) less(o entry) bool {
	if e.At != o.At {
		return e.At < o.At
	}
	return e.Offset < o.Offset
}

func compareEntries(a, b entry) int {
	if c := cmp.Compare(a.At, b.At); c != 0 {
		return c
	}
	return cmp.Compare(a.Offset, b.Offset)
}

// wheel is a file-backed timing wheel: one append-only file of 16-byte
// entries per slot of slotMs milliseconds, named after the slot number
// (deliverMs / slotMs). Only the slots being delivered are held in memory
// (by the caller); the wheel itself keeps the sorted list of slot numbers
// that have a file and a few open append handles.
type wheel struct {
	dir    string
	slotMs int64
	slots  []int64 // sorted slot numbers with a file
	files  map[int64]*os.File
	dirty  map[int64]bool
	// newSlots says slot files were created since the last sync: their
	// directory entries need the directory fsynced.
	newSlots bool
	buf      [entrySize]byte
}

const maxOpenSlots = 64

func openWheel(dir string, slotMs int64) (*wheel, error) {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("schedule: wheel: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("schedule: wheel: %w", err)
	}
	w := &wheel{dir: dir, slotMs: slotMs, files: map[int64]*os.File{}, dirty: map[int64]bool{}}
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".slot")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		// A crash mid-append leaves a torn tail; cut it so later appends
		// stay aligned (the message is indexed again from the timer topic).
		if info, err := de.Info(); err == nil && info.Size()%entrySize != 0 {
			if err := os.Truncate(w.path(n), info.Size()-info.Size()%entrySize); err != nil {
				return nil, fmt.Errorf("schedule: wheel: %w", err)
			}
		}
		w.slots = append(w.slots, n)
	}
	slices.Sort(w.slots)
	return w, nil
}

func (w *wheel) slotOf(ms int64) int64 { return ms / w.slotMs }

func (w *wheel) slotStart(slot int64) int64 { return slot * w.slotMs }

func (w *wheel) path(slot int64) string {
	return filepath.Join(w.dir, strconv.FormatInt(slot, 10)+".slot")
}

// add appends e to its slot's file (not synced until sync).
func (w *wheel) add(e entry) error {
	slot := w.slotOf(e.At)
	f, ok := w.files[slot]
	if !ok {
		if len(w.files) >= maxOpenSlots {
			if err := w.sync(); err != nil {
				return err
			}
			for s, f := range w.files {
				f.Close()
				delete(w.files, s)
			}
		}
		var err error
		f, err = os.OpenFile(w.path(slot), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("schedule: wheel: %w", err)
		}
		w.files[slot] = f
		if i, found := slices.BinarySearch(w.slots, slot); !found {
			w.slots = slices.Insert(w.slots, i, slot)
			w.newSlots = true
		}
	}
	binary.BigEndian.PutUint64(w.buf[0:], uint64(e.At))
	binary.BigEndian.PutUint64(w.buf[8:], uint64(e.Offset))
	if _, err := f.Write(w.buf[:]); err != nil {
		return fmt.Errorf("schedule: wheel: append slot %d: %w", slot, err)
	}
	w.dirty[slot] = true
	return nil
}

// sync makes every append durable.
func (w *wheel) sync() error {
	var errs []error
	for slot := range w.dirty {
		if f, ok := w.files[slot]; ok {
			if err := f.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("schedule: wheel: sync slot %d: %w", slot, err))
				continue
			}
		}
		delete(w.dirty, slot)
	}
	if w.newSlots && len(errs) == 0 {
		// A synced append in a file whose directory entry is not durable
		// is lost with the file on a power loss.
		if err := durable.SyncDir(w.dir); err != nil {
			return fmt.Errorf("schedule: wheel: %w", err)
		}
		w.newSlots = false
	}
	return errors.Join(errs...)
}

// load reads a slot's entries sorted by (At, Offset), without duplicates
// (an entry indexed twice after a crash) and without entries before from.
func (w *wheel) load(slot int64, from entry) ([]entry, error) {
	f, err := os.Open(w.path(slot))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schedule: wheel: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("schedule: wheel: read slot %d: %w", slot, err)
	}
	n := len(b) / entrySize
	out := make([]entry, 0, n)
	for i := 0; i < n; i++ {
		e := entry{At: int64(binary.BigEndian.Uint64(b[i*entrySize:])), Offset: int64(binary.BigEndian.Uint64(b[i*entrySize+8:]))}
		if !e.less(from) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, compareEntries)
	return slices.Compact(out), nil
}

// next returns the first slot with a file after slot.
func (w *wheel) next(after int64) (int64, bool) {
	i, found := slices.BinarySearch(w.slots, after)
	if found {
		i++
	}
	if i < len(w.slots) {
		return w.slots[i], true
	}
	return 0, false
}

// remove deletes the files of every slot up to and including through.
func (w *wheel) remove(through int64) error {
	var errs []error
	i := 0
	for ; i < len(w.slots) && w.slots[i] <= through; i++ {
		slot := w.slots[i]
		if f, ok := w.files[slot]; ok {
			f.Close()
			delete(w.files, slot)
			delete(w.dirty, slot)
		}
		if err := os.Remove(w.path(slot)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("schedule: wheel: %w", err))
		}
	}
	w.slots = slices.Delete(w.slots, 0, i)
	return errors.Join(errs...)
}

// close syncs and closes the open files.
func (w *wheel) close() error {
	err := w.sync()
	for s, f := range w.files {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(w.files, s)
	}
	return err
}

// entryHeap is a min-heap of entries (container/heap).
type entryHeap []entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
