package crashfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// key names one file or directory for its whole life: the backing inode
// number plus a generation bumped whenever the file system creates
// something (so an inode number the backing file system reuses after an
// unlink is a different key).
type key struct{ ino, gen uint64 }

// dentry is one durable directory entry.
type dentry struct {
	k    key
	mode uint32 // S_IFMT bits and permissions
	link string // symlink target
}

// span is a written byte range [off, end).
type span struct{ off, end int64 }

// tracker holds what is durable: for each directory the entries it had at
// its last fsync, for each file a shadow copy of its contents at its last
// fsync, and the byte ranges written since.
type tracker struct {
	backing, shadow string

	mu     sync.Mutex
	frozen bool
	armAt  int64 // freeze at this fsync (file or directory), 0: never
	root   key
	gen    map[uint64]uint64         // backing ino -> current generation
	next   uint64                    // last generation handed out
	dirs   map[key]map[string]dentry // durable entries per directory
	dirty  map[key][]span            // written since the file's last fsync
	synced map[key]bool              // has a shadow copy
	stats  Stats
}

// Stats counts what the file system saw.
type Stats struct {
	FileSyncs, DirSyncs, Writes int64
	// Refused counts operations refused (EIO) after the crash.
	Refused int64
	// Frozen says the power is off (Crash, or an armed fsync reached).
	Frozen bool
}

func newTracker(backing, shadow string) (*tracker, error) {
	t := &tracker{
		backing: backing, shadow: shadow,
		gen: map[uint64]uint64{}, dirs: map[key]map[string]dentry{},
		dirty: map[key][]span{}, synced: map[key]bool{},
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(backing, &st); err != nil {
		return nil, fmt.Errorf("crashfs: stat %s: %w", backing, err)
	}
	t.root = key{st.Ino, 0}
	// Whatever is in the backing directory at mount time is durable.
	if err := t.adopt(backing, t.root); err != nil {
		return nil, err
	}
	return t, nil
}

// adopt records dir (whose key is k) and everything under it as durable.
func (t *tracker) adopt(dir string, k key) error {
	ents, err := t.list(dir)
	if err != nil {
		return err
	}
	t.dirs[k] = ents
	for name, e := range ents {
		p := filepath.Join(dir, name)
		switch e.mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			if err := t.adopt(p, e.k); err != nil {
				return err
			}
		case syscall.S_IFREG:
			if err := copySparse(p, t.shadowPath(e.k)); err != nil {
				return err
			}
			t.synced[e.k] = true
		}
	}
	return nil
}

// list reads the backing directory dir as durable entries (with the
// current generations). Called with mu held or before serving.
func (t *tracker) list(dir string) (map[string]dentry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crashfs: list %s: %w", dir, err)
	}
	out := make(map[string]dentry, len(des))
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			return nil, fmt.Errorf("crashfs: stat %s: %w", p, err)
		}
		e := dentry{k: key{st.Ino, t.gen[st.Ino]}, mode: st.Mode}
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			e.link, _ = os.Readlink(p)
		}
		out[de.Name()] = e
	}
	return out, nil
}

func (t *tracker) shadowPath(k key) string {
	return filepath.Join(t.shadow, strconv.FormatUint(k.ino, 10)+"-"+strconv.FormatUint(k.gen, 10))
}

// created gives the backing inode ino a new generation: something new
// was created there.
func (t *tracker) created(ino uint64) {
	t.mu.Lock()
	t.next++
	t.gen[ino] = t.next
	t.mu.Unlock()
}

func (t *tracker) keyOf(ino uint64) key { return key{ino, t.gen[ino]} }

// enter refuses a mutation after the crash.
func (t *tracker) enter() syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.frozen {
		t.stats.Refused++
		return syscall.EIO
	}
	return 0
}

// wrote records that [off, off+n) of inode ino changed.
func (t *tracker) wrote(ino uint64, off, n int64) {
	if n <= 0 {
		return
	}
	t.mu.Lock()
	k := t.keyOf(ino)
	t.stats.Writes++
	t.dirty[k] = addSpan(t.dirty[k], span{off, off + n})
	t.mu.Unlock()
}

// addSpan adds s to a list of spans, merging with the last one when they
// touch (appends, the common case, stay one span).
func addSpan(l []span, s span) []span {
	if n := len(l); n > 0 && s.off <= l[n-1].end && s.end >= l[n-1].off {
		l[n-1].off = min(l[n-1].off, s.off)
		l[n-1].end = max(l[n-1].end, s.end)
		return l
	}
	if len(l) > 4096 {
		// Too many ranges: collapse them into one covering span.
		lo, hi := s.off, s.end
		for _, x := range l {
			lo, hi = min(lo, x.off), max(hi, x.end)
		}
		return []span{{lo, hi}}
	}
	return append(l, s)
}

// syncPoint counts an fsync and says whether the power goes off at it
// (the fsync then fails and does nothing). Called with mu held.
func (t *tracker) syncPoint() bool {
	if t.frozen {
		t.stats.Refused++
		return true
	}
	n := t.stats.FileSyncs + t.stats.DirSyncs + 1
	if t.armAt > 0 && n >= t.armAt {
		t.frozen = true
		t.stats.Refused++
		return true
	}
	return false
}

