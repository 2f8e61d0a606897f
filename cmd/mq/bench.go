package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
)

// latencies is a log-linear histogram of durations (HDR-style: 1% relative
// error from 1µs to about an hour), safe for concurrent recording.
type latencies struct {
	mu      sync.Mutex
	buckets map[int]int64
	n       int64
	max     time.Duration
}

func newLatencies() *latencies { return &latencies{buckets: map[int]int64{}} }

const histBase = 1.01

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return int(math.Log(us)/math.Log(histBase)) + 1
}

func bucketValue(b int) time.Duration {
	if b == 0 {
		return 0
	}
	return time.Duration(math.Pow(histBase, float64(b-1)) * float64(time.Microsecond))
}

func (l *latencies) record(d time.Duration) {
	b := bucketOf(d)
	l.mu.Lock()
	l.buckets[b]++
	l.n++
	if d > l.max {
		l.max = d
	}
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return 0
	}
	keys := make([]int, 0, len(l.buckets))
	for k := range l.buckets {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	target := int64(math.Ceil(q * float64(l.n)))
	var seen int64
	for _, k := range keys {
		seen += l.buckets[k]
		if seen >= target {
			return bucketValue(k)
		}
	}
	return l.max
}

type benchReport struct {
	Mode        string  `json:"mode"`
	Messages    int64   `json:"messages"`
	Errors      int64   `json:"errors"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"`
	P50Micros   float64 `json:"p50_us"`
	P99Micros   float64 `json:"p99_us"`
	P999Micros  float64 `json:"p999_us"`
	MaxMicros   float64 `json:"max_us"`
	Concurrency int     `json:"concurrency"`
	Size        int     `json:"size"`
	// Unknown counts requests in flight when the run stopped (its
	// duration ended or it was interrupted): the broker may or may not
	// have stored them. Messages are acknowledged (sent, for oneway),
	// Errors failed.
	Unknown     int64 `json:"unknown"`
	Interrupted bool  `json:"interrupted"`
}

func (r *benchReport) fill(n, errs, bytes int64, el time.Duration, lat *latencies) {
	r.Messages, r.Errors, r.Bytes, r.Seconds = n, errs, bytes, el.Seconds()
	r.MsgsPerSec = float64(n) / el.Seconds()
	r.MBPerSec = float64(bytes) / el.Seconds() / 1e6
	if lat != nil {
		r.P50Micros = float64(lat.quantile(0.50)) / 1e3
		r.P99Micros = float64(lat.quantile(0.99)) / 1e3
		r.P999Micros = float64(lat.quantile(0.999)) / 1e3
		r.MaxMicros = float64(lat.max) / 1e3
	}
}

func printReport(w io.Writer, r *benchReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "mode         %s\nmessages     %d (errors %d)\nelapsed      %.2fs\nthroughput   %.0f msg/s, %.2f MB/s\n",
		r.Mode, r.Messages, r.Errors, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	if r.P50Micros > 0 {
		fmt.Fprintf(w, "latency      p50 %.0fµs  p99 %.0fµs  p999 %.0fµs  max %.0fµs\n", r.P50Micros, r.P99Micros, r.P999Micros, r.MaxMicros)
	}
	fmt.Fprintln(w, summaryLine(r))
	return nil
}

// summaryLine says how a run ended: what was acknowledged, what failed
// and what was left unknown (in flight when it stopped).
func summaryLine(r *benchReport) string {
	how := "finished"
	if r.Interrupted {
		how = "interrupted"
	}
	done := "acknowledged"
	switch {
	case r.Mode == "produce-oneway":
		done = "sent (oneway: no acknowledgement)"
	case r.Mode == "consume":
		done = "received"
	}
	return fmt.Sprintf("summary      %s: %d %s, %d failed, %d unknown (in flight when it stopped)", how, r.Messages, done, r.Errors, r.Unknown)
}

