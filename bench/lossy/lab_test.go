//go:build linux

package lossy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
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
//     pull, one pull per puller in flight;
//   - migrate (QUIC only): 4 goroutines of sync sends to a fresh topic;
//     halfway through, the route to B is switched to A's second address
//     and Client.Migrate moves the QUIC connections there; afterwards
//     every acknowledged message must be in the topic exactly once and
//     nothing may have been redialled.
//
// Transports run in QUIVER_LAB_ORDER (default tcp,quic; "nats" adds the
// NATS transport: an embedded nats-server, this test binary in
// TestLabNATSServer's mode, runs in namespace B next to `mq dev`, and
// the client in A reaches it through the link). Each prints one LAB line
// per workload, with the cell's packet counters (see labCounters), which
// TestLabTable turns into tables.
func TestLabWorkloads(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_LAB_SECONDS"))
	nsB := os.Getenv("QUIVER_LAB_NS_B")
	if secs <= 0 || nsB == "" {
		t.Skip("set QUIVER_LAB_SECONDS and QUIVER_LAB_NS_B (scripts/lossy-lab.sh runs this inside the lab's namespace A)")
	}
	addrA := envOr("QUIVER_LAB_ADDR_A", "10.99.0.1")
	addrA2 := envOr("QUIVER_LAB_ADDR_A2", "10.99.0.3")
	addrB := envOr("QUIVER_LAB_ADDR_B", "10.99.0.2")
	profile := envOr("QUIVER_LAB_PROFILE", "?")
	order := strings.Split(envOr("QUIVER_LAB_ORDER", "tcp,quic"), ",")
	workloads := strings.Split(envOr("QUIVER_LAB_WORKLOADS", "sync1,sync32,async32,pull"), ",")
	mq := os.Getenv("QUIVER_MQ_BINARY")
	require.NotEmpty(t, mq, "QUIVER_MQ_BINARY")
	for _, a := range []string{addrA, addrA2, addrB} {
		require.True(t, strings.HasPrefix(a, "10.99.0."), "lab addresses are 10.99.0.x, got %s", a)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	natsURL := "nats://" + addrB + ":4222"
	if slices.Contains(order, "nats") {
		startLabNATS(ctx, t, nsB, addrB+":4222")
	}
	// One `mq dev` per QUIC congestion controller in the order: a broker's
	// controller governs what it sends (pull answers), so quic-reno and
	// quic-bbr each talk to a broker running theirs. TCP and NATS use the
	// first. The TCP controller is the namespaces' (setTCPCongestion).
	var ccs []string
	for _, tr := range order {
		if v := parseVariant(tr); v.base == "quic" && !slices.Contains(ccs, v.cc) {
			ccs = append(ccs, v.cc)
		}
	}
	if len(ccs) == 0 {
		ccs = []string{"reno"}
	}
	devs := map[string]string{} // QUIC controller → name server address
	for i, cc := range ccs {
		ns := fmt.Sprintf("%s:%d", addrB, 9876+10*i)
		devs[cc] = ns
		startLabDev(ctx, t, nsB, mq, filepath.Join(dir, "dev-"+cc), i, cc, ns, addrB, natsURL, i == 0 && slices.Contains(order, "nats"))
	}

	topic := "LabBench"
	body := make([]byte, 1024)
	rigs := map[string]*rig{}
	checks := map[string]*tcpCheck{}
	for _, tr := range order {
		v := parseVariant(tr)
		ns := devs[ccs[0]]
		var before map[int]string
		switch v.base {
		case "quic":
			ns = devs[v.cc]
		case "tcp":
			if v.cc != "" {
				setTCPCongestion(ctx, t, nsB, v.cc)
			}
			var err error
			before, err = tcpAlgos(ctx, "", addrA)
			require.NoError(t, err)
		}
		r := newRig(t, tr, ns, natsURL)
		defer r.close() //nolint:gocritic // one rig per transport, all closed when the cell ends
		// The server may still be starting, and the first send creates the
		// topic: poll until a send succeeds.
		if _, err := firstSend(r.p, topic, body, 90*time.Second); err != nil {
			t.Fatalf("%s: no send succeeded within 90 s: %v", tr, err)
		}
		if slices.Contains(workloads, "push") {
			if _, err := firstSend(r.p, labPushTopic, body, 30*time.Second); err != nil {
				t.Fatalf("%s: creating %s: %v", tr, labPushTopic, err)
			}
		}
		if v.base == "tcp" {
			checks[tr] = newTCPCheck(ctx, t, nsB, addrA, before)
		}
		rigs[tr] = r
	}
	lc := newLabCounters(t, nsB, addrA)
	dur := time.Duration(secs) * time.Second
	for _, w := range workloads {
		for _, tr := range order {
			r := rigs[tr]
			if w == "migrate" && parseVariant(tr).base != "quic" {
				continue // only QUIC connections migrate
			}
			if w == "fair" {
				// Each transport against TCP CUBIC, the flow most users'
				// kernels run, sharing the link at the same time.
				ref := rigs["tcp-cubic"]
				if tr == "tcp-cubic" || ref == nil {
					continue
				}
				before := lc.read(r)
				bps, refBps, errs, refErrs := fairShare(r, ref, topic, dur)
				cells := lc.read(r).sub(before)
				fmt.Printf("LAB profile=%s workload=fair transport=%s vs=tcp-cubic mbit=%.2f vs_mbit=%.2f share=%.3f errors=%d vs_errors=%d %s\n",
					profile, tr, bps*8/1e6, refBps*8/1e6, bps/max(1, bps+refBps), errs, refErrs, cells)
				continue
			}
			before := lc.read(r)
			var res result
			extra := ""
			switch w {
			case "sync1":
				res = sendSync(r.p, topic, body, 1, dur)
			case "sync32":
				res = sendSync(r.p, topic, body, 32, dur)
			case "async32":
				res = sendAsync(r.p, topic, body, 32, dur)
			case "pull":
				res = pullBacklog(t, r.c, topic, 4, dur)
			case "push":
				res = pushFlow(t, r, body, 4, dur)
			case "migrate":
				var mo migrateOutcome
				res, mo = migrateRun(t, r, lc, addrA, addrA2, addrB, body, dur)
				extra = mo.String()
				assert.Zero(t, mo.lost, "acknowledged messages missing after the migration")
				assert.Zero(t, mo.dup, "messages stored twice")
				assert.Zero(t, mo.redials, "connections redialled instead of migrated")
				assert.Positive(t, mo.migrated, "no connection migrated: %s", mo.err)
				assert.Positive(t, mo.acked, "nothing acknowledged")
			default:
				t.Fatalf("unknown workload %q", w)
			}
			cells := lc.read(r).sub(before)
			if tc := checks[tr]; tc != nil {
				extra += " cc=" + tc.String()
			}
			fmt.Printf("LAB profile=%s workload=%s transport=%s msgs_per_sec=%.1f p50=%v p99=%v errors=%d n=%d%s %s\n",
				profile, w, tr, res.rate, res.q(.5), res.q(.99), res.errs, len(res.lat), extra, cells)
		}
	}
}

// startLabDev runs `mq dev` number i in namespace ns with QUIC congestion
// controller cc, its name server on nsAddr and the other listeners on
// ports of its own, until ctx ends. Its log goes to dir/mq.log.
func startLabDev(ctx context.Context, t *testing.T, ns, mq, dir string, i int, cc, nsAddr, addrB, natsURL string, nats bool) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	port := func(p int) string { return fmt.Sprintf("%s:%d", addrB, p+10*i) }
	args := []string{"dev", "--set", "namesrv.listen=" + nsAddr, "--set", "broker.listen=" + port(10911),
		"--set", "grpc.listen=" + port(8081), "--set", "storage.dir=" + filepath.Join(dir, "store"),
		"--set", "log.level=warn", "--set", "transport.quic.congestion=" + cc}
	if nats {
		// mq refuses transport.nats keys when nats is not a transport.
		args = append(args, "--set", "transports=tcp,quic,nats", "--set", "transport.nats.url="+natsURL)
	} else {
		args = append(args, "--set", "transports=tcp,quic")
	}
	cmd := linkemu.Command(ctx, ns, append([]string{mq}, args...)...)
	logf, err := os.Create(filepath.Join(dir, "mq.log"))
	require.NoError(t, err)
	t.Cleanup(func() { logf.Close() })
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Cancel(); cmd.Wait() }) //nolint:errcheck // stopping at the end of the run
}

