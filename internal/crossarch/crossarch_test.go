//go:build linux && amd64

package crossarch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/platforms"
	"github.com/quivermq/quiver/internal/testserver"
)

// target is one linux edge platform (internal/platforms Edge, which
// internal/lint TestCrossCompile builds too) and how it runs here.
type target struct {
	name   string   // as TestCrossCompile names it
	goarch string   // GOARCH
	env    []string // GOARM, GOMIPS
	qemu   []string // qemu-user command and CPU; empty: run natively
	pebble bool     // Pebble runs here (pebblestore refuses it on MIPS)
	short  bool     // in make test's subset
}

// targets: the CPUs given to qemu are the weakest the build claims to
// run on, so an instruction the target lacks fails here: ARMv6 as on a
// Pi Zero (arm1176), MIPS without an FPU (24Kc, which softfloat needs).
// 386 runs natively on the x86-64 host (the kernel's 32-bit
// compatibility): qemu-i386 7.2 cannot run Go's 386 runtime at all (a
// hello world dies in runtime init, "bad g in signal handler" or
// SIGSEGV, with every CPU model). Big-endian MIPS runs with QUIC's UDP
// segmentation offload off: qemu-user passes the UDP_SEGMENT control
// message to the host kernel without byte-swapping it ("Unsupported
// ancillary data: 17/103" with -d unimp), so the host reads a 1,252-byte
// segment size as 58,372 and every large QUIC answer is lost (the
// consumer's pulls time out); mipsle, the same code little-endian, runs
// with it on, and a real MIPS kernel reads the value in its own byte
// order. The short subset is the arches whose
// packages TestCrossCompile's -short run already compiles (only the link
// is new), plus amd64 natively.
var emulation = map[string]target{
	"linux-amd64":            {pebble: true, short: true},
	"linux-arm64":            {qemu: []string{"qemu-aarch64"}, pebble: true, short: true},
	"linux-arm-7":            {qemu: []string{"qemu-arm", "-cpu", "cortex-a7"}, pebble: true, short: true},
	"linux-arm-6":            {qemu: []string{"qemu-arm", "-cpu", "arm1176"}, pebble: true},
	"linux-386":              {pebble: true}, // natively, see above
	"linux-riscv64":          {qemu: []string{"qemu-riscv64"}, pebble: true},
	"linux-mips-softfloat":   {qemu: []string{"qemu-mips", "-cpu", "24Kc", "-E", "QUIC_GO_DISABLE_GSO=true"}, short: true},
	"linux-mipsle-softfloat": {qemu: []string{"qemu-mipsel", "-cpu", "24Kc"}},
}

// targets are the linux platforms of platforms.Edge, amd64 first (the
// host's own build), each with its emulation; TestTargetsAreTheEdgeTargets
// fails when a platform has none or an emulation names no platform.
var targets = func() []target {
	var out []target
	for _, p := range platforms.Edge {
		e, ok := emulation[p.Name()]
		if p.GOOS != "linux" || !ok {
			continue
		}
		e.name, e.goarch = p.Name(), p.GOARCH
		if p.Env != "" {
			e.env = []string{p.Env}
		}
		out = append(out, e)
	}
	return out
}()

// pebbleProfile writes config.edge.yaml with its commit-log block
// replaced by its commented Pebble block, as the file's comment tells a
// user to, and returns the new file's path.
func pebbleProfile(t *testing.T, edge string) string {
	t.Helper()
	b, err := os.ReadFile(edge)
	require.NoError(t, err)
	var out []string
	inCommitlog, inPebble, found := false, false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "  engine: commitlog"):
			continue
		case strings.HasPrefix(line, "  commitlog:"):
			inCommitlog = true
			continue
		case inCommitlog && strings.HasPrefix(line, "    "):
			continue
		case strings.HasPrefix(line, "  #   engine: pebble"):
			inPebble, found = true, true
		case inPebble && !strings.HasPrefix(line, "  #   "):
			inPebble = false
		}
		inCommitlog = false
		if inPebble {
			line = "  " + strings.TrimPrefix(line, "  #   ")
		}
		out = append(out, line)
	}
	require.True(t, found, "%s has no commented `engine: pebble` block", edge)
	p := filepath.Join(t.TempDir(), "config.edge.pebble.yaml")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o600))
	return p
}

