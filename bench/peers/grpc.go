package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The 5.x client rows (issue 28): the official RocketMQ 5 Node.js client
// (rocketmq-client-nodejs, gRPC) against `mq dev`'s gRPC endpoint, the
// same shapes by nats.go on JetStream in the other column. The Go 5.x
// client is not on the module proxy; the Node.js one is on npm, and CI
// installs it for modules/grpc's interop tests (.ci/run).
//
// The client runs as a child process (testdata/grpc_bench.js, embedded):
// it sets up its clients, prints {"event":"ready"}, waits for "go" on
// stdin, runs the timed part and prints {"event":"result",...}; the
// harness reads the broker's CPU time at "go" and at the result.

//go:embed testdata/grpc_bench.js
var grpcBenchJS []byte

// nodeClientVersion is the rocketmq-client-nodejs version .ci/run
// installs.
const nodeClientVersion = "1.0.8"

// grpcPrefix starts the name of every gRPC row (`-only gRPC` runs them).
const grpcPrefix = "gRPC 5.x client: "

// nodeClient is node with rocketmq-client-nodejs, ready to run
// grpc_bench.js.
type nodeClient struct {
	node    string // the node binary
	modules string // the node_modules directory holding the client
	script  string // grpc_bench.js, written out
	home    string // HOME for the client (its default logger writes there)
}

// nodeClientDir is where the client is looked for: QUIVER_NODE_CLIENT_DIR,
// else .ci/run's cache directory.
func nodeClientDir() string {
	if d := os.Getenv("QUIVER_NODE_CLIENT_DIR"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "quiver-ci-node")
}

// findNodeClient finds node and the client module and writes the script
// into dir; its error says what is missing and how to install it.
func findNodeClient(dir string) (*nodeClient, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed (the 5.x client rows need node and rocketmq-client-nodejs@%s): %w", nodeClientVersion, err)
	}
	cd := nodeClientDir()
	modules := filepath.Join(cd, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "rocketmq-client-nodejs", "package.json")); err != nil {
		return nil, fmt.Errorf("rocketmq-client-nodejs is not installed in %s (npm install --prefix %s rocketmq-client-nodejs@%s, or set QUIVER_NODE_CLIENT_DIR): %w",
			cd, cd, nodeClientVersion, err)
	}
	nc := &nodeClient{node: node, modules: modules, script: filepath.Join(dir, "grpc_bench.js"), home: filepath.Join(dir, "node-home")}
	if err := os.MkdirAll(nc.home, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(nc.script, grpcBenchJS, 0o644); err != nil {
		return nil, fmt.Errorf("write grpc_bench.js: %w", err)
	}
	return nc, nil
}

// grpcSpec is what grpc_bench.js runs (its spec argument).
type grpcSpec struct {
	Mode        string `json:"mode"` // send, receive or e2e
	Endpoints   string `json:"endpoints"`
	Topic       string `json:"topic"`
	Group       string `json:"group,omitempty"`
	Size        int    `json:"size"`
	N           int64  `json:"n,omitempty"`           // send: at most this many
	Concurrency int    `json:"concurrency,omitempty"` // send: sends in flight
	Want        int64  `json:"want,omitempty"`        // receive: the backlog
	Loops       int    `json:"loops,omitempty"`       // receive, e2e: concurrent receive loops
	Batch       int    `json:"batch,omitempty"`       // receive, e2e: messages per receive
	InvisibleMs int64  `json:"invisibleMs,omitempty"`
	AwaitMs     int64  `json:"awaitMs,omitempty"` // long-polling timeout
	Rate        int    `json:"rate,omitempty"`    // e2e: msg/s
	DurMs       int64  `json:"durMs"`             // the timed part's bound
	DeadlineMs  int64  `json:"deadlineMs"`        // the whole process's bound
}

