//go:build linux

package mirror_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestMirrorLabCut is the cellular soak (skipped unless
// QUIVER_MIRROR_LAB=1; root, docs/lab/BENCHMARKS.md "Mirroring between
// clusters" has the command): an edge broker with config.edge.yaml in
// network namespace A mirrors a topic over QUIC to a central `mq dev` in
// namespace B through the lossy-link emulator (bench/lossy/linkemu,
// profile QUIVER_MIRROR_LAB_PROFILE, default cellular). The edge is
// deployed as on a device (docs/guide/edge.md): `mq broker`, running the
// link, with its name server as a separate `mq namesrv` process in A
// (QUIVER_MIRROR_LAB_EDGE=broker, the default), or one `mq dev` (name
// server, broker and console in one process: QUIVER_MIRROR_LAB_EDGE=dev).
// The mq binary is QUIVER_MQ_BINARY if set, else the edge build of the
// tree (labBinary): the edge profile's RSS bound is for that binary, most
// of whose pages are resident (a plain go build, 20 MB larger, peaked
// 10 MiB higher in this lab). A producer in A sends QUIVER_MIRROR_LAB_RATE (2,000) msg/s of
// 1 KiB; after QUIVER_MIRROR_LAB_WARM (10) s the link is cut both ways
// (every frame on the lab's wire dropped silently) for
// QUIVER_MIRROR_LAB_CUT (60) s, then restored while the producer goes on. It measures lost and duplicated acknowledged
// messages at the target, the catch-up rate (the backlog at the restore
// over the time to write it, against the incoming rate) and the edge
// broker process's peak RSS (VmHWM, sampled every 250 ms), and asserts 0
// lost, 0 duplicates, catch-up at least QUIVER_MIRROR_LAB_MIN_CATCHUP (5)
// times the incoming rate and peak RSS under QUIVER_MIRROR_LAB_RSS_MIB
// (48, the edge profile's bound, for `mq broker`; 64 for `mq dev`, which
// carries the name server and console too). QUIVER_MIRROR_LAB_CATCHUP picks
// the link's catch_up; the link must catch up within
// QUIVER_MIRROR_LAB_DRAIN (300) s of the restore. Namespaces are
// qmir<pid>a/b.
func TestMirrorLabCut(t *testing.T) {
	if os.Getenv("QUIVER_MIRROR_LAB") != "1" {
		t.Skip("the mirror's lossy-link soak: QUIVER_MIRROR_LAB=1 (root)")
	}
	// Asked for by the switch: a machine that cannot build the lab (not
	// root, no /dev/net/tun) fails the run rather than passing it unseen.
	if err := linkemu.Available(); err != nil {
		t.Fatalf("QUIVER_MIRROR_LAB=1 but the lossy-link lab is unavailable: %v", err)
	}
	profile := labEnv("QUIVER_MIRROR_LAB_PROFILE", "cellular")
	rate := labInt(t, "QUIVER_MIRROR_LAB_RATE", 2000)
	warm := time.Duration(labInt(t, "QUIVER_MIRROR_LAB_WARM", 10)) * time.Second
	cut := time.Duration(labInt(t, "QUIVER_MIRROR_LAB_CUT", 60)) * time.Second
	minCatchUp := float64(labInt(t, "QUIVER_MIRROR_LAB_MIN_CATCHUP", 5))
	edgeRole := labEnv("QUIVER_MIRROR_LAB_EDGE", "broker")
	rssDefault := map[string]int{"broker": 48, "dev": 64}[edgeRole]
	require.NotZero(t, rssDefault, "QUIVER_MIRROR_LAB_EDGE=%q: want broker or dev", edgeRole)
	rssBound := int64(labInt(t, "QUIVER_MIRROR_LAB_RSS_MIB", rssDefault)) << 20
	catchUp := labEnv("QUIVER_MIRROR_LAB_CATCHUP", "oldest_first")
	drain := time.Duration(labInt(t, "QUIVER_MIRROR_LAB_DRAIN", 300)) * time.Second
	p, err := linkemu.Lookup(profile)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("qmir%d", os.Getpid()%100000)
	lab, err := linkemu.Start(ctx, prefix, p, 45, nil)
	require.NoError(t, err)
	defer lab.Close()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := labBinary(t, root)

	centralNS := lab.AddrB + ":9876"
	central := labProc(ctx, t, lab.NsB, bin, "dev", "--set", "namesrv.listen="+centralNS, "--set", "broker.listen="+lab.AddrB+":10911",
		"--set", "broker.cluster=central", "--set", "broker.name=central-a", "--set", "storage.dir="+filepath.Join(t.TempDir(), "store"),
		"--set", "transports=[tcp, quic]", "--set", "storage.disk_max_used_ratio=0.97", "--set", "console.listen=", "--set", "metrics.listen=", "--set", "grpc.enabled=false", "--set", "log.level=warn")
	defer central.stop()
	link := fmt.Sprintf("mirror.links=[{name: lab, target: {namesrv: ['quic://%s'], cluster: central}, topics: [LabTopic], checkpoint_interval: 1s, max_backoff: 2s, catch_up: %s}]",
		centralNS, catchUp)
	edgeArgs := []string{"--config", filepath.Join(root, "config.edge.yaml"),
		"--set", "broker.listen=127.0.0.1:10911", "--set", "broker.cluster=edge", "--set", "broker.name=edge-a",
		"--set", "storage.dir=" + filepath.Join(t.TempDir(), "store"), "--set", "transport.quic.insecure_skip_verify=true",
		"--set", "metrics.listen=", "--set", "grpc.enabled=false", "--set", "log.level=warn", "--set", link,
		// A shared lab machine's disk may be fuller than the default 75%:
		// retention would delete what the link has not mirrored yet.
		"--set", "storage.disk_max_used_ratio=0.97"}
	var edge *labProcess
	if edgeRole == "dev" {
		edge = labProc(ctx, t, lab.NsA, bin, append([]string{"dev", "--set", "namesrv.listen=127.0.0.1:9876", "--set", "console.listen="}, edgeArgs...)...)
	} else {
		edgeNS := labProc(ctx, t, lab.NsA, bin, "namesrv", "--set", "namesrv.listen=127.0.0.1:9876", "--set", "metrics.listen=", "--set", "log.level=warn")
		defer edgeNS.stop()
		edge = labProc(ctx, t, lab.NsA, bin, append([]string{"broker", "--set", "broker.namesrv=[127.0.0.1:9876]"}, edgeArgs...)...)
	}
	defer edge.stop()

	inA := labClient(t, lab.InA, "127.0.0.1:9876")
	inB := labClient(t, lab.InB, centralNS)
	labReady(t, inA, "edge")
	labReady(t, inB, "central")
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	require.NoError(t, admin.New(inA).CreateTopic(actx, admin.TopicConfig{Topic: "LabTopic", ReadQueueNums: 4, WriteQueueNums: 4}))
	acancel()
	waitFor(t, 30*time.Second, "LabTopic routed on the edge", func() bool {
		c, cc := context.WithTimeout(ctx, 2*time.Second)
		defer cc()
		r, err := inA.FetchRoute(c, "LabTopic")
		return err == nil && len(r.Publish) == 4
	})
	prod, err := producer.New(inA, "lab-producer", producer.WithSendTimeout(5*time.Second), producer.WithRetryTimesWhenSendFailed(0))
	require.NoError(t, err)
	defer func() { _ = prod.Shutdown(context.Background()) }()

	// The producer: rate msg/s of 1 KiB, paced every 10 ms, acked ids kept.
	var (
		mu      sync.Mutex
		acked   []string
		failed  atomic.Int64
		sending sync.WaitGroup
	)
	pctx, stopProducing := context.WithCancel(ctx)
	body := make([]byte, 1024)
	sending.Add(1)
	go func() {
		defer sending.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per, carry := float64(rate)/100, 0.0
		for seq := 0; ; {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			carry += per
			for ; carry >= 1; carry-- {
				m := client.NewMessage("LabTopic", body)
				m.SetKeys("lab-" + strconv.Itoa(seq))
				seq++
				err := prod.SendAsync(pctx, func(_ context.Context, r *client.SendResult, err error) {
					if err != nil {
						failed.Add(1)
						return
					}
					mu.Lock()
					acked = append(acked, r.MsgID)
					mu.Unlock()
				}, m)
				if err != nil {
					failed.Add(1)
				}
			}
		}
	}()
	ackedN := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	var peakRSS atomic.Int64
	go func() {
		for ctx.Err() == nil {
			if v := vmHWM(edge.pid()); v > peakRSS.Load() {
				peakRSS.Store(v)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	time.Sleep(warm)
	stored := func() int64 { return targetCount(t, inB, "LabTopic") }
	t.Logf("warm-up: %d acked, %d at the target", ackedN(), stored())
	// The cut: each end of the lab's wire (the veth pair that carries the
	// emulated link, 10.98.0.1 in A and .2 in B) gets a neighbour entry
	// with a MAC nobody has, so every frame is dropped silently, as a
	// radio link that goes away (no netem on this kernel); deleting the
	// entries brings the link back.
	ipc := func(args ...string) {
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	ipc("-n", lab.NsA, "neigh", "replace", "10.98.0.2", "lladdr", "02:00:00:00:00:0b", "dev", prefix+"va", "nud", "permanent")
	ipc("-n", lab.NsB, "neigh", "replace", "10.98.0.1", "lladdr", "02:00:00:00:00:0a", "dev", prefix+"vb", "nud", "permanent")
	cutAt := time.Now()
	time.Sleep(cut)
	ipc("-n", lab.NsA, "neigh", "del", "10.98.0.2", "dev", prefix+"va")
	ipc("-n", lab.NsB, "neigh", "del", "10.98.0.1", "dev", prefix+"vb")
	restoredAt := time.Now()
	atRestore, storedAtRestore := ackedN(), stored()
	backlog := int64(atRestore) - storedAtRestore
	t.Logf("cut %s: %d acked, %d at the target: backlog %d", restoredAt.Sub(cutAt).Round(time.Millisecond), atRestore, storedAtRestore, backlog)

	// Caught up: the target holds as many messages as were acked at the
	// restore (the live messages since then go on arriving too).
	var caughtUp time.Duration
	deadline := restoredAt.Add(drain)
	for time.Now().Before(deadline) {
		if stored() >= int64(atRestore) {
			caughtUp = time.Since(restoredAt)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // live traffic after the catch-up
	stopProducing()
	sending.Wait()
	sent := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), acked...) }()
	// Every acked message at the target, or no progress for 60 s.
	for last, lastAt := int64(-1), time.Now(); ; time.Sleep(500 * time.Millisecond) {
		n := stored()
		if n >= int64(len(sent)) || time.Since(lastAt) > time.Minute || time.Since(restoredAt) > 2*drain {
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		}
	}
	got := labReadAll(t, inB, "LabTopic")
	lost, dup := lostAndDup(sent, got)
	incoming := float64(rate)
	catchUpRate := 0.0
	if caughtUp > 0 {
		catchUpRate = float64(backlog) / caughtUp.Seconds()
	}
	atob, btoa := lab.Stats()
	t.Logf("RESULT profile=%s edge=%s catch_up=%s rate=%d cut=%s acked=%d send_failures=%d target=%d lost=%d duplicates=%d backlog=%d caught_up_after=%s catch_up_rate=%.0f msg/s (%.1fx incoming) edge_peak_rss=%.1f MiB (bound %d MiB; %s) link A->B %+v B->A %+v",
		profile, edgeRole, catchUp, rate, cut, len(sent), failed.Load(), len(got), len(lost), len(dup), backlog, caughtUp.Round(time.Millisecond),
		catchUpRate, catchUpRate/incoming, float64(peakRSS.Load())/(1<<20), rssBound>>20, rssBreakdown(edge.pid()), atob, btoa)
	require.NotZero(t, caughtUp, "the link did not catch up within QUIVER_MIRROR_LAB_DRAIN (%s): lost counts what it had yet to write", drain)
	assert.Empty(t, lost, "acked messages lost")
	assert.Empty(t, dup, "duplicates at the target")
	assert.GreaterOrEqual(t, catchUpRate/incoming, minCatchUp, "catch-up rate against the incoming rate")
	require.NotZero(t, peakRSS.Load(), "the edge broker's VmHWM was never read")
	assert.Less(t, peakRSS.Load(), rssBound, "edge peak RSS")
}

// labBinary is QUIVER_MQ_BINARY, or the tree's mq built as
// docs/guide/edge.md builds it for a device: static, stripped, without
// the gRPC endpoint.
func labBinary(t *testing.T, root string) string {
	t.Helper()
	if b := os.Getenv("QUIVER_MQ_BINARY"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "mq")
	cmd := exec.Command("go", "build", "-tags", "nogrpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/mq")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build the edge mq: %s", out)
	return bin
}

func labEnv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func labInt(t *testing.T, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, k)
	return n
}

// labProcess is an mq process in a lab namespace.
type labProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *testserver.Output
}

func labProc(ctx context.Context, t *testing.T, ns, bin string, args ...string) *labProcess {
	t.Helper()
	out := &testserver.Output{}
	cmd := linkemu.Command(ctx, ns, append([]string{bin}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	p := &labProcess{cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s %v:\n%s", ns, args[:1], out.Tail(40))
		}
	})
	return p
}

// pid is the mq process's (ip netns exec execs it).
func (p *labProcess) pid() int { return p.cmd.Process.Pid }

func (p *labProcess) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// labClient is a client whose connections are made inside a namespace
// (in enters it).
func labClient(t *testing.T, in func(func() error) error, ns string) *client.Client {
	t.Helper()
	dial := transports.Dialer(transports.WithInsecureQUIC())
	cl, err := client.New(client.WithNameServers(ns), client.WithRequestTimeout(10*time.Second),
		client.WithDialer(func(ctx context.Context, addr string) (c transport.Conn, err error) {
			if ierr := in(func() error { c, err = dial(ctx, addr); return nil }); ierr != nil {
				return nil, ierr
			}
			return c, err
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func labReady(t *testing.T, cl *client.Client, what string) {
	t.Helper()
	waitFor(t, 60*time.Second, what+" serving", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cl.FetchRoute(ctx, "TBW102")
		return err == nil
	})
}

// targetCount sums the max offsets of topic's queues (0 before the
// topic exists).
func targetCount(t *testing.T, cl *client.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cl.FetchRoute(ctx, topic)
	if err != nil {
		return 0
	}
	pc, err := consumer.NewPull(cl, "lab-reader")
	require.NoError(t, err)
	var n int64
	for _, mq := range r.Subscribe {
		off, err := pc.MaxOffset(ctx, mq)
		if err != nil {
			return 0
		}
		n += off
	}
	return n
}

func labReadAll(t *testing.T, cl *client.Client, topic string) []*client.MessageExt {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := cl.FetchRoute(ctx, topic)
	require.NoError(t, err)
	pc, err := consumer.NewPull(cl, "lab-reader")
	require.NoError(t, err)
	var out []*client.MessageExt
	for _, mq := range r.Subscribe {
		maxOff, err := pc.MaxOffset(ctx, mq)
		require.NoError(t, err)
		for off := int64(0); off < maxOff; {
			res, err := pc.Pull(ctx, mq, consumer.All(), off, 256)
			require.NoError(t, err)
			if res.Status != consumer.Found {
				break
			}
			out = append(out, res.Messages...)
			off = res.NextBeginOffset
		}
	}
	return out
}

// vmHWM is a process's peak resident set (bytes), 0 when unreadable.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rssBreakdown is a process's resident set now, anonymous and file-backed
// (/proc/<pid>/status), for the RESULT line.
func rssBreakdown(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "RSS unreadable"
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range [...]string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				parts = append(parts, strings.TrimSuffix(k, ":")+" "+strings.Join(strings.Fields(v), " "))
			}
		}
	}
	return "at the end " + strings.Join(parts, ", ")
}
