//go:build linux

package lossy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/internal/testserver"
)

// edgeSets are config.edge.yaml's settings as --set flags (the test
// server takes no config file); TestEdgeSetsMatchFile keeps them equal.
var edgeSets = map[string][]string{
	"common": {
		"process.memory_limit=24MiB",
		"broker.send_queue_capacity=512",
		"broker.pull_bytes_max=128KiB",
	},
	// config.edge.yaml's commented Pebble alternative (not on MIPS).
	"pebble": {
		"storage.engine=pebble",
		"storage.pebble.memtable_size=2MiB",
		"storage.pebble.block_cache_size=2MiB",
		"storage.pebble.max_open_files=256",
	},
	"commitlog": {
		"storage.engine=commitlog",
		"storage.commitlog.segment_size=16MiB",
		"storage.commitlog.cq_entries_per_file=100000",
		"storage.commitlog.key_index=false",
	},
}

// TestEdgeConfigFile checks that config.edge.yaml loads strictly and sets
// exactly the common and commit-log keys TestEdgeFootprint uses.
func TestEdgeConfigFile(t *testing.T) {
	cfg, err := config.Load(config.Options{File: "../../config.edge.yaml"})
	require.NoError(t, err)
	var want []string
	for _, kv := range append(append([]string(nil), edgeSets["common"]...), edgeSets["commitlog"]...) {
		k, v, _ := strings.Cut(kv, "=")
		want = append(want, k)
		assert.Equal(t, v, fmt.Sprint(cfg.Get(k)), k)
	}
	want = append(want, "transports")
	assert.ElementsMatch(t, want, cfg.Keys())
}

