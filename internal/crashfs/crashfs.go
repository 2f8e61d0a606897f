// Package crashfs is a FUSE file system for power-loss tests: a
// passthrough to a backing directory that remembers what was made durable
// the POSIX way — a file's contents at its last fsync or fdatasync, a
// directory's entries at its last fsync — and, on Crash, freezes (every
// later write, create, rename or fsync fails with EIO, as on a machine
// that lost power) and writes exactly that durable state to a new
// directory: what a machine would find after the power came back, if its
// disk kept nothing that was not synced (the strict model of Pebble's
// vfs.NewStrictMem). Whatever a test then opens on that directory must
// hold every write that was acknowledged as durable.
//
// It runs the real engines and a whole mq process unchanged (Pebble and
// the commit log through their normal files, the commit log's shared
// maps included: FUSE without direct_io carries writable shared maps, and
// their dirty pages reach the file system as writes). The file system is
// served by a child process (the test binary itself, see ServeIfChild).
//
// Needs root and /dev/fuse (CI runs as root); Mount skips the test where
// they are missing.
//
// Not modelled: data written but not synced that a real disk may still
// keep in part (the image keeps none of it), and hard links (refused).
package crashfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FS is a mounted crashfs.
type FS struct {
	// Dir is the mount point: run the code under test on it.
	Dir string

	t      testing.TB
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	done   bool
	answer chan string
}

// Available reports why crashfs cannot run here ("" if it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "crashfs needs root (FUSE mount)"
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return "crashfs needs /dev/fuse: " + err.Error()
	}
	f.Close()
	return ""
}

// Mount mounts a crashfs over the directory backing (whose contents at
// this moment count as durable) and returns it; the test is skipped if
// FUSE is unavailable. The file system is unmounted at the end of the
// test if the test did not call Close.
func Mount(t testing.TB, backing string) *FS {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	mnt := t.TempDir()
	shadow := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envServe+"="+backing+"\n"+shadow+"\n"+mnt)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("crashfs: %v", err)
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("crashfs: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("crashfs: start server: %v", err)
	}
	f := &FS{Dir: mnt, t: t, cmd: cmd, in: in, out: bufio.NewScanner(outR), answer: make(chan string, 1)}
	t.Cleanup(func() {
		if !f.done {
			f.in.Close()
			_ = f.cmd.Process.Kill()
			_ = f.cmd.Wait()
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	if got := f.read(); got != "ok ready" {
		t.Fatalf("crashfs: server did not start: %q", got)
	}
	return f
}

// read returns the server's next answer line, failing the test after a
// minute without one.
func (f *FS) read() string {
	go func() {
		if f.out.Scan() {
			f.answer <- f.out.Text()
		} else {
			f.answer <- "err server gone: " + fmt.Sprint(f.out.Err())
		}
	}()
	select {
	case s := <-f.answer:
		return s
	case <-time.After(time.Minute):
		f.t.Fatalf("crashfs: no answer from the server")
		return ""
	}
}

func (f *FS) call(cmd string) string {
	f.t.Helper()
	if _, err := fmt.Fprintln(f.in, cmd); err != nil {
		f.t.Fatalf("crashfs: %s: %v", cmd, err)
	}
	got := f.read()
	if !strings.HasPrefix(got, "ok") {
		f.t.Fatalf("crashfs: %s: %s", cmd, got)
	}
	return strings.TrimSpace(strings.TrimPrefix(got, "ok"))
}

// Crash cuts the power: from now on every mutation on the mount fails with
// EIO, and the returned new directory holds what was durable. The code
// under test should then be stopped (its errors are expected) and Close
// called; the image stays until the end of the test.
func (f *FS) Crash() (image string, st Stats) {
	f.t.Helper()
	image = f.t.TempDir()
	ans := f.call("crash " + image)
	fmt.Sscan(ans, &st.FileSyncs, &st.DirSyncs, &st.Writes, &st.Refused) //nolint:errcheck // the control answer is written by our own server; a short parse leaves zeros in the counters
	return image, st
}

// Stats returns the counters so far.
func (f *FS) Stats() Stats {
	f.t.Helper()
	var st Stats
	fmt.Sscan(f.call("stats"), &st.FileSyncs, &st.DirSyncs, &st.Writes, &st.Refused, &st.Frozen) //nolint:errcheck // the control answer is written by our own server; a short parse leaves zeros in the counters
	return st
}

// CrashAtSync arms the file system to lose power at the n-th fsync or
// fdatasync of a file or directory since the mount (counting from 1):
// that call fails with EIO and so does every mutation after it. Crash
// then writes the image of what was durable before it. Enumerating n over
// every sync a run makes crashes it between each file's fsync and its
// directory's.
func (f *FS) CrashAtSync(n int64) {
	f.t.Helper()
	f.call(fmt.Sprintf("arm %d", n))
}

// Close unmounts the file system and stops its server.
func (f *FS) Close() {
	f.t.Helper()
	if f.done {
		return
	}
	f.call("quit")
	f.done = true
	f.in.Close()
	if err := f.cmd.Wait(); err != nil {
		f.t.Errorf("crashfs: server: %v", err)
	}
	_ = syscall.Unmount(f.Dir, syscall.MNT_DETACH) // a no-op when unmounted
}

// CopyDir copies the directory tree from into the new directory to (for a
// test that wants to keep an image and mount over a copy of it).
func CopyDir(from, to string) error {
	return filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			return copySparse(p, dst)
		}
		return nil
	})
}