// grpcResult is the script's result line, plus the broker's CPU time over
// the timed part.
type grpcResult struct {
	Msgs      int64   `json:"msgs"` // sent and acknowledged (send), received (receive, e2e)
	Sent      int64   `json:"sent"`
	Acked     int64   `json:"acked"`
	Unique    int64   `json:"unique"`
	Dups      int64   `json:"dups"`
	Errs      int64   `json:"errs"`
	FirstErr  string  `json:"firstErr"`
	ElapsedMs float64 `json:"elapsedMs"`
	FirstMs   float64 `json:"firstMs"`
	CPUUs     float64 `json:"cpuUs"` // the node process's user+system CPU
	P50Us     float64 `json:"p50Us"`
	P99Us     float64 `json:"p99Us"`
	P999Us    float64 `json:"p999Us"`
	srvCPU    time.Duration
	// Time the node process's and the server's threads spent runnable but
	// waiting for a CPU during the timed part (/proc/<pid>/task/*/schedstat):
	// on a shared 2-core machine this says whether a figure measures the
	// client, the broker or the machine's load.
	nodeWait, srvWait time.Duration
}

func (r grpcResult) elapsed() time.Duration {
	return time.Duration(r.ElapsedMs * float64(time.Millisecond))
}

// us converts the script's microseconds to a duration.
func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// run runs one spec: srvCPU is read when the script is ready and when its
// result comes. The process is killed past spec.DeadlineMs + 15 s.
func (nc *nodeClient) run(ctx context.Context, s grpcSpec, srv *proc) (grpcResult, error) {
	if s.DeadlineMs == 0 {
		s.DeadlineMs = s.DurMs + 90_000
	}
	spec, err := json.Marshal(s)
	if err != nil {
		return grpcResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.DeadlineMs)*time.Millisecond+15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nc.node, nc.script, string(spec))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nc.modules, "HOME="+nc.home)
	setDeathSignal(cmd)
	stderr := &lockedBuf{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return grpcResult{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return grpcResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return grpcResult{}, fmt.Errorf("start node: %w", err)
	}
	var (
		res            grpcResult
		gotRes, ready  bool
		srv0, nw0, sw0 time.Duration
		protocolErr    error
		sc             = bufio.NewScanner(stdout)
		lineOf, events = map[string]string{}, 0
	)
	for sc.Scan() {
		var ev struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // not ours
		}
		events++
		lineOf[ev.Event] = sc.Text()
		switch ev.Event {
		case "ready":
			ready = true
			srv0, nw0, sw0 = srv.cpu(), runQueueWait(cmd.Process.Pid), runQueueWait(srv.cmd.Process.Pid)
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				protocolErr = fmt.Errorf("write go: %w", err)
			}
		case "result":
			res.srvCPU = srv.cpu() - srv0
			res.nodeWait = runQueueWait(cmd.Process.Pid) - nw0
			res.srvWait = runQueueWait(srv.cmd.Process.Pid) - sw0
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				protocolErr = fmt.Errorf("result line %q: %w", sc.Text(), err)
			}
			gotRes = true
		}
	}
	stdin.Close()
	werr := cmd.Wait()
	switch {
	case protocolErr != nil:
		return res, fmt.Errorf("grpc_bench %s: %w", s.Mode, protocolErr)
	case !gotRes:
		return res, fmt.Errorf("grpc_bench %s: no result (ready %v, exit %v):\n%s", s.Mode, ready, werr, stderr.tail(20))
	case werr != nil && ctx.Err() == nil:
		// the result stands; the client's shutdown failed
		logf("    grpc_bench %s: exit after the result: %v: %s", s.Mode, werr, strings.TrimSpace(stderr.tail(3)))
	}
	return res, nil
}

// runQueueWait is the time the threads of process pid have spent
// runnable, waiting for a CPU (the second field of each
// /proc/<pid>/task/<tid>/schedstat; threads that ended are not counted);
// 0 where unreadable.
func runQueueWait(pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) >= 2 {
			var w int64
			fmt.Sscan(fs[1], &w)
			ns += w
		}
	}
	return time.Duration(ns)
}

// waitNote is the log's note of the run-queue waits of a run.
func (r grpcResult) waitNote() string {
	return fmt.Sprintf("run-queue wait over the %.1f s: node %.1f s, server %.1f s", r.ElapsedMs/1e3, r.nodeWait.Seconds(), r.srvWait.Seconds())
}