// syncFile makes the contents of the file open as fd (inode ino) durable:
// the ranges written since the last fsync are copied to its shadow and the
// shadow takes the file's size.
func (t *tracker) syncFile(ino uint64, fd int) syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.syncPoint() {
		return syscall.EIO
	}
	t.stats.FileSyncs++
	k := t.keyOf(ino)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return errnoOf(err)
	}
	// The handle may be write-only (O_WRONLY|O_APPEND): read the synced
	// ranges through a read-only reopen of the same file (by its
	// descriptor, so an unlinked file works too).
	rf, err := os.Open("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return errnoOf(err)
	}
	defer rf.Close()
	fd = int(rf.Fd())
	sh, err := os.OpenFile(t.shadowPath(k), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return errnoOf(err)
	}
	defer sh.Close()
	buf := make([]byte, 1<<20)
	for _, s := range t.dirty[k] {
		for off := s.off; off < min(s.end, st.Size); {
			n := min(int64(len(buf)), min(s.end, st.Size)-off)
			r, err := syscall.Pread(fd, buf[:n], off)
			if err != nil {
				return errnoOf(err)
			}
			if r == 0 {
				break
			}
			if _, err := sh.WriteAt(buf[:r], off); err != nil {
				return errnoOf(err)
			}
			off += int64(r)
		}
	}
	if err := sh.Truncate(st.Size); err != nil {
		return errnoOf(err)
	}
	delete(t.dirty, k)
	t.synced[k] = true
	return 0
}

// syncDir makes the entries of the backing directory dir (inode ino)
// durable as they are now.
func (t *tracker) syncDir(ino uint64, dir string) syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.syncPoint() {
		return syscall.EIO
	}
	t.stats.DirSyncs++
	ents, err := t.list(dir)
	if err != nil {
		return errnoOf(err)
	}
	k := t.keyOf(ino)
	if ino == t.root.ino {
		k = t.root
	}
	t.dirs[k] = ents
	return 0
}

// crash freezes the file system (every later mutation fails with EIO) and
// writes its durable state, as a machine would find it after a power
// loss, to the empty directory out.
func (t *tracker) crash(out string) (Stats, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.frozen = true
	st := t.stats
	st.Frozen = true
	return st, t.build(t.root, out)
}

func (t *tracker) build(k key, dir string) error {
	ents := t.dirs[k]
	names := make([]string, 0, len(ents))
	for n := range ents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		e := ents[name]
		p := filepath.Join(dir, name)
		perm := os.FileMode(e.mode & 0o777)
		switch e.mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			if err := os.Mkdir(p, perm|0o700); err != nil {
				return fmt.Errorf("crashfs: image %s: %w", p, err)
			}
			if err := t.build(e.k, p); err != nil {
				return err
			}
		case syscall.S_IFREG:
			if t.synced[e.k] {
				if err := copySparse(t.shadowPath(e.k), p); err != nil {
					return err
				}
			} else if err := os.WriteFile(p, nil, perm); err != nil {
				// The entry is durable, the data never was: empty.
				return fmt.Errorf("crashfs: image %s: %w", p, err)
			}
		case syscall.S_IFLNK:
			if err := os.Symlink(e.link, p); err != nil {
				return fmt.Errorf("crashfs: image %s: %w", p, err)
			}
		}
	}
	return nil
}

// copySparse copies the regular file from to a new file to, keeping its
// holes: only the data extents (SEEK_DATA/SEEK_HOLE) are copied, so a
// 1 GiB sparse commit-log segment costs what it holds.
func copySparse(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("crashfs: copy %s: %w", from, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("crashfs: copy %s: %w", from, err)
	}
	dst, err := os.OpenFile(to, os.O_RDWR|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("crashfs: copy to %s: %w", to, err)
	}
	buf := make([]byte, 256<<10)
	size := fi.Size()
	for off := int64(0); off < size; {
		data, err := src.Seek(off, seekData)
		if err != nil {
			if errors.Is(err, syscall.ENXIO) {
				break // only a hole is left
			}
			dst.Close()
			return fmt.Errorf("crashfs: copy %s: %w", from, err)
		}
		hole, err := src.Seek(data, seekHole)
		if err != nil {
			dst.Close()
			return fmt.Errorf("crashfs: copy %s: %w", from, err)
		}
		for p := data; p < hole; {
			n, rerr := src.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			if n > 0 {
				if _, err := dst.WriteAt(buf[:n], p); err != nil {
					dst.Close()
					return fmt.Errorf("crashfs: copy to %s: %w", to, err)
				}
				p += int64(n)
			}
			if rerr != nil {
				if rerr == io.EOF {
					break
				}
				dst.Close()
				return fmt.Errorf("crashfs: copy %s: %w", from, rerr)
			}
		}
		off = hole
	}
	if err := dst.Truncate(size); err != nil {
		dst.Close()
		return fmt.Errorf("crashfs: copy to %s: %w", to, err)
	}
	return dst.Close()
}

// lseek whence values for data extents (Linux).
const (
	seekData = 3
	seekHole = 4
)

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