// progressOut is where a run reports progress every interval: a live
// line rewritten in place on a terminal, plain lines otherwise (a pipe or
// a file gets no \r or escape codes). The zero value reports nothing.
type progressOut struct {
	w        io.Writer
	tty      bool
	interval time.Duration
}

// stderrProgress reports to stderr every second.
func stderrProgress() progressOut {
	return progressOut{w: os.Stderr, tty: isTerminal(os.Stderr), interval: time.Second}
}

// progress prints the count until stop is closed; done is closed when it
// has returned.
func progress(po progressOut, stop <-chan struct{}, done chan<- struct{}, count *atomic.Int64, start time.Time) {
	defer close(done)
	if po.w == nil {
		<-stop
		return
	}
	t := time.NewTicker(po.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			if po.tty {
				fmt.Fprint(po.w, "\r\033[K")
			}
			return
		case <-t.C:
			n := count.Load()
			line := fmt.Sprintf("%d messages, %.0f msg/s", n, float64(n)/time.Since(start).Seconds())
			if po.tty {
				fmt.Fprint(po.w, "\r\033[K"+line)
			} else {
				fmt.Fprintln(po.w, line)
			}
		}
	}
}

// benchDialer dials by address scheme: tcp:// (or a plain host:port) and
// quic:// (trusting any server certificate: a load generator, not a
// client to deploy), and nats:// with --nats-url.
func benchDialer() client.DialFunc {
	opts := []transports.Option{transports.WithInsecureQUIC()}
	if benchNATSURL != "" {
		nc := natstransport.NewConfig()
		nc.URL = benchNATSURL
		opts = append(opts, transports.WithNATS(nc))
	}
	return transports.Dialer(opts...)
}