// grpcTarget is the same `mq dev` as quiverTarget, driven by the Node.js
// 5.x client over gRPC. Only grpcRows uses it: its workloads run inside
// the node process, not through the sender and consume methods.
type grpcTarget struct {
	*quiverTarget
	nc *nodeClient
}

var errNodeDriven = errors.New("peers: the 5.x client runs in node (grpc.go): no sender or consumer in the harness")

func (g *grpcTarget) label() string { return "Quiver/5.x gRPC (Node.js)" }

func (g *grpcTarget) newSender(context.Context, string, int) (sender, error) {
	return nil, errNodeDriven
}

func (g *grpcTarget) consume(context.Context, string, string, int, func([]byte)) (func(), error) {
	return nil, errNodeDriven
}

// grpcSendConcurrency are the send rows: await each send, then that many
// sends in flight from one Producer (concurrent `await send` loops; the
// JetStream column: that many goroutines publishing synchronously on one
// connection, as the official client's "goroutines sharing 1 producer"
// rows).
var grpcSendConcurrency = []int{1, 16, 64, 256}

func grpcSendName(c int) string {
	if c == 1 {
		return grpcPrefix + "publish 1 KiB, 1 send at a time"
	}
	return fmt.Sprintf("%spublish 1 KiB, %d sends in flight", grpcPrefix, c)
}

const grpcBacklogName = grpcPrefix + "backlog consume 1 KiB, 1 SimpleConsumer, 4 receive loops × batch 32, ack each"

func grpcE2EName(rate int) string {
	return fmt.Sprintf("%send-to-end at %s msg/s, 1 KiB", grpcPrefix, withThousands(fmt.Sprint(rate)))
}

// grpcWanted says whether any gRPC row is selected by -only.
func grpcWanted(f flags) bool {
	if f.want(grpcBacklogName) || f.want(grpcE2EName(f.grpcRate)) || f.want("latency") && f.grpcRate > 0 {
		return true
	}
	for _, c := range grpcSendConcurrency {
		if f.want(grpcSendName(c)) {
			return true
		}
	}
	return false
}

// grpcRows runs the 5.x client rows of one round on q (each against
// JetStream through eachOf). Without node or the client module they are
// skipped with one line saying why (and noted under the table), not
// failed.
func grpcRows(ctx context.Context, f flags, tmp string, q *quiverTarget,
	eachOf func(target, func(target) error) error,
	withTopic func(target, string, func(string) error) error, rep *report) error {
	if !grpcWanted(f) {
		return nil
	}
	nc, err := findNodeClient(tmp)
	if err != nil {
		logf("  skipping the gRPC 5.x client rows: %v", err)
		note := "gRPC 5.x client rows skipped: " + err.Error()
		if !slices.Contains(rep.fails, note) {
			rep.fails = append(rep.fails, note)
		}
		return nil
	}
	g := &grpcTarget{quiverTarget: q, nc: nc}
	for _, c := range grpcSendConcurrency {
		name := grpcSendName(c)
		if !f.want(name) {
			continue
		}
		if err := eachOf(g, func(t target) error {
			return withTopic(t, "grpcpub", func(topic string) error { return grpcSend(ctx, f, g, t, topic, name, c, rep) })
		}); err != nil {
			return err
		}
	}
	if f.want(grpcBacklogName) {
		if err := eachOf(g, func(t target) error {
			return withTopic(t, "grpcbacklog", func(topic string) error { return grpcBacklog(ctx, f, g, t, topic, rep) })
		}); err != nil {
			return err
		}
	}
	if name := grpcE2EName(f.grpcRate); f.grpcRate > 0 && (f.want(name) || f.want("latency")) {
		if err := eachOf(g, func(t target) error {
			return withTopic(t, "grpce2e", func(topic string) error { return grpcE2E(ctx, f, g, t, topic, name, rep) })
		}); err != nil {
			return err
		}
	}
	return nil
}

