package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// repoRoot walks up from the working directory to the directory whose
// go.mod declares the Quiver module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/quivermq/quiver\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("peers: no github.com/quivermq/quiver go.mod above the working directory")
		}
		dir = parent
	}
}

// build runs go build in dir (with the build tags, if any) and writes
// the binary to out.
func build(ctx context.Context, dir, out, pkg string, tags ...string) error {
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("peers: go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc is a child process stopped with SIGTERM (SIGKILL after a grace
// period). Children also get SIGKILL if the harness dies (Pdeathsig).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuf) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(l.b.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func startProc(name, dir, bin string, args ...string) (*proc, error) {
	return startProcEnv(name, dir, bin, nil, nil, args...)
}

// startProcEnv is startProc with env added to the harness's environment
// and the child's stderr copied to stderr too (when not nil; closed when
// the child exits).
func startProcEnv(name, dir, bin string, env []string, stderr io.WriteCloser, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	logs := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(logs, stderr)
	}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peers: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), logs: logs}
	go func() {
		_ = cmd.Wait() // the exit is seen through done (and the logs)
		if stderr != nil {
			stderr.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// waitTCP polls until addr accepts connections.
func waitTCP(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("peers: %s exited:\n%s", p.name, p.logs.tail(30))
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("peers: %s not listening on %s after %s:\n%s", p.name, addr, timeout, p.logs.tail(30))
}

// diskBench runs `mq bench disk --output json` in dir.
func diskBench(ctx context.Context, mq, dir string, size int64) (mbps, fsyncP50 float64, err error) {
	cmd := exec.CommandContext(ctx, mq, "bench", "disk", "--dir", dir, "--size", fmt.Sprint(size), "--output", "json")
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("peers: mq bench disk: %w", err)
	}
	var r struct {
		SeqWriteMBps   float64 `json:"seq_write_mb_per_sec"`
		FsyncP50Micros float64 `json:"fdatasync_p50_us"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, 0, fmt.Errorf("peers: mq bench disk output: %w", err)
	}
	return r.SeqWriteMBps, r.FsyncP50Micros, nil
}

// loopbackMBps pumps 1 MiB writes through a loopback TCP socket pair for
// d and returns the received MB/s: the raw ceiling every figure shares.
func loopbackMBps(d time.Duration) (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				got <- n
				return
			}
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	n := <-got
	return float64(n) / time.Since(start).Seconds() / 1e6, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// cpu is the process's user+system CPU time so far (Linux /proc; zero
// elsewhere), at clock-tick resolution.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// selfCPU is the harness's own CPU time (the clients).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syscalls is the process's read and write system calls so far
// (/proc/<pid>/io syscr + syscw; 0 where unreadable).
func (p *proc) syscalls() int64 { return procSyscalls(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid)) }

// selfSyscalls is the harness's own read and write system calls.
func selfSyscalls() int64 { return procSyscalls("/proc/self/io") }

func procSyscalls(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		var x int64
		fmt.Sscan(strings.TrimSpace(v), &x)
		n += x
	}
	return n
}