// rig is one transport's client and producer, with a dialler that counts
// the connections it opens and keeps the QUIC ones for their counters.
type rig struct {
	transport string
	c         *client.Client
	p         *producer.Producer
	dials     atomic.Int64

	mu   sync.Mutex
	quic []*quictransport.Conn
}

func newRig(t *testing.T, tr, ns, natsURL string) *rig {
	r := &rig{transport: tr}
	v := parseVariant(tr)
	qcfg := quictransport.NewConfig()
	if v.base == "quic" {
		qcfg.Congestion = v.cc
	}
	opts := []transports.Option{transports.WithQUIC(qcfg), transports.WithInsecureQUIC()}
	if v.base == "nats" {
		ncfg := natstransport.NewConfig()
		ncfg.URL = natsURL
		opts = append(opts, transports.WithNATS(ncfg))
	}
	base := transports.Dialer(opts...)
	dial := func(ctx context.Context, addr string) (transport.Conn, error) {
		conn, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		r.dials.Add(1)
		if qc, ok := conn.(*quictransport.Conn); ok {
			r.mu.Lock()
			r.quic = append(r.quic, qc)
			r.mu.Unlock()
		}
		return conn, nil
	}
	var err error
	r.c, err = client.New(client.WithNameServers(v.base+"://"+ns), client.WithDialer(dial), client.WithRequestTimeout(30*time.Second))
	require.NoError(t, err)
	r.p, err = producer.New(r.c, "LAB_"+tr, producer.WithSendTimeout(30*time.Second), producer.WithRetryTimesWhenSendFailed(0),
		producer.WithRetryTimesWhenSendAsyncFailed(0))
	if err != nil {
		r.c.Close()
		require.NoError(t, err)
	}
	return r
}

