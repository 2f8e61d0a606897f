// Command peers runs the same workloads against Quiver (`mq dev`, built
// from this tree, driven by Quiver's client library) and NATS JetStream
// (nats-server with file storage, driven by nats.go), alternating A B A B
// so machine drift cancels, and prints a markdown table of min/median/max
// over rounds with the Quiver/JetStream ratio (issue 13).
//
//	cd bench/peers && go run . -quick -rounds 3
//	cd bench/peers && go run . -write ../../docs/lab/BENCHMARKS.md
//	cd bench/peers && go run . -only 'official client: end-to-end' -e2etrace
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

type flags struct {
	mq, natsBin string
	n           int64
	dur         time.Duration
	latDur      time.Duration
	rate        int
	grpcRate    int
	rounds      int
	window      int
	quick       bool
	only        string
	write       string
	pprof       string
	keep        bool
	cpuprofile  string
	e2etrace    bool
}

func main() {
	var f flags
	flag.StringVar(&f.mq, "mq", "", "mq binary (default: go build ../../cmd/mq from the tree)")
	flag.StringVar(&f.natsBin, "nats-server", "", "nats-server binary (default: go build github.com/nats-io/nats-server/v2 at the pinned version)")
	flag.Int64Var(&f.n, "n", 1_000_000, "messages per publish/backlog run")
	flag.DurationVar(&f.dur, "t", 30*time.Second, "longest publish run")
	flag.DurationVar(&f.latDur, "latency-t", 10*time.Second, "length of the fixed-rate latency run")
	flag.IntVar(&f.rate, "rate", 10_000, "messages per second of the latency run")
	flag.IntVar(&f.grpcRate, "grpc-rate", 1000, "messages per second of the gRPC 5.x client's end-to-end run (0: no such run)")
	flag.IntVar(&f.rounds, "rounds", 3, "rounds (each runs every workload on both systems)")
	flag.IntVar(&f.window, "window", 256, "async publishes in flight per producer")
	flag.BoolVar(&f.quick, "quick", false, "smoke run: 50,000 messages / 5 s (latency run 3 s)")
	flag.StringVar(&f.only, "only", "", "run only workloads whose name contains this (e.g. publish, backlog, latency, fan-out, sync-durable, gRPC); several separated by |")
	flag.StringVar(&f.write, "write", "", "replace the <!-- peers:begin --> ... <!-- peers:end --> section of this file with the table")
	flag.StringVar(&f.pprof, "pprof", "", "start mq dev with --pprof ADDR (profiling; not for the recorded table)")
	flag.BoolVar(&f.keep, "keep", false, "keep the temporary directory")
	flag.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the harness (the clients) to this file")
	flag.BoolVar(&f.e2etrace, "e2etrace", false, "build mq with -tags e2etrace and print the broker's per-message timeline of each official-client end-to-end run (e.g. -only end-to-end; figures then include the tracing cost)")
	flag.Parse()
	if f.quick {
		f.n, f.dur, f.latDur = 50_000, 5*time.Second, 3*time.Second
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	quietOfficialClient()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, f)
	cancel()
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// label names a target in the log lines (the client as well as the
// server).
func label(t target) string {
	if l, ok := t.(interface{ label() string }); ok {
		return l.label()
	}
	return t.name()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s [load %s] %s\n", time.Now().Format("15:04:05"), loadAvg(), fmt.Sprintf(format, a...))
}

// metric is one row of the table: a figure measured on both systems.
type metric struct {
	name, unit  string
	lowerBetter bool
	target      float64 // ratio Quiver/JetStream to reach; 0 = none
	vals        map[string][]float64
}

type report struct {
	rows  []*metric
	index map[string]*metric
	fails []string
}

func (r *report) add(name, unit string, lowerBetter bool, target float64, sys string, v float64) {
	if r.index == nil {
		r.index = map[string]*metric{}
	}
	m := r.index[name]
	if m == nil {
		m = &metric{name: name, unit: unit, lowerBetter: lowerBetter, target: target, vals: map[string][]float64{}}
		r.index[name] = m
		r.rows = append(r.rows, m)
	}
	m.vals[sys] = append(m.vals[sys], v)
}

func run(ctx context.Context, f flags) error {
	tmp, err := os.MkdirTemp("", "quiver-peers-")
	if err != nil {
		return err
	}
	if !f.keep {
		defer os.RemoveAll(tmp)
	}
	var root string
	if f.mq == "" || f.natsBin == "" {
		if root, err = repoRoot(); err != nil {
			return err
		}
	}
	if f.mq == "" {
		f.mq = filepath.Join(tmp, "mq")
		var tags []string
		if f.e2etrace {
			tags = append(tags, "e2etrace")
		}
		logf("building mq from %s (tags %v)", root, tags)
		if err := build(ctx, root, f.mq, "./cmd/mq", tags...); err != nil {
			return err
		}
	}
	if f.natsBin == "" {
		f.natsBin = filepath.Join(tmp, "nats-server")
		logf("building nats-server")
		if err := build(ctx, filepath.Join(root, "bench", "peers"), f.natsBin, "github.com/nats-io/nats-server/v2"); err != nil {
			return err
		}
	}
	started := time.Now()
	loadStart := loadAvg()
	logf("measuring raw loopback TCP and disk")
	tcpMBps, err := loopbackMBps(2 * time.Second)
	if err != nil {
		return err
	}
	diskMBps, fsyncP50, err := diskBench(ctx, f.mq, tmp, 256<<20)
	if err != nil {
		return err
	}
	logf("loopback %.0f MB/s, disk %.0f MB/s, fdatasync p50 %.0f µs", tcpMBps, diskMBps, fsyncP50)

	rep := &report{}
	var loads []string
	for round := 0; round < f.rounds; round++ {
		loads = append(loads, loadAvg())
		for _, syncMode := range []bool{false, true} {
			if err := runRound(ctx, f, tmp, round, syncMode, rep); err != nil {
				return err
			}
		}
	}
	loads = append(loads, loadAvg())
	md := render(f, rep, env{
		cores: runtime.NumCPU(), tcpMBps: tcpMBps, diskMBps: diskMBps, fsyncP50: fsyncP50,
		loads: loads, loadStart: loadStart, took: time.Since(started), date: time.Now().UTC(),
	})
	fmt.Println(md)
	if f.write != "" {
		return writeSection(f.write, md)
	}
	return nil
}

// want says whether -only selects the workload name: empty selects all,
// else any of its |-separated parts contained in name.
func (f flags) want(name string) bool {
	if f.only == "" {
		return true
	}
	for _, part := range strings.Split(f.only, "|") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// runRound starts both servers (fresh directories), runs every workload
// of the durability mode on both, the order alternating with the round,
// and stops them.
func runRound(ctx context.Context, f flags, tmp string, round int, syncMode bool, rep *report) (err error) {
	mode := "async"
	if syncMode {
		mode = "sync"
	}
	if !syncMode && !f.anyAsync() || syncMode && !f.want("sync-durable") {
		return nil
	}
	dir := filepath.Join(tmp, fmt.Sprintf("round%d-%s", round, mode))
	defer os.RemoveAll(dir)
	logf("round %d (%s durability): starting servers", round+1, mode)
	var tr *tracer
	if f.e2etrace && !syncMode {
		if tr, err = newTracer(filepath.Join(dir, "quiver-trace"), f.latDur); err != nil {
			return err
		}
	}
	q, err := startQuiverTraced(ctx, f.mq, filepath.Join(dir, "quiver"), syncMode, f.pprof, tr)
	if err != nil {
		return err
	}
	defer q.close()
	n, err := startNATS(ctx, f.natsBin, filepath.Join(dir, "nats"), syncMode)
	if err != nil {
		return err
	}
	defer n.close()
	// o drives the same Quiver server with the official client; its rows
	// are named "official client: ..." and compared with nats.go on
	// JetStream.
	o := &officialTarget{quiverTarget: q}
	ob := &officialTarget{quiverTarget: q, batch: 32}
	// eachOf runs fn on a Quiver target and JetStream, the order
	// alternating with the round; a failed run is logged and counted in
	// the table (the other system's figure still stands), only ctrl-C
	// stops the whole run.
	eachOf := func(qt target, fn func(t target) error) error {
		order := []target{qt, n}
		if round%2 == 1 {
			order = []target{n, qt}
		}
		for _, t := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(t); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				logf("  FAILED %s: %v", label(t), err)
				msg := strings.ReplaceAll(err.Error(), "\n", " ")
				if len(msg) > 200 {
					msg = msg[:200] + "…"
				}
				rep.fails = append(rep.fails, fmt.Sprintf("round %d, %s: %s", round+1, t.name(), msg))
			}
		}
		return nil
	}
	each := func(fn func(t target) error) error { return eachOf(q, fn) }
	withTopic := func(t target, tag string, fn func(topic string) error) error {
		topic, err := t.newTopic(ctx, tag)
		if err != nil {
			return fmt.Errorf("%s: topic: %w", t.name(), err)
		}
		defer t.dropTopic(context.WithoutCancel(ctx), topic)
		return fn(topic)
	}
	pubOn := func(qt target, name string, s pubSpec, tgt, cpuTgt float64) error {
		if !f.want(name) {
			return nil
		}
		return eachOf(qt, func(t target) error {
			return withTopic(t, "pub", func(topic string) error {
				r, err := publish(ctx, t, topic, s)
				if err != nil {
					return err
				}
				v := float64(r.msgs) / r.el.Seconds()
				srvUs := float64(r.srvCPU.Microseconds()) / float64(r.msgs)
				cliUs := float64(r.cliCPU.Microseconds()) / float64(r.msgs)
				srvSys := float64(r.srvSys) / float64(r.msgs)
				logf("  %-62s %-26s %9.0f msg/s %7.1f MB/s (%d msgs in %.1fs, %d errors; CPU µs/msg server %.1f client %.1f; syscalls/msg server %.2f client %.2f; p50 %v)",
					name, label(t), v, v*float64(s.size)/1e6, r.msgs, r.el.Seconds(), r.errs, srvUs, cliUs, srvSys, float64(r.cliSys)/float64(r.msgs), r.p50)
				if r.firstErr != nil {
					logf("    first of %d errors: %v", r.errs, r.firstErr)
				}
				rep.add(name, "msg/s", false, tgt, t.name(), v)
				if r.p50 > 0 {
					rep.add(name+": send p50", "µs", true, 0, t.name(), float64(r.p50)/1e3)
				}
				if cpuTgt > 0 || s.async && s.producers == 8 && s.size == 1024 {
					rep.add(name+": server CPU per message", "µs", true, cpuTgt, t.name(), srvUs)
					rep.add(name+": client CPU per message", "µs", true, 0, t.name(), cliUs)
					rep.add(name+": server read+write syscalls per message", "calls", true, 0, t.name(), srvSys)
				}
				if s.size >= 64<<10 && s.async && !syncMode {
					rep.add(name+": bandwidth", "MB/s", false, 0, t.name(), v*float64(s.size)/1e6)
				}
				return nil
			})
		})
	}
	pub := func(name string, s pubSpec, tgt float64) error { return pubOn(q, name, s, tgt, 0) }
	// official runs the official client's send workloads (issue 24).
	official := func(prefix string, cpuTgt float64) error {
		for _, s := range []pubSpec{
			{size: 1024, producers: 1},
			{size: 1024, producers: 1, goroutines: 16},
			{size: 1024, producers: 1, goroutines: 64},
			{size: 1024, producers: 8, async: true},
		} {
			if syncMode && s.goroutines != 16 && !s.async {
				continue
			}
			s.window, s.n, s.dur = f.window, f.n, f.dur
			tg := 0.0
			if s.goroutines == 16 || s.async {
				tg = cpuTgt
			}
			if err := pubOn(o, prefix+s.String(), s, 0, tg); err != nil {
				return err
			}
		}
		return nil
	}
	if syncMode {
		for _, s := range []pubSpec{
			{size: 1024, producers: 8, async: true},
			{size: 1024, producers: 8, async: false},
			{size: 1024, producers: 1, async: false},
		} {
			s.window, s.n, s.dur = f.window, f.n, f.dur
			tg := 0.0
			if s.producers == 8 {
				tg = 5
			}
			if err := pub("sync-durable "+s.String(), s, tg); err != nil {
				return err
			}
		}
		return official("official client, sync-durable: ", 0)
	}
	if err := official("official client: ", 1); err != nil {
		return err
	}
	// The 5.x client over gRPC (issue 28, grpc.go).
	if err := grpcRows(ctx, f, tmp, q, eachOf, withTopic, rep); err != nil {
		return err
	}
	for _, size := range []int{1024, 128} {
		for _, producers := range []int{1, 8} {
			for _, async := range []bool{true, false} {
				s := pubSpec{size: size, producers: producers, async: async, window: f.window, n: f.n, dur: f.dur}
				tg := 0.0
				if size == 1024 && producers == 8 && async {
					tg = 1.5
				}
				if err := pub(s.String(), s, tg); err != nil {
					return err
				}
			}
		}
	}
	for _, consumers := range []int{1, 4} {
		name := fmt.Sprintf("backlog consume 1 KiB, %d consumer(s)", consumers)
		if !f.want(name) {
			continue
		}
		if err := each(func(t target) error {
			return withTopic(t, "backlog", func(topic string) error {
				have, err := fill(ctx, t, topic, f.n, 1024, f.window, 4*f.dur)
				if err != nil {
					return err
				}
				v, err := drain(ctx, t, topic, have, consumers, 4*f.dur, false)
				if err != nil {
					return err
				}
				logf("  %-55s %-9s %9.0f msg/s (%d msgs)", name, t.name(), v, have)
				rep.add(name, "msg/s", false, 2, t.name(), v)
				return nil
			})
		}); err != nil {
			return err
		}
	}
	// Big bodies (issue 24): bandwidth, not per-message cost; random
	// bytes, 4 producers, a window of 64 MiB in flight per producer at
	// most.
	for _, size := range []int{64 << 10, 1 << 20} {
		s := pubSpec{size: size, producers: 4, async: true, window: max(1, min(f.window, (4<<20)/size)), n: f.n, dur: f.dur, random: true}
		if err := pub(s.String(), s, 0); err != nil {
			return err
		}
		if err := pubOn(o, "official client: "+s.String(), s, 0, 0); err != nil {
			return err
		}
	}
	for _, ot := range []*officialTarget{o, ob} {
		name := "official client: backlog consume 1 KiB, 1 push consumer, default options"
		if ot.batch > 0 {
			name = fmt.Sprintf("official client: backlog consume 1 KiB, 1 push consumer, batch %d", ot.batch)
		}
		if !f.want(name) {
			continue
		}
		if err := eachOf(ot, func(t target) error {
			return withTopic(t, "backlog", func(topic string) error {
				// filled with Quiver's own client (fast, same bytes)
				ft := t
				if x, ok := t.(*officialTarget); ok {
					ft = x.quiverTarget
				}
				want := min(f.n, 200_000)
				have, err := fill(ctx, ft, topic, want, 1024, f.window, 4*f.dur)
				if err != nil {
					return err
				}
				srv0 := t.serverCPU()
				v, err := drain(ctx, t, topic, have, 1, 4*f.dur, true)
				if err != nil {
					return err
				}
				srvUs := float64((t.serverCPU() - srv0).Microseconds()) / float64(have)
				logf("  %-62s %-26s %9.0f msg/s (%d msgs; server CPU µs/msg %.1f)", name, label(t), v, have, srvUs)
				rep.add(name, "msg/s", false, 0, t.name(), v)
				rep.add(name+": server CPU per message", "µs", true, 0, t.name(), srvUs)
				return nil
			})
		}); err != nil {
			return err
		}
	}
	// The official push consumer end to end (issue 44): its defaults
	// (PullBatchSize 32, one message per consume call) and batch 32 (32
	// per consume call), at 5,000 and 20,000 msg/s; with -e2etrace each
	// Quiver run prints the broker's timeline of its window.
	for _, ot := range []*officialTarget{o, ob} {
		for _, rate := range e2eTraceRates {
			name := fmt.Sprintf("official client: end-to-end at %s msg/s, 1 KiB", withThousands(fmt.Sprint(rate)))
			tgt := [4]float64{1.2, 1, 1, 1.2} // p50, p99, p999, server CPU per message
			if ot.batch > 0 {
				name += fmt.Sprintf(", batch %d", ot.batch)
				tgt = [4]float64{}
			}
			if !f.want(name) && !f.want("latency") {
				continue
			}
			if err := eachOf(ot, func(t target) error {
				return withTopic(t, "e2e", func(topic string) error {
					srv0 := t.serverCPU()
					p50, p99, p999, err := latency(ctx, t, topic, rate, f.latDur, 1024)
					if err != nil {
						return err
					}
					srvUs := float64((t.serverCPU() - srv0).Microseconds()) / (float64(rate) * f.latDur.Seconds())
					logf("  %-62s %-26s p50 %v p99 %v p999 %v (server CPU µs/msg %.1f)", name, label(t), p50, p99, p999, srvUs)
					rep.add(name+": p50", "µs", true, tgt[0], t.name(), float64(p50)/1e3)
					rep.add(name+": p99", "µs", true, tgt[1], t.name(), float64(p99)/1e3)
					rep.add(name+": p999", "µs", true, tgt[2], t.name(), float64(p999)/1e3)
					rep.add(name+": server CPU per message", "µs", true, tgt[3], t.name(), srvUs)
					if x, ok := t.(*officialTarget); ok && x.trace != nil {
						tl, err := x.endWindow(ctx)
						if err != nil {
							return err
						}
						writeTimeline(os.Stdout, fmt.Sprintf("%s, %s, round %d (client p50 %v, p99 %v, p999 %v)",
							name, label(t), round+1, p50, p99, p999), tl)
					}
					return nil
				})
			}); err != nil {
				return err
			}
		}
	}
	if name := fmt.Sprintf("latency at %d msg/s, 1 KiB", f.rate); f.want(name) || f.want("latency") {
		if err := each(func(t target) error {
			return withTopic(t, "latency", func(topic string) error {
				p50, p99, p999, err := latency(ctx, t, topic, f.rate, f.latDur, 1024)
				if err != nil {
					return err
				}
				logf("  %-62s %-26s p50 %v p99 %v p999 %v", name, label(t), p50, p99, p999)
				rep.add(name+": p50", "µs", true, 0, t.name(), float64(p50)/1e3)
				rep.add(name+": p99", "µs", true, 0.7, t.name(), float64(p99)/1e3)
				rep.add(name+": p999", "µs", true, 0, t.name(), float64(p999)/1e3)
				return nil
			})
		}); err != nil {
			return err
		}
	}
	if name := "fan-out 1 KiB, 1 producer, 8 groups (deliveries/s)"; f.want(name) {
		if err := each(func(t target) error {
			return withTopic(t, "fanout", func(topic string) error {
				nf := f.n / 4
				v, err := fanout(ctx, t, topic, nf, 1024, 8, f.window, 4*f.dur)
				if err != nil {
					return err
				}
				logf("  %-55s %-9s %9.0f deliveries/s (%d msgs × 8)", name, t.name(), v, nf)
				rep.add(name, "msg/s", false, 0, t.name(), v)
				return nil
			})
		}); err != nil {
			return err
		}
	}
	return nil
}

