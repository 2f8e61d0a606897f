package crashfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// envServe, when set in a test binary's environment, turns the process
// into a crashfs server (see ServeIfChild): "backing\nshadow\nmount".
const envServe = "QUIVER_CRASHFS_SERVE"

// ServeIfChild must be the first thing in TestMain of a package that uses
// Mount: in the child process Mount starts (the test binary itself), it
// serves the file system and exits; elsewhere it returns at once.
//
// The file system runs in its own process because a process that both
// serves a FUSE mount and maps a file on it can deadlock: a page fault on
// the map blocks a thread the Go scheduler thinks is running.
func ServeIfChild() {
	spec := os.Getenv(envServe)
	if spec == "" {
		return
	}
	if err := serve(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// serve mounts the file system and answers commands, one per line on in:
//
//	crash OUT   freeze, write the durable state to the directory OUT
//	arm N       cut the power at the N-th fsync from mount (it fails)
//	stats       print the counters
//	quit        unmount and exit
//
// Each answer is one line, "ok ..." or "err ...".
func serve(spec string, in io.Reader, out io.Writer) error {
	parts := strings.Split(spec, "\n")
	if len(parts) != 3 {
		return fmt.Errorf("crashfs: bad %s %q", envServe, spec)
	}
	backing, shadow, mnt := parts[0], parts[1], parts[2]
	t, err := newTracker(backing, shadow)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return fmt.Errorf("crashfs: stat %s: %w", backing, err)
	}
	lr := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	// NewNode is deprecated in favour of NodeWrapChilder, but the loopback
	// nodes it creates are what the tracker hooks; it works in v2.12.
	//lint:ignore SA1019 see above
	lr.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder { //nolint:staticcheck // SA1019, see above
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, t: t}
	}
	//lint:ignore SA1019 see above
	root := lr.NewNode(lr, nil, "", &st) //nolint:staticcheck // SA1019, see above
	lr.RootNode = root
	zero := time.Duration(0)
	srv, err := fs.Mount(mnt, root, &fs.Options{
		// No attribute or entry caching: every lookup reaches the tracker's
		// view of the backing directory.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName: "crashfs", Name: "crashfs",
			DirectMountStrict: true, // root, no fusermount
			MaxWrite:          1 << 20,
		},
	})
	if err != nil {
		return fmt.Errorf("crashfs: mount %s: %w", mnt, err)
	}
	unmount := func() {
		if err := srv.Unmount(); err != nil {
			// Files still open (a killed process's are closed; an
			// abandoned store's may not be): detach, and exiting closes
			// /dev/fuse, which aborts the connection.
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}
	fmt.Fprintln(out, "ok ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "crash":
			s, err := t.crash(arg)
			if err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			fmt.Fprintf(out, "ok %d %d %d %d\n", s.FileSyncs, s.DirSyncs, s.Writes, s.Refused)
		case "arm":
			var n int64
			if _, err := fmt.Sscan(arg, &n); err != nil || n < 1 {
				fmt.Fprintf(out, "err arm %q\n", arg)
				continue
			}
			t.mu.Lock()
			t.armAt = n
			t.mu.Unlock()
			fmt.Fprintln(out, "ok")
		case "stats":
			t.mu.Lock()
			s := t.stats
			frozen := t.frozen
			t.mu.Unlock()
			fmt.Fprintf(out, "ok %d %d %d %d %t\n", s.FileSyncs, s.DirSyncs, s.Writes, s.Refused, frozen)
		case "quit":
			unmount()
			fmt.Fprintln(out, "ok bye")
			return nil
		default:
			fmt.Fprintf(out, "err unknown command %q\n", cmd)
		}
	}
	unmount() // the parent went away
	return nil
}