func (r *rig) close() {
	r.p.Shutdown(context.Background())
	r.c.Close()
}

// quicStats sums quic-go's counters over the rig's QUIC connections.
func (r *rig) quicStats() (sent, recv, lost uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, qc := range r.quic {
		s := qc.Stats()
		sent, recv, lost = sent+s.PacketsSent, recv+s.PacketsReceived, lost+s.PacketsLost
	}
	return sent, recv, lost
}

// firstSend sends until one send succeeds or wait passes.
func firstSend(p *producer.Producer, topic string, body []byte, wait time.Duration) (*client.SendResult, error) {
	deadline := time.Now().Add(wait)
	for {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := p.SendSync(sctx, client.NewMessage(topic, body))
		scancel()
		if err == nil {
			return res, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond) // retry pacing of a server not up yet, not synchronisation
	}
}

// startLabNATS runs this test binary as TestLabNATSServer in namespace
// ns, listening on addr, until ctx ends, and waits until it is ready.
func startLabNATS(ctx context.Context, t *testing.T, ns, addr string) {
	cmd := linkemu.Command(ctx, ns, os.Args[0], "-test.run", "^TestLabNATSServer$", "-test.timeout", "0")
	cmd.Env = append(os.Environ(), "QUIVER_LAB_NATS_LISTEN="+addr)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "NATSD ready") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the lab's nats-server did not start within 30 s")
	}
}

