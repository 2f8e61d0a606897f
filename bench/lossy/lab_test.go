//go:build linux

package lossy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
)

// TestLabWorkloads runs the lossy-link laboratory's workloads from
// namespace A against an `mq dev` it starts in namespace B, across the
// emulated link of bench/lossy/linkemu. scripts/lossy-lab.sh starts the
// link (cmd/linkemu) and runs this test inside namespace A; it is skipped
// unless QUIVER_LAB_SECONDS and QUIVER_LAB_NS_B are set.
//
// Workloads, each for QUIVER_LAB_SECONDS per transport, 1 KiB messages:
//   - sync1: one sync send at a time;
//   - sync32: 32 goroutines each doing sync sends;
//   - async32: async sends with at most 32 in flight;
//   - pull: 4 pullers reading the backlog the sends left, 32 messages a
//     pull, one pull per puller in flight.
//
// Transports run in QUIVER_LAB_ORDER (default tcp,quic); each prints one
// LAB line per workload, which TestLabTable turns into a table.
func TestLabWorkloads(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_LAB_SECONDS"))
	nsB := os.Getenv("QUIVER_LAB_NS_B")
	if secs <= 0 || nsB == "" {
		t.Skip("set QUIVER_LAB_SECONDS and QUIVER_LAB_NS_B (scripts/lossy-lab.sh runs this inside the lab's namespace A)")
	}
	addrB := envOr("QUIVER_LAB_ADDR_B", "10.99.0.2")
	profile := envOr("QUIVER_LAB_PROFILE", "?")
	order := strings.Split(envOr("QUIVER_LAB_ORDER", "tcp,quic"), ",")
	workloads := strings.Split(envOr("QUIVER_LAB_WORKLOADS", "sync1,sync32,async32,pull"), ",")
	mq := os.Getenv("QUIVER_MQ_BINARY")
	require.NotEmpty(t, mq, "QUIVER_MQ_BINARY")

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, br := addrB+":9876", addrB+":10911"
	cmd := linkemu.Command(ctx, nsB, mq, "dev", "--set", "namesrv.listen="+ns, "--set", "broker.listen="+br,
		"--set", "storage.dir="+filepath.Join(dir, "store"), "--set", "transports=tcp,quic", "--set", "log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "mq.log"))
	require.NoError(t, err)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	require.NoError(t, cmd.Start())
	defer func() { cancel(); cmd.Wait() }()

	topic := "LabBench"
	body := make([]byte, 1024)
	type rig struct {
		c *client.Client
		p *producer.Producer
	}
	rigs := map[string]rig{}
	for _, tr := range order {
		c, err := client.New(client.WithNameServers(tr+"://"+ns), transports.WithDialer(transports.WithInsecureQUIC()),
			client.WithRequestTimeout(30*time.Second))
		require.NoError(t, err)
		defer c.Close()
		p, err := producer.New(c, "LAB_"+tr, producer.WithSendTimeout(30*time.Second), producer.WithRetryTimesWhenSendFailed(0),
			producer.WithRetryTimesWhenSendAsyncFailed(0))
		require.NoError(t, err)
		defer p.Shutdown(context.Background())
		// The server may still be starting, and the first send creates the
		// topic: poll until a send succeeds.
		deadline := time.Now().Add(90 * time.Second)
		for {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.SendSync(sctx, client.NewMessage(topic, body))
			scancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logf.Name())
				t.Fatalf("%s: no send succeeded within 90 s: %v\nmq log:\n%s", tr, err, b)
			}
			time.Sleep(200 * time.Millisecond) // retry pacing of a server not up yet, not synchronisation
		}
		rigs[tr] = rig{c, p}
	}
	dur := time.Duration(secs) * time.Second
	for _, w := range workloads {
		for _, tr := range order {
			r := rigs[tr]
			var res result
			switch w {
			case "sync1":
				res = sendSync(r.p, topic, body, 1, dur)
			case "sync32":
				res = sendSync(r.p, topic, body, 32, dur)
			case "async32":
				res = sendAsync(r.p, topic, body, 32, dur)
			case "pull":
				res = pullBacklog(t, r.c, topic, 4, dur)
			default:
				t.Fatalf("unknown workload %q", w)
			}
			fmt.Printf("LAB profile=%s workload=%s transport=%s msgs_per_sec=%.1f p50=%v p99=%v errors=%d n=%d\n",
				profile, w, tr, res.rate, res.q(.5), res.q(.99), res.errs, len(res.lat))
		}
	}
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

type result struct {
	rate float64
	lat  []time.Duration
	errs int64
}

func (r result) q(f float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(f*float64(len(r.lat)-1))].Round(10 * time.Microsecond)
}

type recorder struct {
	mu    sync.Mutex
	lat   []time.Duration
	n     atomic.Int64
	errs  atomic.Int64
	start time.Time
}

func (r *recorder) add(d time.Duration, msgs int) {
	r.mu.Lock()
	r.lat = append(r.lat, d)
	r.mu.Unlock()
	r.n.Add(int64(msgs))
}

func (r *recorder) result() result {
	el := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	return result{rate: float64(r.n.Load()) / el.Seconds(), lat: r.lat, errs: r.errs.Load()}
}

