package mirror_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
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
	"github.com/quivermq/quiver/modules/mirror"
)

// TestMirrorThroughput is the issue's "mirror throughput ≥ 80 % of one
// producer's on the same link" (skipped unless QUIVER_MIRROR_THROUGHPUT=1;
// the figures go to docs/lab/BENCHMARKS.md, it asserts only 0 lost and 0
// duplicates). Two clusters (name server and broker each) run in this
// process on loopback, reached over QUIVER_MIRROR_THROUGHPUT_TRANSPORT
// (tcp, the default, or quic); each round, QUIVER_MIRROR_THROUGHPUT_ROUNDS
// (3) of them, measures in turn:
//
//   - producer: one producer with the client's default settings (auto
//     batching included) sends QUIVER_MIRROR_THROUGHPUT_MSGS (50,000)
//     messages of 1 KiB asynchronously, unpaced, into a fresh topic of
//     QUIVER_MIRROR_THROUGHPUT_QUEUES (8) queues in the target cluster:
//     messages over the time from the first send to the last
//     acknowledgement;
//   - mirror: the same number of messages is first stored in a fresh
//     topic of the source while no link runs, then a link with the
//     default settings (batch_size 256, checkpoint_interval 1s) is
//     started: messages over the time from the first mirrored message's
//     store time at the target to the last one's, and over the time from
//     the link's start to the last one's.
//
// It prints one RESULT line per round (with the load average) and the
// median ratios. QUIVER_MIRROR_THROUGHPUT_PROFILE=<dir> writes a CPU
// profile of each round's mirror phase alone (mirror-<round>.pprof).
func TestMirrorThroughput(t *testing.T) {
	if os.Getenv("QUIVER_MIRROR_THROUGHPUT") != "1" {
		t.Skip("timing run: QUIVER_MIRROR_THROUGHPUT=1")
	}
	n := envInt("QUIVER_MIRROR_THROUGHPUT_MSGS", 50000)
	rounds := envInt("QUIVER_MIRROR_THROUGHPUT_ROUNDS", 3)
	queues := envInt("QUIVER_MIRROR_THROUGHPUT_QUEUES", 8)
	transport := envString("QUIVER_MIRROR_THROUGHPUT_TRANSPORT", "tcp")
	profDir := os.Getenv("QUIVER_MIRROR_THROUGHPUT_PROFILE")
	require.Contains(t, []string{"tcp", "quic"}, transport, "QUIVER_MIRROR_THROUGHPUT_TRANSPORT")
	quic := transport == "quic"
	src := startCluster(t, "edge", quic)
	dst := startCluster(t, "central", quic)
	addr := func(c *cluster) string {
		if quic {
			return c.QUIC
		}
		return c.Namesrv
	}
	body := make([]byte, 1024)

	var prodRates, mirRates, mirStartRates []float64
	for r := 1; r <= rounds; r++ {
		// (a) one producer into the target.
		ptopic := fmt.Sprintf("thr-producer-%d", r)
		dst.createTopic(ptopic, queues)
		cpu0 := cpuTime()
		pw := produceUnpaced(t, addr(dst), ptopic, n, body)
		prodCPU := cpuTime() - cpu0
		require.Len(t, pw.ids, n, "acknowledged sends into the target")
		pFirst, pLast, pCount := storeSpan(t, dst, ptopic)
		require.EqualValues(t, n, pCount, "messages in the target topic")
		prodRate := float64(n) / pw.took.Seconds()

		// (b) the mirror, with n messages waiting in the source.
		stopic := fmt.Sprintf("thr-mirror-%d", r)
		src.createTopic(stopic, queues)
		dst.createTopic(stopic, queues)
		sw := produceUnpaced(t, addr(src), stopic, n, body)
		require.Len(t, sw.ids, n, "acknowledged sends into the source")
		s, err := mirror.New(&mirror.Config{Links: []mirror.Link{{Name: fmt.Sprintf("thr%d", r),
			Source: mirror.Cluster{Namesrv: []string{addr(src)}}, Target: mirror.Cluster{Namesrv: []string{addr(dst)}},
			Topics: []string{stopic}}}}, mirror.Deps{Dial: transports.Dialer(transports.WithInsecureQUIC())})
		require.NoError(t, err)
		stopProfile := startProfile(t, profDir, r)
		cpu0 = cpuTime()
		linkStart := time.Now()
		require.NoError(t, s.Start(context.Background()))
		waitFor(t, 5*time.Minute, "every message mirrored", func() bool { return dst.count(stopic) >= int64(n) })
		mirCPU := cpuTime() - cpu0
		stopProfile()
		stopMirror(t, s)
		mFirst, mLast, mCount := storeSpan(t, dst, stopic)
		lost, dup := lostAndDup(sw.ids, dst.readAll(stopic))
		assert.Empty(t, lost, "lost")
		assert.Empty(t, dup, "duplicated")
		mirRate := float64(n) / mLast.Sub(mFirst).Seconds()
		mirStartRate := float64(n) / mLast.Sub(linkStart).Seconds()
		prodRates, mirRates, mirStartRates = append(prodRates, prodRate), append(mirRates, mirRate), append(mirStartRates, mirStartRate)
		t.Logf("RESULT round=%d transport=%s msgs=%d queues=%d producer=%.0f msg/s (%.2fs first send to last ack; store span %v) mirror=%.0f msg/s (store span %v, first write %v after the link's start) mirror_from_start=%.0f msg/s ratio=%.2f ratio_from_start=%.2f cpu_per_msg producer=%v mirror=%v target_msgs=%d lost=%d dup=%d loadavg=%s",
			r, transport, n, queues, prodRate, pw.took.Seconds(), pLast.Sub(pFirst), mirRate, mLast.Sub(mFirst), mFirst.Sub(linkStart).Round(time.Millisecond),
			mirStartRate, mirRate/prodRate, mirStartRate/prodRate, prodCPU/time.Duration(n), mirCPU/time.Duration(n), mCount, len(lost), len(dup), loadAvg())
	}
	ratios := make([]float64, len(prodRates))
	fromStart := make([]float64, len(prodRates))
	for i := range prodRates {
		ratios[i], fromStart[i] = mirRates[i]/prodRates[i], mirStartRates[i]/prodRates[i]
	}
	t.Logf("MEDIAN rounds=%d producer=%.0f msg/s mirror=%.0f msg/s mirror_from_start=%.0f msg/s ratio=%.2f ratio_from_start=%.2f (target ≥ 0.80) loadavg=%s",
		rounds, median(prodRates), median(mirRates), median(mirStartRates), median(ratios), median(fromStart), loadAvg())
}