// TestEdgeFootprint runs `mq broker` (QUIVER_EDGE_ROLE=broker, the
// default: what a device runs, registered with a name server process of
// its own) or `mq dev` (QUIVER_EDGE_ROLE=dev: name server, broker, gRPC
// endpoint and console in one process, the role of the measurements
// before 2026-12-07) with the edge profile of engine
// QUIVER_EDGE_ENGINE (commitlog, the default, or pebble; QUIVER_EDGE_SETS adds
// comma-separated key=value overrides) under QUIVER_EDGE_RATE (default
// 5,000) async sends a second of 1 KiB for QUIVER_EDGE_SECONDS, with a
// consumer tailing the topic, and prints one EDGE line: the broker's peak
// RSS (VmHWM) and the anonymous and file-backed parts of the largest
// sample, sends slower than 100 ms, the slowest send, busy answers, the
// largest consumer lag, and from the broker's metrics its requests slower
// than 102.4 ms, its largest GC pause and its Go heap. QUIVER_MQ_BINARY
// runs a prebuilt mq (the stripped CGO_ENABLED=0 build a device runs: in
// a cgo build Pebble's memtables and cache are C memory that
// process.memory_limit does not bound).
func TestEdgeFootprint(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_EDGE_SECONDS"))
	if secs <= 0 {
		t.Skip("set QUIVER_EDGE_SECONDS (and QUIVER_EDGE_ENGINE=pebble|commitlog)")
	}
	engine := envOr("QUIVER_EDGE_ENGINE", "commitlog")
	rate, _ := strconv.Atoi(envOr("QUIVER_EDGE_RATE", "5000"))
	sets := append(append([]string{"log.level=warn"}, edgeSets["common"]...), edgeSets[engine]...)
	if s := os.Getenv("QUIVER_EDGE_SETS"); s != "" {
		sets = append(sets, strings.Split(s, ",")...)
	}
	if os.Getenv("QUIVER_EDGE_DEFAULTS") != "" {
		sets = []string{"log.level=warn", "storage.engine=" + engine}
	}
	var env []string
	if e := os.Getenv("QUIVER_EDGE_ENV"); e != "" {
		env = strings.Split(e, ",")
	}
	// The broker's own view of the sends (quiver_send_duration_seconds,
	// store write and send-queue wait included) and its GC pauses, to
	// tell a broker stall from a client or machine that got no CPU.
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	sets = append(sets, "metrics.listen="+metricsAddr)
	role := envOr("QUIVER_EDGE_ROLE", "broker")
	var srv edgeServer
	switch role {
	case "broker":
		srv = startEdgeBroker(t, sets, env, metricsAddr)
	case "dev":
		srv = devServer{testserver.StartDev(t, testserver.Options{Sets: sets, Env: env})}
	default:
		t.Fatalf("QUIVER_EDGE_ROLE=%q: want broker or dev", role)
	}
	c, err := client.New(client.WithNameServers(srv.NamesrvAddr()), transports.WithDialer(), client.WithRequestTimeout(10*time.Second))
	require.NoError(t, err)
	defer c.Close()
	p, err := producer.New(c, "EDGE_P", producer.WithSendTimeout(10*time.Second), producer.WithRetryTimesWhenSendAsyncFailed(0))
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	topic := "EdgeBench"
	body := make([]byte, 1024)
	_, err = p.SendSync(context.Background(), client.NewMessage(topic, body))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumed atomic.Int64
	pc, err := consumer.NewPull(c, "EDGE_C")
	require.NoError(t, err)
	// The first send auto-created the topic; its registration with the
	// name server may land just after the send's answer.
	var qs []client.MessageQueue
	require.Eventually(t, func() bool {
		qs, err = pc.Queues(ctx, topic)
		return err == nil && len(qs) > 0
	}, 10*time.Second, 20*time.Millisecond, "route of %s: %v", topic, err)
	var cwg sync.WaitGroup
	for _, mq := range qs {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var off int64
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				res, err := pc.PullEach(pctx, mq, consumer.All(), off, 32, func(*client.MessageExt) { consumed.Add(1) })
				pcancel()
				if err != nil {
					continue
				}
				off = res.NextBeginOffset
			}
		}()
	}

	var acked, busy, failed, slow, inflight atomic.Int64
	var maxLat atomic.Int64
	var maxLag, maxInflight int64
	var hwm int64
	var peak smaps // the sample with the largest resident set
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(time.Duration(secs) * time.Second)
	const tick = 2 * time.Millisecond
	tk := time.NewTicker(tick)
	lastSample := start
	sent := 0
	for now := range tk.C {
		if now.After(deadline) {
			break
		}
		// Catch up to the schedule: rate × elapsed.
		want := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < want; sent++ {
			t0 := time.Now()
			inflight.Add(1)
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) {
				defer wg.Done()
				inflight.Add(-1)
				d := time.Since(t0)
				for {
					m := maxLat.Load()
					if int64(d) <= m || maxLat.CompareAndSwap(m, int64(d)) {
						break
					}
				}
				if d > 100*time.Millisecond {
					slow.Add(1)
				}
				switch {
				case err == nil:
					acked.Add(1)
				case isBusy(err):
					busy.Add(1)
				default:
					failed.Add(1)
				}
			}, client.NewMessage(topic, body))
			if err != nil {
				inflight.Add(-1)
				wg.Done()
				failed.Add(1)
			}
		}
		if now.Sub(lastSample) >= 250*time.Millisecond {
			lastSample = now
			maxLag = max(maxLag, acked.Load()-consumed.Load())
			maxInflight = max(maxInflight, inflight.Load())
			hwm = max(hwm, vmHWM(srv.PID()))
			if m := readSmaps(srv.PID()); m.rss > peak.rss {
				peak = m
			}
		}
	}
	tk.Stop()
	wg.Wait()
	// Let the consumer catch up (bounded), then stop it.
	for i := 0; i < 100 && consumed.Load() < acked.Load(); i++ {
		time.Sleep(50 * time.Millisecond) // polling the consumer's progress
	}
	cancel()
	cwg.Wait()
	hwm = max(hwm, vmHWM(srv.PID()))
	el := time.Since(start)
	bf, err := scrapeBroker(metricsAddr)
	if err != nil {
		t.Logf("broker metrics: %v", err)
	}
	fmt.Printf("EDGE role=%s engine=%s env=%q sets=%q rate=%d secs=%d acked=%d acked_per_sec=%.0f busy=%d failed=%d sends_over_100ms=%d max_send=%v max_inflight=%d max_lag=%d final_lag=%d vm_hwm_mib=%.1f peak_sample_rss_mib=%.1f anon_mib=%.1f file_mib=%.1f broker_sends=%d broker_sends_over_102ms=%d gc_pause_max=%v go_heap_sys_mib=%.1f\n",
		role, engine, strings.Join(env, ","), strings.Join(sets[1:], ","), rate, secs, acked.Load(), float64(acked.Load())/el.Seconds(), busy.Load(), failed.Load(), slow.Load(),
		time.Duration(maxLat.Load()).Round(time.Millisecond), maxInflight, maxLag, acked.Load()-consumed.Load(), float64(hwm)/(1<<20),
		float64(peak.rss)/(1<<20), float64(peak.anon)/(1<<20), float64(peak.rss-peak.anon)/(1<<20),
		bf.sends, bf.sendsSlow, bf.gcPauseMax.Round(time.Microsecond), bf.heapSys/(1<<20))
	if logs := srv.Logs(); strings.Contains(logs, "stall") {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "stall") {
				fmt.Println("EDGE log:", l)
			}
		}
	}
}