// grpcSend is one send row on t: the node client on g, the same number of
// synchronous publishers in flight on JetStream.
func grpcSend(ctx context.Context, f flags, g *grpcTarget, t target, topic, name string, c int, rep *report) error {
	var (
		msgs, errs     int64
		el             time.Duration
		srvCPU, cliCPU time.Duration
		p50            time.Duration
		firstErr, note string
	)
	if t == g {
		r, err := g.nc.run(ctx, grpcSpec{Mode: "send", Endpoints: g.grpcAddr, Topic: topic, Size: 1024,
			N: f.n, Concurrency: c, DurMs: f.dur.Milliseconds()}, g.p)
		if err != nil {
			return err
		}
		if r.Msgs == 0 {
			return fmt.Errorf("gRPC: nothing acknowledged (%d errors, first: %s)", r.Errs, r.FirstErr)
		}
		msgs, errs, el, srvCPU, cliCPU, p50, firstErr = r.Msgs, r.Errs, r.elapsed(), r.srvCPU, us(r.CPUUs), us(r.P50Us), r.FirstErr
		note = "; " + r.waitNote()
	} else {
		s := pubSpec{size: 1024, producers: 1, goroutines: c, n: f.n, dur: f.dur, window: f.window}
		if c == 1 {
			s.goroutines = 0 // one sender, timed (the send p50)
		}
		r, err := publish(ctx, t, topic, s)
		if err != nil {
			return err
		}
		msgs, errs, el, srvCPU, cliCPU, p50 = r.msgs, r.errs, r.el, r.srvCPU, r.cliCPU, r.p50
		if r.firstErr != nil {
			firstErr = r.firstErr.Error()
		}
	}
	v := float64(msgs) / el.Seconds()
	srvUs := float64(srvCPU.Microseconds()) / float64(msgs)
	cliUs := float64(cliCPU.Microseconds()) / float64(msgs)
	logf("  %-62s %-26s %9.0f msg/s (%d msgs in %.1fs, %d errors; CPU µs/msg server %.1f client %.1f; p50 %v%s)",
		name, label(t), v, msgs, el.Seconds(), errs, srvUs, cliUs, p50, note)
	if firstErr != "" {
		logf("    first of %d errors: %s", errs, firstErr)
	}
	rep.add(name, "msg/s", false, 0, t.name(), v)
	if c == 1 {
		rep.add(name+": send p50", "µs", true, 0, t.name(), float64(p50)/1e3)
	}
	rep.add(name+": server CPU per message", "µs", true, 0, t.name(), srvUs)
	rep.add(name+": client CPU per message", "µs", true, 0, t.name(), cliUs)
	return nil
}

// grpcBacklogMax bounds the backlog of the receive row.
const grpcBacklogMax = 50_000

// grpcBacklog fills a backlog with Quiver's own client (fast, the same
// bytes) or nats.go and drains it: one SimpleConsumer with 4 receive
// loops on g, one pull consumer on JetStream (timed from the first
// delivery, as the official client's backlog rows).
func grpcBacklog(ctx context.Context, f flags, g *grpcTarget, t target, topic string, rep *report) error {
	ft := t
	if t == g {
		ft = g.quiverTarget
	}
	have, err := fill(ctx, ft, topic, min(f.n, grpcBacklogMax), 1024, f.window, 4*f.dur)
	if err != nil {
		return err
	}
	var v, srvUs, cliUs float64
	if t == g {
		r, err := g.nc.run(ctx, grpcSpec{Mode: "receive", Endpoints: g.grpcAddr, Topic: topic,
			Group: fmt.Sprintf("PeersGRPC_backlog_%d", g.seq.Add(1)), Size: 1024, Want: have,
			Loops: 4, Batch: 32, InvisibleMs: 60_000, AwaitMs: 5_000, DurMs: (4 * f.dur).Milliseconds()}, g.p)
		if err != nil {
			return err
		}
		if r.Msgs == 0 {
			return fmt.Errorf("gRPC: nothing received of %d (%d errors, first: %s)", have, r.Errs, r.FirstErr)
		}
		el := r.elapsed() - time.Duration(r.FirstMs*float64(time.Millisecond))
		v = float64(r.Msgs) / el.Seconds()
		srvUs = float64(r.srvCPU.Microseconds()) / float64(r.Msgs)
		cliUs = r.CPUUs / float64(r.Msgs)
		logf("  %-62s %-26s %9.0f msg/s (%d of %d received, %d unique, %d acked, %d duplicates, %d errors, first after %.0f ms; CPU µs/msg server %.1f client %.1f; %s)",
			grpcBacklogName, label(t), v, r.Msgs, have, r.Unique, r.Acked, r.Dups, r.Errs, r.FirstMs, srvUs, cliUs, r.waitNote())
		if r.FirstErr != "" {
			logf("    first of %d errors: %s", r.Errs, r.FirstErr)
		}
		// A backlog not drained within the bound still gives the rate of
		// the part received (nothing received is an error above).
		if r.Msgs < have {
			logf("    the %s bound cut the drain at %d of %d: the rate is of those", 4*f.dur, r.Msgs, have)
		}
	} else {
		srv0, cli0 := t.serverCPU(), selfCPU()
		v, err = drain(ctx, t, topic, have, 1, 4*f.dur, true)
		if err != nil {
			return err
		}
		srvUs = float64((t.serverCPU() - srv0).Microseconds()) / float64(have)
		cliUs = float64((selfCPU() - cli0).Microseconds()) / float64(have)
		logf("  %-62s %-26s %9.0f msg/s (%d msgs; CPU µs/msg server %.1f client %.1f)", grpcBacklogName, label(t), v, have, srvUs, cliUs)
	}
	rep.add(grpcBacklogName, "msg/s", false, 0, t.name(), v)
	rep.add(grpcBacklogName+": server CPU per message", "µs", true, 0, t.name(), srvUs)
	rep.add(grpcBacklogName+": client CPU per message", "µs", true, 0, t.name(), cliUs)
	return nil
}