// unpaced is one producer run: the acknowledged ids and the time from
// the first send to the last acknowledgement.
type unpaced struct {
	ids  []string
	took time.Duration
}

// produceUnpaced sends n messages of body to topic as fast as SendAsync
// takes them, with a producer of default settings on its own client (the
// route fetched before the clock starts), and waits for every callback.
func produceUnpaced(t *testing.T, ns, topic string, n int, body []byte) unpaced {
	t.Helper()
	cl := newClient(t, ns)
	defer cl.Close()
	p, err := producer.New(cl, "thr-"+topic)
	require.NoError(t, err)
	defer func() { _ = p.Shutdown(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = cl.FetchRoute(ctx, topic)
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		ids    = make([]string, 0, n)
		failed atomic.Int64
		wg     sync.WaitGroup
		last   atomic.Int64
	)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *client.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			ids = append(ids, r.MsgID)
			mu.Unlock()
			last.Store(time.Now().UnixNano())
		}, client.NewMessage(topic, body))
		if err != nil {
			failed.Add(1)
			wg.Done()
		}
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "failed sends to %s", topic)
	return unpaced{ids: ids, took: time.Unix(0, last.Load()).Sub(start)}
}

// storeSpan is the store times of the first and the last message of
// topic in the cluster (over its queues) and how many it holds.
func storeSpan(t *testing.T, c *cluster, topic string) (first, last time.Time, n int64) {
	t.Helper()
	cl := newClient(t, c.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.FetchRoute(ctx, topic)
	require.NoError(t, err)
	pc, err := consumer.NewPull(cl, "span-reader")
	require.NoError(t, err)
	at := func(mq client.MessageQueue, off int64) time.Time {
		res, err := pc.Pull(ctx, mq, consumer.All(), off, 1)
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "%s at %d", mq, off)
		return res.Messages[0].StoreTimestamp
	}
	for _, mq := range r.Subscribe {
		lo, err := pc.MinOffset(ctx, mq)
		require.NoError(t, err)
		hi, err := pc.MaxOffset(ctx, mq)
		require.NoError(t, err)
		if hi <= lo {
			continue
		}
		n += hi - lo
		if f := at(mq, lo); first.IsZero() || f.Before(first) {
			first = f
		}
		if l := at(mq, hi-1); l.After(last) {
			last = l
		}
	}
	return first, last, n
}

// count sums the max offsets of topic's queues in the cluster.
func (c *cluster) count(topic string) int64 {
	c.t.Helper()
	cl := newClient(c.t, c.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cl.FetchRoute(ctx, topic)
	if err != nil {
		return 0
	}
	pc, err := consumer.NewPull(cl, "count-reader")
	require.NoError(c.t, err)
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

// startProfile writes a CPU profile to dir/mirror-<round>.pprof until the
// returned func is called (a no-op without dir).
func startProfile(t *testing.T, dir string, round int) func() {
	t.Helper()
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("mirror-%d.pprof", round)))
	require.NoError(t, err)
	require.NoError(t, pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		require.NoError(t, f.Close())
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAvg is the machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], "/")
}

func envString(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// cpuTime is the CPU time (user and system) this process has used: both
// clusters, the clients and the link run in it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
