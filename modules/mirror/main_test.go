package mirror_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/gob"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/modules/mirror"
)

// childEnv carries a mirror.Config (gob, base64) to a copy of the test binary
// that runs it as its own process (mirrorProc), to be killed with SIGKILL.
const childEnv = "QUIVER_MIRROR_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	goleak.VerifyTestMain(m,
		// quic-go's and the HTTP client's background workers.
		goleak.IgnoreTopFunction("github.com/quic-go/quic-go.(*Transport).listen"),
		goleak.IgnoreAnyFunction("github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic.(*Transport).listen"),
	)
}

// runChild runs a mirror until the process is killed.
func runChild(raw string) int {
	var cfg mirror.Config
	b, err := base64.StdEncoding.DecodeString(raw)
	if err == nil {
		err = gob.NewDecoder(bytes.NewReader(b)).Decode(&cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := mirror.New(&cfg, mirror.Deps{Dial: transports.Dialer(transports.WithInsecureQUIC()), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child mirror:", err)
		return 2
	}
	if err := s.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child start:", err)
		return 2
	}
	select {} // until SIGKILL
}

// mirrorProc is a mirror in its own process.
type mirrorProc struct {
	t    testing.TB
	cfg  []byte
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 1<<20 {
		l.b = l.b[len(l.b)-(1<<19):]
	}
	return len(p), nil
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func startMirrorProc(t testing.TB, links ...mirror.Link) *mirrorProc {
	t.Helper()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(mirror.Config{Links: links}); err != nil {
		t.Fatal(err)
	}
	p := &mirrorProc{t: t, cfg: []byte(base64.StdEncoding.EncodeToString(buf.Bytes())), logs: &lockedBuf{}}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("mirror process log:\n%s", p.logs.String())
		}
	})
	return p
}

func (p *mirrorProc) start() {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(p.cfg))
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start the mirror process: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// kill sends SIGKILL and reaps the process.
func (p *mirrorProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("the mirror process did not die")
	}
}