// soakBuild is true in `make soak` (-tags soak): every target, longer load.
var soakBuild bool

// plan is what one mode runs.
type plan struct {
	all      bool          // every target, not only the short ones
	messages int           // sent and consumed per broker
	budget   time.Duration // per broker run, start to stop
}

// TestBrokerUnderEmulation runs the edge broker of each target under
// qemu-user with each engine the target runs through a produce/consume
// load from the host (see the package comment). QUIVER_CROSSARCH=short
// (make crossarch) runs the short subset with 3,000 messages a broker;
// full (or the soak build) every target with 30,000;
// QUIVER_CROSSARCH_TARGETS=name,... picks targets by name.
func TestBrokerUnderEmulation(t *testing.T) {
	mode := os.Getenv("QUIVER_CROSSARCH")
	if mode == "" && soakBuild {
		mode = "full"
	}
	var p plan
	switch mode {
	case "short":
		p = plan{messages: 3000, budget: 90 * time.Second}
	case "full":
		p = plan{all: true, messages: 30000, budget: 6 * time.Minute}
	case "":
		t.Skip("`make crossarch` runs it (QUIVER_CROSSARCH=short|full; make soak runs the full list)")
	default:
		t.Fatalf("QUIVER_CROSSARCH=%q: want short or full", mode)
	}
	var pick []string
	if s := os.Getenv("QUIVER_CROSSARCH_TARGETS"); s != "" {
		pick = strings.Split(s, ",")
	}
	root := moduleRoot(t)
	edge := filepath.Join(root, "config.edge.yaml")
	edgePebble := pebbleProfile(t, edge)
	bins := t.TempDir()
	// The host's name server (a central one, as a device's broker would
	// register with) is the native amd64 build.
	native := build(t, root, bins, targets[0])
	t.Run("edge-build", func(t *testing.T) {
		if pick != nil && !slices.Contains(pick, "edge-build") {
			t.Skip("not in QUIVER_CROSSARCH_TARGETS")
		}
		edgeBuild(t, root, bins, native, edge, p)
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			if pick != nil && !slices.Contains(pick, tg.name) || pick == nil && !p.all && !tg.short {
				t.Skip("not in this run's targets (QUIVER_CROSSARCH=full runs every one)")
			}
			if len(tg.qemu) > 0 {
				if _, err := exec.LookPath(tg.qemu[0]); err != nil {
					t.Skipf("%s not found (apt-get install qemu-user; .ci/run installs it): %v", tg.qemu[0], err)
				}
			}
			bin := native
			if tg.goarch != "amd64" {
				bin = build(t, root, bins, tg)
			}
			if len(tg.qemu) == 0 {
				out, err := exec.Command(bin, "version").CombinedOutput()
				switch {
				case errors.Is(err, syscall.ENOEXEC):
					// A kernel without the arch's personality (e.g. no
					// IA32 emulation for 386) cannot exec it at all.
					t.Skipf("this kernel does not run %s binaries natively: %v", tg.goarch, err)
				case err != nil:
					t.Fatalf("the %s binary started and failed: %v %s", tg.goarch, err, out)
				}
			}
			run := append(slices.Clone(tg.qemu), bin)
			t.Run("commitlog", func(t *testing.T) {
				loadBroker(t, native, run, edge, p)
			})
			t.Run("pebble", func(t *testing.T) {
				if !tg.pebble {
					refusedPebble(t, run, edgePebble, tg.goarch)
					return
				}
				loadBroker(t, native, run, edgePebble, p)
			})
		})
	}
}