// grpcE2E is the end-to-end latency row at f.grpcRate: producer and
// SimpleConsumer (4 long-polling receive loops, batch 32) in one node
// process on g; latency() (one async producer, one consumer) on
// JetStream.
func grpcE2E(ctx context.Context, f flags, g *grpcTarget, t target, topic, name string, rep *report) error {
	var p50, p99, p999 time.Duration
	var srvUs, cliUs float64
	var note string
	total := float64(f.grpcRate) * f.latDur.Seconds()
	if t == g {
		r, err := g.nc.run(ctx, grpcSpec{Mode: "e2e", Endpoints: g.grpcAddr, Topic: topic,
			Group: fmt.Sprintf("PeersGRPC_e2e_%d", g.seq.Add(1)), Size: 1024, Rate: f.grpcRate,
			Loops: 4, Batch: 32, InvisibleMs: 60_000, AwaitMs: 5_000, DurMs: f.latDur.Milliseconds()}, g.p)
		if err != nil {
			return err
		}
		if float64(r.Msgs) < total*9/10 {
			return fmt.Errorf("gRPC: received %d of %d (sent %d, errors %d, first: %s; p50 of those %v; %s)",
				r.Msgs, int64(total), r.Sent, r.Errs, r.FirstErr, us(r.P50Us), r.waitNote())
		}
		p50, p99, p999 = us(r.P50Us), us(r.P99Us), us(r.P999Us)
		srvUs = float64(r.srvCPU.Microseconds()) / float64(r.Msgs)
		cliUs = r.CPUUs / float64(r.Msgs)
		note = "; " + r.waitNote()
	} else {
		srv0, cli0 := t.serverCPU(), selfCPU()
		var err error
		if p50, p99, p999, err = latency(ctx, t, topic, f.grpcRate, f.latDur, 1024); err != nil {
			return err
		}
		srvUs = float64((t.serverCPU() - srv0).Microseconds()) / total
		cliUs = float64((selfCPU() - cli0).Microseconds()) / total
	}
	logf("  %-62s %-26s p50 %v p99 %v p999 %v (CPU µs/msg server %.1f client %.1f%s)", name, label(t), p50, p99, p999, srvUs, cliUs, note)
	rep.add(name+": p50", "µs", true, 0, t.name(), float64(p50)/1e3)
	rep.add(name+": p99", "µs", true, 0, t.name(), float64(p99)/1e3)
	rep.add(name+": p999", "µs", true, 0, t.name(), float64(p999)/1e3)
	rep.add(name+": server CPU per message", "µs", true, 0, t.name(), srvUs)
	rep.add(name+": client CPU per message", "µs", true, 0, t.name(), cliUs)
	return nil
}