// benchAdmin is client/admin on a client of its own (one connection per
// broker) to the name server namesrv.
func benchAdmin(namesrv string) (*clientadmin.Admin, func(), error) {
	c, err := client.New(client.WithNameServers(namesrv), client.WithDialer(benchDialer()), client.WithRequestTimeout(10*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return clientadmin.New(c), func() { _ = c.Close() }, nil
}

// benchNATSURL, when set (mq bench --nats-url), enables nats:// addresses.
var benchNATSURL string

// withScheme gives a broker address from a route the scheme of the name
// server it came from, so quic:// name servers mean QUIC to brokers too.
func withScheme(namesrv, addr string) string {
	if !strings.Contains(namesrv, "://") || strings.Contains(addr, "://") {
		return addr
	}
	scheme, _ := transport.SplitScheme(namesrv)
	return scheme + "://" + addr
}

// writeQueues resolves topic on the name server into (broker address,
// queue id) pairs; it creates the topic through TBW102 when it is missing.
func writeQueues(ctx context.Context, a *clientadmin.Admin, namesrv, topic string) ([]benchQueue, error) {
	for _, t := range []string{topic, protocol.AutoCreateTopic} {
		r, err := a.Route(ctx, t)
		var be *client.BrokerError
		switch {
		case errors.Is(err, client.ErrNoRoute):
			continue
		case errors.As(err, &be):
			return nil, fmt.Errorf("route of %s: code %d %s", t, be.Code, be.Remark)
		case err != nil:
			return nil, fmt.Errorf("route of %s: %w", t, err)
		}
		rd := r.Data
		addrs := map[string]string{}
		for _, bd := range rd.BrokerDatas {
			addrs[bd.BrokerName] = bd.BrokerAddrs[0]
		}
		var out []benchQueue
		for _, qd := range rd.QueueDatas {
			n := qd.WriteQueueNums
			if t == protocol.AutoCreateTopic && n > 4 {
				n = 4
			}
			for q := int32(0); q < n; q++ {
				if a := addrs[qd.BrokerName]; a != "" {
					out = append(out, benchQueue{addr: withScheme(namesrv, a), id: q})
				}
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("topic %s has no route and TBW102 is not served", topic)
}

type benchQueue struct {
	addr string
	id   int32
}

type produceFlags struct {
	namesrv     string
	topic       string
	size        int
	concurrency int
	count       int64
	duration    time.Duration
	mode        string
	output      string
	progress    progressOut
}

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Load generators and disk measurements"}
	cmd.PersistentFlags().StringVar(&benchNATSURL, "nats-url", "", "NATS server for nats:// name-server addresses (e.g. nats://127.0.0.1:4222)")
	cmd.AddCommand(benchProduceCmd(), benchConsumeCmd(), benchDiskCmd(), benchStoreCmd())
	return cmd
}

func defaultNamesrv() string {
	if v := os.Getenv("QUIVER_NAMESRV"); v != "" {
		return v
	}
	return "127.0.0.1:9876"
}

func benchProduceCmd() *cobra.Command {
	f := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Send messages as fast as the broker takes them and report throughput and latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.progress = stderrProgress()
			r, err := benchProduce(cmd.Context(), f)
			if err != nil {
				return err
			}
			return printReport(cmd.OutOrStdout(), r, f.output == "json")
		},
	}
	cmd.Flags().StringVar(&f.namesrv, "namesrv", defaultNamesrv(), "name server address (env QUIVER_NAMESRV)")
	cmd.Flags().StringVar(&f.topic, "topic", "BenchmarkTest", "topic")
	cmd.Flags().IntVar(&f.size, "size", 1024, "body size in bytes")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 4, "concurrent producers (one connection per producer)")
	cmd.Flags().Int64Var(&f.count, "count", 100000, "messages to send (0 = until --duration)")
	cmd.Flags().DurationVar(&f.duration, "duration", 30*time.Second, "longest run")
	cmd.Flags().StringVar(&f.mode, "mode", "sync", "sync | async (32 in flight per producer) | oneway")
	cmd.Flags().StringVar(&f.output, "output", "table", "table | json")
	return cmd
}

func benchProduce(parent context.Context, f *produceFlags) (*benchReport, error) {
	if f.concurrency < 1 || f.size < 1 {
		return nil, errors.New("bench: --concurrency and --size must be positive")
	}
	ctx, cancel := context.WithTimeout(parent, f.duration)
	defer cancel()
	clients := make([]*clientadmin.Admin, f.concurrency)
	for i := range clients {
		a, closeClient, err := benchAdmin(f.namesrv)
		if err != nil {
			return nil, err
		}
		defer closeClient() //nolint:gocritic // every client stays open until the bench returns
		clients[i] = a
	}
	queues, err := writeQueues(ctx, clients[0], f.namesrv, f.topic)
	if err != nil {
		return nil, err
	}
	body := make([]byte, f.size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	lat := newLatencies()
	var sent, errs, unknown, budget atomic.Int64
	budget.Store(f.count)
	take := func() bool { return f.count == 0 || budget.Add(-1) >= 0 }
	start := time.Now()
	stop, progressDone := make(chan struct{}), make(chan struct{})
	go progress(f.progress, stop, progressDone, &sent, start)
	var wg sync.WaitGroup
	inflight := 1
	if f.mode == "async" {
		inflight = 32
	}
	for p := 0; p < f.concurrency; p++ {
		for k := 0; k < inflight; k++ {
			wg.Add(1)
			go func(p, k int) {
				defer wg.Done()
				c := clients[p]
				for i := p*inflight + k; ctx.Err() == nil && take(); i += f.concurrency * inflight {
					q := queues[i%len(queues)]
					sr := clientadmin.SendRequest{Group: "BENCH_PRODUCER", Topic: f.topic, QueueID: int(q.id), Body: body}
					t0 := time.Now()
					if f.mode == "oneway" {
						if err := c.SendDirectOneway(ctx, q.addr, sr); err != nil {
							if ctx.Err() != nil {
								unknown.Add(1) // written or not when the run stopped
							} else {
								errs.Add(1)
							}
							continue
						}
						sent.Add(1)
						continue
					}
					rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := c.SendDirect(rctx, q.addr, sr)
					rcancel()
					if err != nil && ctx.Err() != nil && !clientadmin.IsRefused(err) {
						unknown.Add(1) // in flight when the run stopped: stored or not
						continue
					}
					if err != nil {
						errs.Add(1)
						continue
					}
					lat.record(time.Since(t0))
					sent.Add(1)
				}
			}(p, k)
		}
	}
	wg.Wait()
	close(stop)
	<-progressDone
	el := time.Since(start)
	r := &benchReport{Mode: "produce-" + f.mode, Concurrency: f.concurrency, Size: f.size, Unknown: unknown.Load(), Interrupted: parent.Err() != nil}
	n := sent.Load()
	var l *latencies
	if f.mode != "oneway" {
		l = lat
	}
	r.fill(n, errs.Load(), n*int64(f.size), el, l)
	return r, nil
}

func benchDiskCmd() *cobra.Command {
	var dir, output string
	var size int64
	var block int
	cmd := &cobra.Command{
		Use:   "disk",
		Short: "Measure the raw sequential-write bandwidth and fdatasync latency of a directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := benchDisk(dir, size, block)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sequential write  %.1f MB/s (%d MiB in %d KiB blocks, fsync at end)\nfdatasync latency p50 %.0fµs  p99 %.0fµs  (4 KiB appends)\n",
				res.SeqWriteMBps, size>>20, block>>10, res.FsyncP50Micros, res.FsyncP99Micros)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "./data", "directory to measure (a temporary file is written and removed)")
	cmd.Flags().Int64Var(&size, "size", 512<<20, "bytes to write")
	cmd.Flags().IntVar(&block, "block", 1<<20, "write size")
	cmd.Flags().StringVar(&output, "output", "table", "table | json")
	return cmd
}

type diskResult struct {
	SeqWriteMBps   float64 `json:"seq_write_mb_per_sec"`
	FsyncP50Micros float64 `json:"fdatasync_p50_us"`
	FsyncP99Micros float64 `json:"fdatasync_p99_us"`
}

// benchDisk writes size bytes sequentially (then fsyncs, so the figure is
// what reaches the device) and times 200 small append+fdatasync rounds.
func benchDisk(dir string, size int64, block int) (*diskResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf(".mq-bench-disk-%d", os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, block)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for written := int64(0); written < size; written += int64(block) {
		if _, err := f.Write(buf); err != nil {
			return nil, fmt.Errorf("bench: write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("bench: fsync: %w", err)
	}
	res := &diskResult{SeqWriteMBps: float64(size) / time.Since(start).Seconds() / 1e6}
	lat := newLatencies()
	small := buf[:4096]
	for i := 0; i < 200; i++ {
		if _, err := f.Write(small); err != nil {
			return nil, fmt.Errorf("bench: write: %w", err)
		}
		t0 := time.Now()
		if err := fdatasync(f); err != nil {
			return nil, fmt.Errorf("bench: fdatasync: %w", err)
		}
		lat.record(time.Since(t0))
	}
	res.FsyncP50Micros = float64(lat.quantile(0.5)) / 1e3
	res.FsyncP99Micros = float64(lat.quantile(0.99)) / 1e3
	return res, nil
}

type consumeFlags struct {
	namesrv     string
	topic       string
	group       string
	concurrency int
	count       int64
	batch       int
	duration    time.Duration
	output      string
	progress    progressOut
}

func benchConsumeCmd() *cobra.Command {
	f := &consumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Pull a topic's backlog from every queue with N consumers and report throughput and pull latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.progress = stderrProgress()
			r, err := benchConsume(cmd.Context(), f)
			if err != nil {
				return err
			}
			return printReport(cmd.OutOrStdout(), r, f.output == "json")
		},
	}
	cmd.Flags().StringVar(&f.namesrv, "namesrv", defaultNamesrv(), "name server address (env QUIVER_NAMESRV)")
	cmd.Flags().StringVar(&f.topic, "topic", "BenchmarkTest", "topic")
	cmd.Flags().StringVar(&f.group, "group", "BENCH_CONSUMER", "consumer group named in pulls (nothing is committed)")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 4, "consumers (one connection each); queues are shared out among them")
	cmd.Flags().Int64Var(&f.count, "count", 0, "stop after this many messages (0 = when every queue is drained)")
	cmd.Flags().IntVar(&f.batch, "batch", 32, "messages per pull")
	cmd.Flags().DurationVar(&f.duration, "duration", 5*time.Minute, "longest run")
	cmd.Flags().StringVar(&f.output, "output", "table", "table | json")
	return cmd
}