// build cross-builds cmd/mq for tg as make release does (static,
// stripped, trimmed paths: the flags TestCrossCompile uses, so the build
// cache it filled is reused).
func build(t *testing.T, root, dir string, tg target, tags ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "mq-"+tg.name+strings.Join(tags, "-"))
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/mq")...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+tg.goarch), tg.env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=%s %v go build ./cmd/mq: %v\n%s", tg.goarch, tg.env, err, out)
	}
	t.Logf("%s: built in %v", tg.name, time.Since(start).Round(time.Second))
	return bin
}

// loadBroker starts a native name server and `mq broker --config
// profile` through run, sends p.messages of 1 KiB over TCP with at
// most 64 in flight while a consumer pulls them over QUIC, and checks
// that every one was acknowledged and consumed exactly once by offset,
// that the broker is still alive and ready and takes one more send, and
// that it stops cleanly on SIGTERM.
func loadBroker(t *testing.T, native string, run []string, profile string, p plan) {
	ctx, cancel := context.WithTimeout(context.Background(), p.budget)
	defer cancel()
	dir := t.TempDir()
	nsAddr := freeAddr(t)
	ns := startProc(t, "namesrv", dir, []string{native, "namesrv", "--set", "namesrv.listen=" + nsAddr, "--set", "transports=[tcp,quic]"})
	waitListening(t, ctx, ns, nsAddr)

	brokerAddr, metricsAddr := freeAddr(t), freeAddr(t)
	args := append(slices.Clone(run), "broker", "--config", profile,
		"--set", "broker.namesrv=["+nsAddr+"]",
		"--set", "broker.listen="+brokerAddr,
		"--set", "storage.dir="+filepath.Join(dir, "store"),
		"--set", "metrics.listen="+metricsAddr)
	start := time.Now()
	br := startProc(t, "broker", dir, args)
	waitReady(t, ctx, br, metricsAddr)
	t.Logf("broker ready in %v", time.Since(start).Round(100*time.Millisecond))

	var err error
	pc := newClient(t, "tcp://"+nsAddr)
	qc := newClient(t, "quic://"+nsAddr)
	topic := "CrossArch"
	// /readyz turns ready when the broker sent its registration; the name
	// server may take it a moment later.
	require.Eventually(t, func() bool {
		err = admin.New(pc).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "create topic %s: %v", topic, err)
	prod, err := producer.New(pc, "CROSSARCH_P", producer.WithSendTimeout(20*time.Second), producer.WithRetryTimesWhenSendAsyncFailed(0))
	require.NoError(t, err)
	defer prod.Shutdown(context.Background()) //nolint:errcheck // the test is over
	cons, err := consumer.NewPull(qc, "CROSSARCH_C")
	require.NoError(t, err)
	var qs []client.MessageQueue
	require.Eventually(t, func() bool {
		qs, err = cons.Queues(ctx, topic)
		return err == nil && len(qs) == 4
	}, 30*time.Second, 50*time.Millisecond, "route of %s over QUIC: %v", topic, err)

	// The consumer tails every queue while the producer sends.
	n := p.messages
	seen := make([]atomic.Int32, n)
	var consumed, foreign, pullErrs atomic.Int64
	var lastPullErr atomic.Value
	cctx, ccancel := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	for _, q := range qs {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var off int64
			for cctx.Err() == nil && consumed.Load() < int64(n) {
				pctx, pcancel := context.WithTimeout(cctx, 5*time.Second)
				res, err := cons.PullEach(pctx, q, consumer.All(), off, 128, func(m *client.MessageExt) {
					i, err := strconv.Atoi(string(bytes.TrimSpace(m.Body[:8])))
					if err != nil || i < 0 || i >= n {
						foreign.Add(1)
						return
					}
					seen[i].Add(1)
					consumed.Add(1)
				})
				pcancel()
				if err != nil && cctx.Err() == nil {
					pullErrs.Add(1)
					lastPullErr.Store(fmt.Errorf("pull %v at %d: %w", q, off, err))
				}
				if err != nil {
					continue
				}
				off = res.NextBeginOffset
			}
		}()
	}

	loadStart := time.Now()
	sem := make(chan struct{}, 64)
	var acked atomic.Int64
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var sendErrs []error
	for i := 0; i < n && ctx.Err() == nil; i++ {
		body := make([]byte, 1024)
		copy(body, fmt.Sprintf("%-8d", i))
		msg := client.NewMessage(topic, body)
		sem <- struct{}{}
		wg.Add(1)
		var send func(attempt int)
		send = func(attempt int) {
			err := prod.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) {
				if err != nil && attempt < 3 && ctx.Err() == nil {
					send(attempt + 1) // a busy answer is back-pressure, not a loss: send again
					return
				}
				defer func() { <-sem; wg.Done() }()
				if err != nil {
					errMu.Lock()
					sendErrs = append(sendErrs, err)
					errMu.Unlock()
					return
				}
				acked.Add(1)
			}, msg)
			if err != nil {
				errMu.Lock()
				sendErrs = append(sendErrs, err)
				errMu.Unlock()
				<-sem
				wg.Done()
			}
		}
		send(0)
	}
	wg.Wait()
	sent := time.Since(loadStart)
	for consumed.Load() < acked.Load() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond) // the consumer's progress, bounded by ctx
	}
	ccancel()
	cwg.Wait()
	t.Logf("%d sends acknowledged in %v (%.0f msg/s), %d consumed over QUIC in %v",
		acked.Load(), sent.Round(100*time.Millisecond), float64(acked.Load())/sent.Seconds(), consumed.Load(), time.Since(loadStart).Round(100*time.Millisecond))
	if pullErrs.Load() > 0 {
		t.Logf("%d pulls failed (each retried), the last: %v", pullErrs.Load(), lastPullErr.Load())
	}
	require.NoError(t, ctx.Err(), "the run took longer than its budget of %v", p.budget)
	require.Empty(t, sendErrs, "sends that failed after 3 retries")
	require.EqualValues(t, n, acked.Load(), "acknowledged sends")
	assert.Zero(t, foreign.Load(), "messages not sent by this run")
	var missing, dup []int
	for i := range seen {
		switch seen[i].Load() {
		case 0:
			missing = append(missing, i)
		case 1:
		default:
			dup = append(dup, i)
		}
	}
	assert.Empty(t, head(missing), "messages never consumed (first ones; %d in all)", len(missing))
	assert.Empty(t, head(dup), "messages consumed twice at their offsets (first ones; %d in all)", len(dup))

	// Alive and answering after the load.
	require.True(t, br.running(), "broker exited during the load:\n%s", br.tail())
	assert.NoError(t, getOK(ctx, "http://"+metricsAddr+"/readyz"), "broker /readyz after the load")
	_, err = prod.SendSync(ctx, client.NewMessage(topic, []byte("after the load")))
	assert.NoError(t, err, "a send after the load")
	code, err := br.stop(20 * time.Second)
	require.NoError(t, err, "broker stop:\n%s", br.tail())
	assert.Zero(t, code, "broker exit status after SIGTERM:\n%s", br.tail())
	for _, bad := range []string{"SIGBUS", "SIGSEGV", "panic:", "fatal error:", "level=ERROR"} {
		assert.NotContains(t, br.logs(), bad, "broker log")
	}
}

