package crashfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node that reports to the tracker: creations, writes,
// size changes and fsyncs; after the crash it refuses every mutation.
type node struct {
	fs.LoopbackNode
	t *tracker
}

// file wraps a loopback file without its PassthroughFd, so that the
// kernel sends every write through the file system (FUSE passthrough
// would write to the backing file directly, unseen).
type file struct {
	lf *fs.LoopbackFile
}

func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// ino is the backing inode number (the root's FUSE inode is 1, not the
// backing one).
func (n *node) ino() uint64 {
	if n.IsRoot() {
		return n.t.root.ino
	}
	return n.StableAttr().Ino
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.FileReader         = (*file)(nil)
	_ fs.FileWriter         = (*file)(nil)
	_ fs.FileReleaser       = (*file)(nil)
	_ fs.FileFlusher        = (*file)(nil)
	_ fs.FileGetattrer      = (*file)(nil)
	_ fs.FileSetattrer      = (*file)(nil)
	_ fs.FileLseeker        = (*file)(nil)
	_ fs.FileAllocater      = (*file)(nil)
	_ fs.FileFsyncer        = (*file)(nil)
)

// OpendirHandle is shadowed with another signature so that node does not
// implement fs.NodeOpendirHandler: the loopback directory handle answers
// fsyncdir itself, and directory fsyncs must reach node.Fsync.
func (n *node) OpendirHandle() {}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.t.enter(); e != 0 {
		return nil, nil, 0, e
	}
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return in, fh, ff, errno
	}
	n.t.created(in.StableAttr().Ino)
	return in, wrap(fh), ff, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0 {
		if e := n.t.enter(); e != 0 {
			return nil, 0, e
		}
	}
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return fh, ff, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		n.t.wrote(n.ino(), 0, 1) // size changed: the next fsync records it
	}
	return wrap(fh), ff, 0
}

func wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &file{lf: lf}
	}
	return fh
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.t.enter(); e != 0 {
		return nil, e
	}
	in, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.t.created(in.StableAttr().Ino)
	}
	return in, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.t.enter(); e != 0 {
		return nil, e
	}
	in, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.t.created(in.StableAttr().Ino)
	}
	return in, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.t.enter(); e != 0 {
		return nil, e
	}
	in, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno == 0 {
		n.t.created(in.StableAttr().Ino)
	}
	return in, errno
}

// Link is refused: the tracker keeps one name per file.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.t.enter(); e != 0 {
		return e
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.t.enter(); e != 0 {
		return e
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.t.enter(); e != 0 {
		return e
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.t.enter(); e != 0 {
		return e
	}
	if w, ok := f.(*file); ok {
		f = w.lf
	}
	if errno := n.LoopbackNode.Setattr(ctx, f, in, out); errno != 0 {
		return errno
	}
	if sz, ok := in.GetSize(); ok {
		// A size change: mark the tail dirty so the next fsync copies
		// the new size (and any shrink) into the shadow.
		n.t.wrote(n.ino(), int64(sz), 1)
	}
	return 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if w, ok := f.(*file); ok {
		f = w.lf
	}
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := n.t.enter(); e != 0 {
		return 0, e
	}
	w, ok := f.(*file)
	if !ok {
		return 0, syscall.EBADF
	}
	nw, errno := w.lf.Write(ctx, data, off)
	n.t.wrote(n.ino(), off, int64(nw))
	return nw, errno
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	if e := n.t.enter(); e != 0 {
		return e
	}
	w, ok := f.(*file)
	if !ok {
		return syscall.EBADF
	}
	errno := w.lf.Allocate(ctx, off, size, mode)
	if errno == 0 {
		n.t.wrote(n.ino(), int64(off), int64(size))
	}
	return errno
}

// CopyFileRange is not offered: the kernel falls back to reads and writes,
// which the tracker sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Fsync handles fsync and fdatasync of files and fsync of directories.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		return n.t.syncDir(n.ino(), n.backingPath())
	}
	w, ok := f.(*file)
	if !ok {
		return syscall.EBADF
	}
	fd, _ := w.lf.PassthroughFd()
	return n.t.syncFile(n.ino(), fd)
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

// Write is reached only through node.Write.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return f.lf.Write(ctx, data, off)
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }
func (f *file) Flush(ctx context.Context) syscall.Errno   { return f.lf.Flush(ctx) }
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

// Fsync is reached only through node.Fsync.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno { return 0 }