// edgeServer is what TestEdgeFootprint measures: testserver's mq dev or
// edgeBroker.
type edgeServer interface {
	NamesrvAddr() string
	PID() int
	Logs() string
}

// devServer is testserver's mq dev as an edgeServer.
type devServer struct{ *testserver.Proc }

func (d devServer) NamesrvAddr() string { return d.Namesrv }

// edgeBroker is `mq broker` with a name server process of its own.
type edgeBroker struct {
	namesrv string
	cmd     *exec.Cmd
	logs    *testserver.Output
}

func (b *edgeBroker) NamesrvAddr() string { return b.namesrv }
func (b *edgeBroker) PID() int            { return b.cmd.Process.Pid }
func (b *edgeBroker) Logs() string        { return b.logs.String() }

// startEdgeBroker starts `mq namesrv` and `mq broker --set sets...` (env
// added to the broker's environment) and waits until the broker's
// /readyz on metricsAddr answers 200; both stop with the test.
func startEdgeBroker(t *testing.T, sets, env []string, metricsAddr string) *edgeBroker {
	t.Helper()
	bin := testserver.Binary(t)
	dir := t.TempDir()
	ns := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	start := func(name string, extraEnv []string, args ...string) (*exec.Cmd, *testserver.Output) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), extraEnv...)
		out := &testserver.Output{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start(), "start mq %s", name)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() //nolint:errcheck // reaped; the output tells why
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // may have exited
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill() //nolint:errcheck // stuck in shutdown
				<-done
			}
			if t.Failed() {
				t.Logf("mq %s output:\n%s", name, out.String())
			}
		})
		return cmd, out
	}
	start("namesrv", nil, "namesrv", "--set", "namesrv.listen="+ns, "--set", "log.level=warn")
	args := []string{"broker",
		"--set", "broker.namesrv=[" + ns + "]",
		"--set", fmt.Sprintf("broker.listen=127.0.0.1:%d", testserver.FreePort(t)),
		"--set", "storage.dir=" + dir + "/store",
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd, out := start("broker", env, args...)
	b := &edgeBroker{namesrv: ns, cmd: cmd, logs: out}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/readyz") //nolint:noctx // a local poll bounded by Eventually
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "mq broker not ready:\n%s", out.String())
	return b
}

func isBusy(err error) bool {
	var ce interface{ ResponseCode() int }
	if errors.As(err, &ce) {
		return ce.ResponseCode() == 2 // SYSTEM_BUSY
	}
	return strings.Contains(err.Error(), "busy")
}

// brokerFigures are read from the broker's Prometheus endpoint.
type brokerFigures struct {
	sends, sendsSlow int64         // sends handled; those above 102.4 ms (a bucket bound)
	gcPauseMax       time.Duration // go_gc_duration_seconds{quantile="1"}
	heapSys          float64       // go_memstats_heap_sys_bytes
}

// scrapeBroker reads brokerFigures from the metrics endpoint at addr.
func scrapeBroker(addr string) (brokerFigures, error) {
	var f brokerFigures
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return f, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return f, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return f, fmt.Errorf("scrape %s: %w", addr, err)
	}
	var fast int64
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, _ := strings.Cut(line, " ")
		val, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "quiver_send_duration_seconds_count"):
			f.sends = int64(val)
		case strings.HasPrefix(name, "quiver_send_duration_seconds_bucket") && strings.Contains(name, `le="0.1024"`):
			fast = int64(val)
		case name == `go_gc_duration_seconds{quantile="1"}`:
			f.gcPauseMax = time.Duration(val * float64(time.Second))
		case name == "go_memstats_heap_sys_bytes":
			f.heapSys = val
		}
	}
	f.sendsSlow = f.sends - fast
	return f, nil
}

// smaps is a resident set split into anonymous memory (the Go heap,
// stacks, runtime) and file-backed pages (the binary, mapped segments).
type smaps struct{ rss, anon int64 }

// readSmaps reads /proc/pid/smaps_rollup (zero if unknown).
func readSmaps(pid int) smaps {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return smaps{}
	}
	var m smaps
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		switch k {
		case "Rss":
			m.rss = kb << 10
		case "Anonymous":
			m.anon = kb << 10
		}
	}
	return m
}

// vmHWM is process pid's peak resident set size in bytes (0 if unknown).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