// edgeBuild checks the edge build (-tags nogrpc, docs/guide/edge.md):
// smaller than the full one, config.edge.yaml passes --check-config, a
// configuration that turns the gRPC endpoint on is refused with the
// reason, and its broker runs the load (natively; the emulated runs use
// the release build).
func edgeBuild(t *testing.T, root, dir, full, edge string, p plan) {
	bin := build(t, root, dir, targets[0], "nogrpc")
	fs, err := os.Stat(full)
	require.NoError(t, err)
	es, err := os.Stat(bin)
	require.NoError(t, err)
	t.Logf("linux/amd64 stripped: full %d bytes, nogrpc %d bytes", fs.Size(), es.Size())
	assert.Less(t, es.Size(), fs.Size()-(1<<20), "the nogrpc build should be at least 1 MiB smaller")
	check := func(sets ...string) (string, error) {
		args := []string{"broker", "--config", edge, "--check-config", "--set", "broker.namesrv=[127.0.0.1:9876]"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := check()
	assert.NoError(t, err, "config.edge.yaml --check-config on the nogrpc build:\n%s", out)
	out, err = check("grpc.enabled=true")
	assert.Error(t, err, "grpc.enabled=true accepted by the nogrpc build")
	assert.Contains(t, out, "grpc.enabled: this mq was built with -tags nogrpc")
	loadBroker(t, full, []string{bin}, edge, p)
}

// refusedPebble checks that the broker of an arch Pebble cannot run on
// refuses storage.engine: pebble at start with its reason (instead of
// dying of SIGBUS at the first compaction).
func refusedPebble(t *testing.T, run []string, profile, goarch string) {
	dir := t.TempDir()
	args := append(slices.Clone(run), "broker", "--config", profile,
		"--set", "broker.namesrv=["+freeAddr(t)+"]",
		"--set", "broker.listen="+freeAddr(t),
		"--set", "storage.dir="+filepath.Join(dir, "store"))
	br := startProc(t, "broker", dir, args)
	code, err := br.wait(60 * time.Second)
	require.NoError(t, err, "a broker with Pebble on %s kept running:\n%s", goarch, br.tail())
	assert.NotZero(t, code, "exit status")
	assert.Contains(t, br.logs(), "storage.engine pebble cannot run on GOARCH="+goarch, "the reason in the broker's output")
}

// newClient is a Quiver client of the name server at ns (its scheme picks
// the transport for brokers too).
func newClient(t *testing.T, ns string) *client.Client {
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer(transports.WithInsecureQUIC()), client.WithRequestTimeout(20*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func head(s []int) []int { return s[:min(len(s), 10)] }

// proc is a process the test started and owns.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}
	out  *testserver.Output
}

func startProc(t *testing.T, name, dir string, args []string) *proc {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out := &testserver.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { cmd.Wait(); close(p.done) }() //nolint:errcheck // the status is read from ProcessState
	t.Cleanup(func() {
		if p.running() {
			cmd.Process.Kill() //nolint:errcheck // already exiting is fine
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, p.tail())
		}
	})
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits up to d for the process to exit and returns its status.
func (p *proc) wait(d time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(d):
		return -1, fmt.Errorf("%s still running after %v", p.name, d)
	}
}

// stop sends SIGTERM and waits up to d.
func (p *proc) stop(d time.Duration) (int, error) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, fmt.Errorf("signal %s: %w", p.name, err)
	}
	return p.wait(d)
}