// benchConsume reads every queue of the topic from its min offset to the
// max it had at the start; each pull is timed.
func benchConsume(parent context.Context, f *consumeFlags) (*benchReport, error) {
	if f.concurrency < 1 || f.batch < 1 {
		return nil, errors.New("bench: --concurrency and --batch must be positive")
	}
	ctx, cancel := context.WithTimeout(parent, f.duration)
	defer cancel()
	a := newAdmin(f.namesrv, 10*time.Second)
	a.dial = benchDialer()
	defer a.Close()
	brokers, ok, err := a.route(ctx, f.topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("bench: topic %s does not exist", f.topic)
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	type span struct {
		addr     string
		id       int32
		from, to int64
	}
	var spans []span
	for _, bq := range brokers {
		for q := int32(0); q < bq.readQueues; q++ {
			s := span{addr: bq.addr, id: q}
			if s.from, err = lib.MinOffset(ctx, bq.addr, f.topic, int(q)); err != nil {
				return nil, err
			}
			if s.to, err = lib.MaxOffset(ctx, bq.addr, f.topic, int(q)); err != nil {
				return nil, err
			}
			if s.to > s.from {
				spans = append(spans, s)
			}
		}
	}
	lat := newLatencies()
	var got, errs, unknown, bytes, budget atomic.Int64
	budget.Store(f.count)
	start := time.Now()
	stop, progressDone := make(chan struct{}), make(chan struct{})
	go progress(f.progress, stop, progressDone, &got, start)
	var wg sync.WaitGroup
	for c := 0; c < f.concurrency; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cl, closeClient, err := benchAdmin(f.namesrv)
			if err != nil {
				errs.Add(1)
				return
			}
			defer closeClient()
			for i := c; i < len(spans); i += f.concurrency {
				s := spans[i]
				for off := s.from; off < s.to && ctx.Err() == nil && (f.count == 0 || budget.Load() > 0); {
					t0 := time.Now()
					rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
					res, err := cl.Pull(rctx, s.addr, clientadmin.PullRequest{Group: f.group, Topic: f.topic, QueueID: int(s.id), Offset: off, MaxNums: f.batch})
					rcancel()
					if clientadmin.IsRefused(err) {
						lat.record(time.Since(t0))
						break
					}
					if err != nil {
						if ctx.Err() != nil {
							unknown.Add(1) // a pull cut short: nothing is committed
						} else {
							errs.Add(1)
						}
						break
					}
					lat.record(time.Since(t0))
					if res.Status == clientadmin.PullFound {
						n := countRecords(res.Body)
						got.Add(int64(n))
						budget.Add(-int64(n))
						bytes.Add(int64(len(res.Body)))
					} else if res.Status != clientadmin.PullNoMatchedMsg {
						break
					}
					if res.NextBeginOffset <= off {
						break
					}
					off = res.NextBeginOffset
				}
			}
		}(c)
	}
	wg.Wait()
	close(stop)
	<-progressDone
	r := &benchReport{Mode: "consume", Concurrency: f.concurrency, Size: f.batch, Unknown: unknown.Load(), Interrupted: parent.Err() != nil}
	r.fill(got.Load(), errs.Load(), bytes.Load(), time.Since(start), lat)
	return r, nil
}

// countRecords counts the stored records of a pull body (each starts with
// its 4-byte big-endian total size).
func countRecords(b []byte) int {
	n := 0
	for len(b) >= 4 {
		size := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
		if size <= 0 || size > len(b) {
			break
		}
		b = b[size:]
		n++
	}
	return n
}