func sendSync(p *producer.Producer, topic string, body []byte, senders int, dur time.Duration) result {
	r := &recorder{start: time.Now()}
	deadline := r.start.Add(dur)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := p.SendSync(ctx, client.NewMessage(topic, body))
				cancel()
				if err != nil {
					r.errs.Add(1)
					continue
				}
				r.add(time.Since(t0), 1)
			}
		}()
	}
	wg.Wait()
	return r.result()
}

func sendAsync(p *producer.Producer, topic string, body []byte, window int, dur time.Duration) result {
	r := &recorder{start: time.Now()}
	deadline := r.start.Add(dur)
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	for time.Now().Before(deadline) {
		sem <- struct{}{}
		wg.Add(1)
		t0 := time.Now()
		err := p.SendAsync(context.Background(), func(_ context.Context, _ *client.SendResult, err error) {
			if err != nil {
				r.errs.Add(1)
			} else {
				r.add(time.Since(t0), 1)
			}
			<-sem
			wg.Done()
		}, client.NewMessage(topic, body))
		if err != nil {
			r.errs.Add(1)
			<-sem
			wg.Done()
		}
	}
	wg.Wait()
	return r.result()
}

// pullBacklog reads topic from offset 0 with pullers goroutines sharing the
// queues, until the backlog is read or dur passes.
func pullBacklog(t *testing.T, c *client.Client, topic string, pullers int, dur time.Duration) result {
	pc, err := consumer.NewPull(c, "LAB_PULL_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	require.NoError(t, err)
	qs, err := pc.Queues(context.Background(), topic)
	require.NoError(t, err)
	r := &recorder{start: time.Now()}
	deadline := r.start.Add(dur)
	var wg sync.WaitGroup
	for g := range pullers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []client.MessageQueue
			for i := g; i < len(qs); i += pullers {
				mine = append(mine, qs[i])
			}
			next := make([]int64, len(mine))
			done := make([]bool, len(mine))
			for left := len(mine); left > 0 && time.Now().Before(deadline); {
				for i, mq := range mine {
					if done[i] || !time.Now().Before(deadline) {
						continue
					}
					t0 := time.Now()
					n := 0
					res, err := pc.PullEach(context.Background(), mq, consumer.All(), next[i], 32, func(*client.MessageExt) { n++ })
					if err != nil {
						r.errs.Add(1)
						continue
					}
					r.add(time.Since(t0), n)
					next[i] = res.NextBeginOffset
					if n == 0 || next[i] >= res.MaxOffset {
						done[i] = true
						left--
					}
				}
			}
		}()
	}
	wg.Wait()
	return r.result()
}

// TestLabTable reads the LAB lines of QUIVER_LAB_RESULTS and prints the
// markdown table of docs/BENCHMARKS.md: per profile and workload, each
// transport's median msg/s, p50 and p99 over the runs, and QUIC's ratios
// to TCP.
func TestLabTable(t *testing.T) {
	path := os.Getenv("QUIVER_LAB_RESULTS")
	if path == "" {
		t.Skip("set QUIVER_LAB_RESULTS to a file of LAB lines (scripts/lossy-lab.sh does)")
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	type key struct{ profile, workload, transport string }
	type runs struct {
		rate     []float64
		p50, p99 []time.Duration
		errs     int64
	}
	cells := map[key]*runs{}
	var keys []key
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "LAB ") {
			continue
		}
		kv := map[string]string{}
		for _, fld := range strings.Fields(line)[1:] {
			if k, v, ok := strings.Cut(fld, "="); ok {
				kv[k] = v
			}
		}
		k := key{kv["profile"], kv["workload"], kv["transport"]}
		c := cells[k]
		if c == nil {
			c = &runs{}
			cells[k] = c
			keys = append(keys, k)
		}
		rate, _ := strconv.ParseFloat(kv["msgs_per_sec"], 64)
		p50, _ := time.ParseDuration(kv["p50"])
		p99, _ := time.ParseDuration(kv["p99"])
		e, _ := strconv.ParseInt(kv["errors"], 10, 64)
		c.rate, c.p50, c.p99, c.errs = append(c.rate, rate), append(c.p50, p50), append(c.p99, p99), c.errs+e
	}
	require.NoError(t, sc.Err())
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		switch {
		case len(s) == 0:
			return 0
		case len(s)%2 == 0:
			return (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
		return s[len(s)/2]
	}
	medD := func(v []time.Duration) time.Duration {
		s := make([]float64, len(v))
		for i, d := range v {
			s[i] = float64(d)
		}
		return time.Duration(med(s))
	}
	runsOf := func(v []float64) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.FormatFloat(x, 'f', 0, 64)
		}
		return strings.Join(s, " / ")
	}
	fmt.Println("| profile | workload | transport | msg/s (runs) | median p50 | median p99 | errors | QUIC/TCP msg/s | QUIC/TCP p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, k := range keys {
		c := cells[k]
		ratio, pr := "", ""
		if k.transport == "quic" {
			if tc := cells[key{k.profile, k.workload, "tcp"}]; tc != nil && med(tc.rate) > 0 && medD(tc.p99) > 0 {
				ratio = fmt.Sprintf("%.2f×", med(c.rate)/med(tc.rate))
				pr = fmt.Sprintf("%.2f×", float64(medD(c.p99))/float64(medD(tc.p99)))
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %v | %v | %d | %s | %s |\n", k.profile, k.workload, k.transport, runsOf(c.rate),
			medD(c.p50).Round(100*time.Microsecond), medD(c.p99).Round(100*time.Microsecond), c.errs, ratio, pr)
	}
}
