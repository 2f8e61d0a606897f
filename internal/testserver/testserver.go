// Package testserver runs real Quiver processes for tests: it builds the mq
// binary from the tree once per test binary, starts `mq dev` (or any
// subcommand) on free loopback ports in a temporary directory, waits until
// the broker is registered with its name server, and stops, kills and
// restarts it on demand.
package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary returns the path of an mq binary built from this tree.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if b := os.Getenv("QUIVER_MQ_BINARY"); b != "" {
			buildBin = b // a prebuilt mq (scripts that run tests where go build cannot)
			return
		}
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildBin, buildErr = BinaryPath("mq")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/mq")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("testserver: go build ./cmd/mq: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// BinaryPath is where a test binary builds an executable it keeps for
// its whole run: name, in a directory of its own process id within one
// shared directory (the file keeps its name: guides run `mq` from PATH).
// The directories of test processes that have ended are removed first,
// so repeated test runs do not pile up a 50 MB binary each in the
// temporary directory (a test binary cannot remove its own at exit).
func BinaryPath(name string) (string, error) {
	base := filepath.Join(os.TempDir(), "quiver-test-bin")
	removeEndedBinaries(base)
	dir := filepath.Join(base, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("testserver: %w", err)
	}
	return filepath.Join(dir, name), nil
}

// removeEndedBinaries removes the directories in base named by the id of
// a process that is no longer running.
func removeEndedBinaries(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() || pid == os.Getpid() || running(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(base, e.Name())) // another process may have removed it first
	}
}

// running reports whether process pid exists (signal 0 checks without
// sending anything; a process of another user answers EPERM: running).
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("testserver: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("testserver: not inside the module")
	}
	return filepath.Dir(mod), nil
}

// FreePort returns a loopback port free for both TCP and UDP right now.
func FreePort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testserver: free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u.Close()
		return port
	}
	t.Fatal("testserver: no free port")
	return 0
}

// Options configure a process.
type Options struct {
	// Dir is the data directory; default a fresh t.TempDir().
	Dir string
	// Sets are extra --set key=value flags.
	Sets []string
	// Env is extra environment.
	Env []string
	// TLS starts `mq dev --tls`; readiness checks then dial with TLS.
	TLS bool
	// Sign, when set, signs readiness requests (servers with ACL on).
	Sign func(ext map[string]string, body []byte)
	// Binary runs this executable instead of mq built from the tree (a
	// custom build; it must take mq's dev arguments: dev --set k=v ...).
	Binary string
}

// Proc is a running mq dev process.
type Proc struct {
	t       testing.TB
	bin     string
	Dir     string
	Namesrv string // 127.0.0.1:port
	Broker  string
	opts    Options

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *Output
}

// StartDev starts `mq dev` on free ports and waits until it serves.
func StartDev(t testing.TB, opts Options) *Proc {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	bin := opts.Binary
	if bin == "" {
		bin = Binary(t)
	}
	p := &Proc{t: t, bin: bin, Dir: opts.Dir, opts: opts, logs: &Output{}}
	p.Namesrv = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p.Broker = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p.start()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("mq dev log tail:\n%s", p.LogTail(60))
		}
	})
	return p
}

func (p *Proc) start() {
	p.t.Helper()
	args := []string{"dev",
		"--set", "namesrv.listen=" + p.Namesrv,
		"--set", "broker.listen=" + p.Broker,
		"--set", "storage.dir=" + filepath.Join(p.Dir, "store"),
		"--set", "log.level=debug",
	}
	for _, s := range p.opts.Sets {
		args = append(args, "--set", s)
	}
	if p.opts.TLS {
		args = append(args, "--tls")
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.opts.Env...)
	cmd.Stdout = p.logs
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("testserver: start mq dev: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // reaping a process that was killed
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if err := p.WaitReady(30 * time.Second); err != nil {
		p.t.Fatalf("testserver: mq dev not ready: %v\n%s", err, p.LogTail(80))
	}
}

// WaitReady polls until the name server routes TBW102 to the broker.
func (p *Proc) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := remoting.NewClient(func(ctx context.Context, addr string) (transportConn, error) {
		cfg := tcp.NewConfig()
		if p.opts.TLS {
			cfg.TLS = tcp.TLSConfig{Enabled: true, InsecureSkipVerify: true}
		}
		return tcp.Dial(ctx, addr, cfg, 0)
	}, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("process exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
		if p.opts.Sign != nil {
			p.opts.Sign(req.ExtFields, req.Body)
		}
		resp, err := c.Invoke(ctx, p.Namesrv, req)
		cancel()
		switch {
		case err != nil:
			last = err
			c.CloseAddr(p.Namesrv)
		case resp.Code != remoting.Success:
			last = fmt.Errorf("route TBW102: code %d %s", resp.Code, resp.Remark)
		case !bytes.Contains(resp.Body, []byte(p.Broker)):
			last = fmt.Errorf("route TBW102 lacks broker %s: %s", p.Broker, resp.Body)
		default:
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("after %s: %v", timeout, last)
}

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after 20 s).
func (p *Proc) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // the process may have exited already
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill() //nolint:errcheck // the process may have exited already
		<-done
		p.t.Errorf("testserver: mq dev did not stop on SIGTERM within 20s")
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill() //nolint:errcheck // the process may have exited already
	<-done
}

// Restart starts the process again on the same ports and directory.
func (p *Proc) Restart() {
	p.t.Helper()
	p.Stop()
	p.start()
}

// Start starts a stopped or killed process again.
func (p *Proc) Start() {
	p.t.Helper()
	p.start()
}

// ExitCode reports the exit code of the last stopped process, -1 if running.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PID is the running process's id (0 when stopped).
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// RSS reads the process's resident set size from /proc (Linux), in bytes.
func (p *Proc) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("testserver: no VmRSS in /proc/%d/status", p.PID())
}

// Logs returns everything the process printed.
func (p *Proc) Logs() string { return p.logs.String() }

// LogTail returns the last n lines of the log.
func (p *Proc) LogTail(n int) string { return p.logs.Tail(n) }

// Output collects a child process's output for a test: safe to read
// while the process writes, and bounded (past 8 MiB the older half is
// dropped, so the tail stays).
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.b.Len() > 8<<20 {
		keep := append([]byte(nil), o.b.Bytes()[o.b.Len()/2:]...)
		o.b.Reset()
		o.b.Write(keep)
	}
	return o.b.Write(p)
}

// String returns everything kept.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Tail returns the last n lines.
func (o *Output) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(o.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