func (f flags) anyAsync() bool {
	if f.only == "" {
		return true
	}
	for _, part := range strings.Split(f.only, "|") {
		if part != "" && !strings.Contains(part, "sync-durable") {
			return true
		}
	}
	return false
}

type env struct {
	cores             int
	tcpMBps, diskMBps float64
	fsyncP50          float64
	loads             []string
	loadStart         string
	took              time.Duration
	date              time.Time
}

func stats(v []float64) (lo, med, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0, 0
	}
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[0], m, s[len(s)-1]
}

func fmtNum(v float64) string {
	switch {
	case v >= 100:
		return withThousands(fmt.Sprintf("%.0f", v))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func withThousands(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func render(f flags, r *report, e env) string {
	var b strings.Builder
	mode := "full"
	if f.quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "Command: `cd bench/peers && go run . %s`\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "Run %s UTC, %s mode: up to %s messages or %s per publish run, %d rounds, async window %d per producer, harness took %s.\n\n",
		e.date.Format("2006-01-02 15:04"), mode, withThousands(fmt.Sprint(f.n)), f.dur, f.rounds, f.window, e.took.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %d cores (%s/%s), load average (1/5/15 min) at the start %s, before each round and at the end: %s. "+
		"The machine is shared with other engineers' builds and tests, so every figure is noisy.\n\n",
		e.cores, runtime.GOOS, runtime.GOARCH, e.loadStart, strings.Join(e.loads, " → "))
	fmt.Fprintf(&b, "Physical limits measured in the same run: loopback TCP %s MB/s (one socket pair, 1 MiB writes), "+
		"disk sequential write %s MB/s and fdatasync p50 %s µs (`mq bench disk`).\n\n",
		fmtNum(e.tcpMBps), fmtNum(e.diskMBps), fmtNum(e.fsyncP50))
	if f.e2etrace {
		b.WriteString("mq was built with -tags e2etrace (-e2etrace): Quiver's figures include the cost of recording its timeline.\n\n")
	}
	b.WriteString("| workload | Quiver min / **median** / max | JetStream min / **median** / max | ratio Q/J (median) | target | met |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, m := range r.rows {
		ql, qm, qh := stats(m.vals["Quiver"])
		jl, jm, jh := stats(m.vals["JetStream"])
		ratio := 0.0
		if jm > 0 {
			ratio = qm / jm
		}
		tgt, met := "", ""
		if m.target > 0 {
			if m.lowerBetter {
				tgt = fmt.Sprintf("≤ %.1f×", m.target)
				met = yesNo(ratio <= m.target)
			} else {
				tgt = fmt.Sprintf("≥ %.1f×", m.target)
				met = yesNo(ratio >= m.target)
			}
			if len(m.vals["Quiver"]) == 0 || len(m.vals["JetStream"]) == 0 {
				met = "" // no run on one side: no ratio to judge
			}
		}
		runs := ""
		if nq, nj := len(m.vals["Quiver"]), len(m.vals["JetStream"]); nq != f.rounds || nj != f.rounds {
			runs = fmt.Sprintf(" [%d/%d runs]", nq, nj)
		}
		fmt.Fprintf(&b, "| %s (%s)%s | %s / **%s** / %s | %s / **%s** / %s | %.2f× | %s | %s |\n", m.name, m.unit, runs,
			fmtNum(ql), fmtNum(qm), fmtNum(qh), fmtNum(jl), fmtNum(jm), fmtNum(jh), ratio, tgt, met)
		if strings.HasSuffix(m.name, ": bandwidth") {
			fmt.Fprintf(&b, "| ↳ as a fraction of loopback TCP (%s MB/s) | %.0f%% | %.0f%% | | ≥ 50%% (Quiver) | %s |\n",
				fmtNum(e.tcpMBps), 100*qm/e.tcpMBps, 100*jm/e.tcpMBps, yesNo(qm >= e.tcpMBps/2))
		}
	}
	if len(r.fails) > 0 {
		b.WriteString("\nFailed runs (left out of the figures; `[q/j runs]` above counts the runs that made it):\n\n")
		for _, f := range r.fails {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

const (
	beginMark = "<!-- peers:begin -->"
	endMark   = "<!-- peers:end -->"
)

// writeSection replaces the text between the markers (appending a
// heading and the markers when the file has none).
func writeSection(path, md string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	block := beginMark + "\n" + md + endMark
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + s[j+len(endMark):]
	default:
		if !strings.HasSuffix(s, "\n") && s != "" {
			s += "\n"
		}
		s += "\n## Against NATS JetStream (issue 13)\n\n`cd bench/peers && go run . -write ../../docs/lab/BENCHMARKS.md`\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