func (p *proc) logs() string { return p.out.String() }

func (p *proc) tail() string {
	lines := strings.Split(strings.TrimRight(p.logs(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// waitListening waits until addr accepts TCP connections.
func waitListening(t *testing.T, ctx context.Context, p *proc, addr string) {
	t.Helper()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		require.True(t, p.running(), "%s exited:\n%s", p.name, p.tail())
		require.NoError(t, ctx.Err(), "%s not listening on %s", p.name, addr)
		time.Sleep(50 * time.Millisecond) // polling a process that is starting
	}
}

// waitReady waits until the broker's /readyz answers 200 (registered with
// its name server, store open).
func waitReady(t *testing.T, ctx context.Context, p *proc, metrics string) {
	t.Helper()
	for {
		err := getOK(ctx, "http://"+metrics+"/readyz")
		if err == nil {
			return
		}
		require.True(t, p.running(), "%s exited:\n%s", p.name, p.tail())
		require.NoError(t, ctx.Err(), "%s not ready: %v", p.name, err)
		time.Sleep(100 * time.Millisecond) // polling a process that is starting
	}
}

func getOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// freeAddr is a loopback address free for both TCP and UDP (the broker's
// QUIC listener shares its port).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	t.Fatal("no free loopback port")
	return ""
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err, "go env GOMOD")
	return filepath.Dir(strings.TrimSpace(string(out)))
}
