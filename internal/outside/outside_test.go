package outside

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/transports"
)

// TestOutsideModule builds a server with an out-of-tree filter and an
// application from this module, as Quiver's users build theirs, then runs
// the application over QUIC against the server: every message sent is
// received by a plain subscription, and the SUFFIX subscription receives
// exactly the messages whose key ends with -eu. The application dials
// only quic:// (with transports: [tcp] on the server it fails to connect).
func TestOutsideModule(t *testing.T) {
	dir := t.TempDir()
	server, app := goBuild(t, dir, "./cmd/outsidemq"), goBuild(t, dir, "./cmd/quicapp")
	namesrv, broker := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "outside.yaml")
	writeFile(t, cfg, fmt.Sprintf(`transports: [tcp, quic]
namesrv:
  listen: %s
broker:
  listen: %s
storage:
  dir: %s
grpc:
  enabled: false
metrics:
  listen: ""
`, namesrv, broker, filepath.Join(dir, "store")))

	var logs lockedBuffer
	srv := exec.Command(server, "dev", "--config", cfg)
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatalf("start outsidemq: %v", err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }() //nolint:errcheck // the log says why it ended
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			srv.Process.Kill() //nolint:errcheck // it may have exited
			<-exited
			t.Errorf("outsidemq did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("outsidemq log:\n%s", logs.String())
		}
	})
	waitRouted(t, namesrv, broker, exited)

	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, app, "-namesrv", "quic://"+namesrv, "-topic", "OutsideOrders", "-n", fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("quicapp: %v\n%s", err, out)
	}
	var eu []string
	for i := 1; i < n; i += 2 {
		eu = append(eu, fmt.Sprintf("order-%d-eu", i))
	}
	slices.Sort(eu)
	for _, want := range []string{
		fmt.Sprintf("sent: %d", n),
		fmt.Sprintf("received all: %d", n),
		"received SUFFIX -eu: " + strings.Join(eu, " "),
	} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("quicapp output lacks %q:\n%s", want, out)
		}
	}
}

// goBuild builds pkg of this module with go build, as a user would.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// freeAddr returns a loopback host:port whose TCP and UDP ports were both
// free a moment ago (the broker serves QUIC on the TCP port's number).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, uerr := net.ListenPacket("udp", addr)
		l.Close() //nolint:errcheck // a probe
		if uerr == nil {
			u.Close() //nolint:errcheck // a probe
			return addr
		}
	}
	t.Fatal("no free TCP+UDP port on 127.0.0.1")
	return ""
}

// waitRouted polls the name server over TCP until the broker is routed.
func waitRouted(t *testing.T, namesrv, broker string, exited <-chan struct{}) {
	t.Helper()
	c, err := client.New(client.WithNameServers(namesrv), transports.WithDialer())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := admin.New(c).Route(ctx, "TBW102")
		cancel()
		if err == nil && r != nil && r.Data != nil && strings.Contains(fmt.Sprintf("%+v", *r.Data), broker) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %s not routed after 30 s: %v", broker, err)
		}
		select {
		case <-exited:
			t.Fatalf("outsidemq exited before serving")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer is an io.Writer the server's output goes to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