// TestLabNATSServer is TestLabWorkloads' nats-server: when
// QUIVER_LAB_NATS_LISTEN is set it runs an embedded nats-server on that
// address, prints "NATSD ready", and serves until SIGINT or SIGTERM, or
// for at most an hour.
func TestLabNATSServer(t *testing.T) {
	listen := os.Getenv("QUIVER_LAB_NATS_LISTEN")
	if listen == "" {
		t.Skip("set QUIVER_LAB_NATS_LISTEN (TestLabWorkloads starts it in the lab's namespace B)")
	}
	host, portS, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	port, err := strconv.Atoi(portS)
	require.NoError(t, err)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := natsserver.NewServer(&natsserver.Options{Host: host, Port: port, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	require.True(t, s.ReadyForConnections(20*time.Second), "nats-server not ready")
	fmt.Println("NATSD ready", s.Addr())
	select {
	case <-ctx.Done():
	case <-time.After(time.Hour):
	}
}

// migrateOutcome is what the migrate workload checked.
type migrateOutcome struct {
	acked, found, lost, dup, redials int64
	migrated                         int
	took                             time.Duration
	err                              error
}

func (m migrateOutcome) String() string {
	return fmt.Sprintf(" acked=%d found=%d lost=%d dup=%d redials=%d migrated=%d migrate_took=%v",
		m.acked, m.found, m.lost, m.dup, m.redials, m.migrated, m.took.Round(time.Millisecond))
}

// migrateRun sends with 4 goroutines of sync sends to a fresh topic for
// dur; halfway it moves A's route to addrB onto source addrA2 and calls
// Client.Migrate. Then it reads the topic back and compares ids.
func migrateRun(t *testing.T, r *rig, lc *labCounters, addrA, addrA2, addrB string, body []byte, dur time.Duration) (result, migrateOutcome) {
	var mo migrateOutcome
	topic := "LabMigrate_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	first, err := firstSend(r.p, topic, body, 60*time.Second)
	require.NoError(t, err, "create %s", topic)
	var idMu sync.Mutex
	acked := map[string]bool{first.MsgID: true}
	dials := r.dials.Load()

	rec := &recorder{start: time.Now()}
	deadline := rec.start.Add(dur)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := r.p.SendSync(ctx, client.NewMessage(topic, body))
				cancel()
				if err != nil || res.Status != client.SendOK {
					rec.errs.Add(1)
					continue
				}
				rec.add(time.Since(t0), 1)
				idMu.Lock()
				acked[res.MsgID] = true
				idMu.Unlock()
			}
		})
	}
	// Halfway: the device changes address.
	time.Sleep(dur / 2) // the workload's schedule, not synchronisation
	require.NoError(t, lc.routeSource(addrB, addrA2))
	defer func() { assert.NoError(t, lc.routeSource(addrB, addrA)) }()
	mctx, mcancel := context.WithTimeout(context.Background(), 20*time.Second)
	t0 := time.Now()
	mo.migrated, mo.err = r.c.Migrate(mctx)
	mo.took = time.Since(t0)
	mcancel()
	wg.Wait()
	res := rec.result()
	mo.redials = r.dials.Load() - dials

	// Read everything back.
	pc, err := consumer.NewPull(r.c, "LAB_MIGRATE_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	require.NoError(t, err)
	qs, err := pc.Queues(context.Background(), topic)
	require.NoError(t, err)
	seen := map[string]int{}
	readBy := time.Now().Add(90 * time.Second)
	for _, q := range qs {
		for next := int64(0); time.Now().Before(readBy); {
			n := 0
			pr, err := pc.PullEach(context.Background(), q, consumer.All(), next, 32, func(m *client.MessageExt) {
				seen[m.MsgID]++
				n++
			})
			if err != nil {
				continue // a pull lost to the link: ask again
			}
			next = pr.NextBeginOffset
			if n == 0 || next >= pr.MaxOffset {
				break
			}
		}
	}
	mo.acked = int64(len(acked))
	for id, k := range seen {
		mo.found += int64(k)
		if k > 1 {
			mo.dup++
			t.Logf("message %s stored %d times", id, k)
		}
	}
	for id := range acked {
		if seen[id] == 0 {
			mo.lost++
			t.Logf("acknowledged message %s not found", id)
		}
	}
	return res, mo
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
// markdown tables of docs/lab/BENCHMARKS.md: per profile and workload, each
// transport's median msg/s, p50 and p99 over the runs and QUIC's and
// NATS's ratios to TCP; then QUIC's packet counters per cell (medians);
// then the migrate runs.
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
		// counters: field name → values, one per run that had it.
		n map[string][]float64
	}
	cells := map[key]*runs{}
	var keys []key
	var migrates, fairs []map[string]string
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
		if kv["workload"] == "fair" {
			fairs = append(fairs, kv)
			continue
		}
		k := key{kv["profile"], kv["workload"], kv["transport"]}
		c := cells[k]
		if c == nil {
			c = &runs{n: map[string][]float64{}}
			cells[k] = c
			keys = append(keys, k)
		}
		rate, _ := strconv.ParseFloat(kv["msgs_per_sec"], 64)
		p50, _ := time.ParseDuration(kv["p50"])
		p99, _ := time.ParseDuration(kv["p99"])
		e, _ := strconv.ParseInt(kv["errors"], 10, 64)
		c.rate, c.p50, c.p99, c.errs = append(c.rate, rate), append(c.p50, p50), append(c.p99, p99), c.errs+e
		for _, name := range []string{"quic_sent", "quic_recv", "quic_lost", "link_ab", "link_drop_ab", "link_ba", "link_drop_ba", "rcvbuf_a", "rcvbuf_b"} {
			if v, err := strconv.ParseFloat(kv[name], 64); err == nil && v >= 0 {
				c.n[name] = append(c.n[name], v)
			}
		}
		if k.workload == "migrate" {
			migrates = append(migrates, kv)
		}
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
	// Ratios against each TCP controller the run had: "tcp" alone in runs
	// without controller variants, else tcp-cubic and tcp-bbr.
	var refs []string
	for _, k := range keys {
		if parseVariant(k.transport).base == "tcp" && !slices.Contains(refs, k.transport) {
			refs = append(refs, k.transport)
		}
	}
	ratio := func(k key, ref string) (string, string) {
		c, tc := cells[k], cells[key{k.profile, k.workload, ref}]
		if tc == nil || med(tc.rate) <= 0 || medD(tc.p99) <= 0 {
			return "", ""
		}
		return fmt.Sprintf("%.2f×", med(c.rate)/med(tc.rate)), fmt.Sprintf("%.2f×", float64(medD(c.p99))/float64(medD(tc.p99)))
	}
	head := "| profile | workload | transport | msg/s (runs) | median p50 | median p99 | errors |"
	sep := "|---|---|---|---|---|---|---|"
	for _, ref := range refs {
		head += fmt.Sprintf(" msg/s vs %s | p99 vs %s |", ref, ref)
		sep += "---|---|"
	}
	fmt.Println(head)
	fmt.Println(sep)
	for _, k := range keys {
		c := cells[k]
		line := fmt.Sprintf("| %s | %s | %s | %s | %v | %v | %d |", k.profile, k.workload, k.transport, runsOf(c.rate),
			medD(c.p50).Round(100*time.Microsecond), medD(c.p99).Round(100*time.Microsecond), c.errs)
		for _, ref := range refs {
			r, pr := "", ""
			if parseVariant(k.transport).base != "tcp" {
				r, pr = ratio(k, ref)
			}
			line += fmt.Sprintf(" %s | %s |", r, pr)
		}
		fmt.Println(line)
	}

	// QUIC's packets per cell: the client's own counters against the link's.
	fmt.Println()
	fmt.Println("| profile | workload | transport | QUIC packets sent (client) | declared lost (client) | lost % | link dropped A→B | lost beyond the link | link dropped B→A | UDP rcvbuf drops A / B |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range keys {
		c := cells[k]
		if parseVariant(k.transport).base != "quic" || len(c.n["quic_sent"]) == 0 {
			continue
		}
		sent, lost, dab := med(c.n["quic_sent"]), med(c.n["quic_lost"]), med(c.n["link_drop_ab"])
		pct := ""
		if sent > 0 {
			pct = fmt.Sprintf("%.2f %%", 100*lost/sent)
		}
		opt := func(name string) string {
			if len(c.n[name]) == 0 {
				return "?"
			}
			return strconv.FormatFloat(med(c.n[name]), 'f', 0, 64)
		}
		beyond := "?"
		if len(c.n["link_drop_ab"]) > 0 {
			beyond = strconv.FormatFloat(lost-dab, 'f', 0, 64)
		}
		fmt.Printf("| %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s / %s |\n", k.profile, k.workload, k.transport, sent, lost, pct,
			opt("link_drop_ab"), beyond, opt("link_drop_ba"), opt("rcvbuf_a"), opt("rcvbuf_b"))
	}

	// Fairness: each transport's share of the link against TCP CUBIC.
	type fairKey struct{ profile, transport string }
	fair := map[fairKey][][3]float64{}
	var fairKeys []fairKey
	for _, kv := range fairs {
		k := fairKey{kv["profile"], kv["transport"]}
		if fair[k] == nil {
			fairKeys = append(fairKeys, k)
		}
		m, _ := strconv.ParseFloat(kv["mbit"], 64)
		vm, _ := strconv.ParseFloat(kv["vs_mbit"], 64)
		sh, _ := strconv.ParseFloat(kv["share"], 64)
		fair[k] = append(fair[k], [3]float64{m, vm, sh})
	}
	if len(fairKeys) > 0 {
		fmt.Println()
		fmt.Println("| profile | flow | its Mbit/s | TCP CUBIC's Mbit/s | its share (runs) | median share |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, k := range fairKeys {
			var m, vm, sh []float64
			for _, r := range fair[k] {
				m, vm, sh = append(m, r[0]), append(vm, r[1]), append(sh, r[2])
			}
			shares := make([]string, len(sh))
			for i, x := range sh {
				shares[i] = strconv.FormatFloat(x, 'f', 2, 64)
			}
			fmt.Printf("| %s | %s | %.1f | %.1f | %s | %.2f |\n", k.profile, k.transport, med(m), med(vm), strings.Join(shares, " / "), med(sh))
		}
	}

	if len(migrates) > 0 {
		fmt.Println()
		fmt.Println("| profile | acked sends | found | lost | stored twice | redials | connections migrated | Migrate took | msg/s | p99 |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
		for _, kv := range migrates {
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", kv["profile"], kv["acked"], kv["found"], kv["lost"],
				kv["dup"], kv["redials"], kv["migrated"], kv["migrate_took"], kv["msgs_per_sec"], kv["p99"])
		}
	}
}
