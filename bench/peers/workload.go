package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// pubSpec is one publish workload (1).
type pubSpec struct {
	size      int
	producers int
	async     bool // pipelined, up to window in flight per producer
	window    int
	n         int64         // total messages (all producers)
	dur       time.Duration // longest run
	// goroutines, when set, sync-sends from that many goroutines sharing
	// one sender (producers is then 1).
	goroutines int
	// random fills the body with incompressible bytes.
	random bool
}

func (s pubSpec) String() string {
	m := "sync"
	if s.async {
		m = "async"
	}
	if s.goroutines > 0 {
		return fmt.Sprintf("publish %s, %d goroutine(s) sharing 1 producer, %s", sizeName(s.size), s.goroutines, m)
	}
	return fmt.Sprintf("publish %s, %d producer(s), %s", sizeName(s.size), s.producers, m)
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// sender is one producer of a system: send blocks until acknowledged,
// sendAsync returns at once and calls done with the acknowledgement.
type sender interface {
	send(ctx context.Context, body []byte) error
	sendAsync(ctx context.Context, body []byte, done func(error)) error
	close()
}

// target is a system under test with a server running.
type target interface {
	name() string
	// newTopic makes a fresh topic (stream) for one workload.
	newTopic(ctx context.Context, tag string) (string, error)
	dropTopic(ctx context.Context, topic string)
	newSender(ctx context.Context, topic string, i int) (sender, error)
	// serverCPU is the server process's CPU time so far.
	serverCPU() time.Duration
	// serverSyscalls is the server process's read and write system calls
	// so far (/proc/<pid>/io syscr + syscw; 0 where unknown).
	serverSyscalls() int64
	// consume delivers every message of topic to fn from consumers
	// consumers of group (clustering: they share the messages), until ctx
	// ends. It returns once the consumers are running; stop ends them.
	consume(ctx context.Context, topic, group string, consumers int, fn func(body []byte)) (stop func(), err error)
	close()
}

type pubResult struct {
	msgs, errs     int64
	el             time.Duration
	srvCPU, cliCPU time.Duration // CPU used during the timed part
	srvSys, cliSys int64         // read/write syscalls during the timed part
	p50            time.Duration // send latency (one goroutine, sync)
	firstErr       error
}

// publish runs spec against t: bounded by spec.n and spec.dur; async
// acknowledgements are awaited for at most 30 s more.
func publish(ctx context.Context, t target, topic string, s pubSpec) (pubResult, error) {
	senders := make([]sender, s.producers)
	defer func() {
		for _, x := range senders {
			if x != nil {
				x.close()
			}
		}
	}()
	body := make([]byte, s.size)
	if s.random {
		rand.Read(body)
	}
	for i := range senders {
		x, err := t.newSender(ctx, topic, i)
		if err != nil {
			return pubResult{}, err
		}
		senders[i] = x
		if err := x.send(ctx, body); err != nil { // warm-up: routes, connections
			return pubResult{}, fmt.Errorf("%s warm-up send: %w", t.name(), err)
		}
	}
	var sent, acked, errs atomic.Int64
	var firstErr atomic.Value
	rctx, cancel := context.WithTimeout(ctx, s.dur)
	defer cancel()
	srv0, cli0 := t.serverCPU(), selfCPU()
	ssys0, csys0 := t.serverSyscalls(), selfSyscalls()
	var lats []int64
	timed := !s.async && s.producers == 1 && s.goroutines <= 1
	if timed {
		lats = make([]int64, 0, min(s.n, 1<<20))
	}
	start := time.Now()
	var wg sync.WaitGroup
	workers := senders
	if s.goroutines > 0 {
		workers = make([]sender, s.goroutines)
		for i := range workers {
			workers[i] = senders[0]
		}
	}
	for _, x := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inflight sync.WaitGroup
			sem := make(chan struct{}, max(s.window, 1))
			for rctx.Err() == nil && sent.Add(1) <= s.n {
				if !s.async {
					t0 := time.Now()
					// ctx, not rctx: the official client arms its
					// connection's write deadline from the context's, and a
					// send cut at the end of the run would close the
					// connection (counted as errors of the run).
					if err := x.send(ctx, body); err != nil {
						if rctx.Err() == nil {
							errs.Add(1)
							firstErr.CompareAndSwap(nil, errBox{err})
						}
						continue
					}
					if timed && len(lats) < cap(lats) {
						lats = append(lats, int64(time.Since(t0)))
					}
					acked.Add(1)
					continue
				}
				select {
				case sem <- struct{}{}:
				case <-rctx.Done():
					continue
				}
				inflight.Add(1)
				err := x.sendAsync(ctx, body, func(err error) {
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, errBox{err})
					} else {
						acked.Add(1)
					}
					<-sem
					inflight.Done()
				})
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, errBox{err})
					<-sem
					inflight.Done()
				}
			}
			waitFor(&inflight, 30*time.Second)
		}()
	}
	wg.Wait()
	el := time.Since(start)
	r := pubResult{msgs: acked.Load(), errs: errs.Load(), el: el, srvCPU: t.serverCPU() - srv0, cliCPU: selfCPU() - cli0,
		srvSys: t.serverSyscalls() - ssys0, cliSys: selfSyscalls() - csys0}
	if len(lats) > 0 {
		slices.Sort(lats)
		r.p50 = time.Duration(lats[len(lats)/2])
	}
	if b, ok := firstErr.Load().(errBox); ok {
		r.firstErr = b.err
	}
	if r.msgs == 0 {
		return r, fmt.Errorf("%s: nothing acknowledged (%d errors, first: %v)", t.name(), r.errs, r.firstErr)
	}
	return r, nil
}

func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// fill publishes n messages of size with 4 async producers (the backlog
// of workload 2), bounded by d.
func fill(ctx context.Context, t target, topic string, n int64, size, window int, d time.Duration) (int64, error) {
	r, err := publish(ctx, t, topic, pubSpec{size: size, producers: 4, async: true, window: window, n: n, dur: d})
	// the warm-up sends add one message per producer
	return r.msgs + 4, err
}

// drain consumes a backlog of want messages with consumers consumers and
// returns messages per second.
//
// With fromFirst the time counts from the first delivery, not from the
// start of the consumers: a push consumer's start and rebalance are left
// out of the timed window.
func drain(ctx context.Context, t target, topic string, want int64, consumers int, d time.Duration, fromFirst bool) (float64, error) {
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	start := time.Now()
	var first atomic.Int64
	stop, err := t.consume(ctx, topic, fmt.Sprintf("drain%d", consumers), consumers, func([]byte) {
		if fromFirst && first.Load() == 0 {
			first.CompareAndSwap(0, time.Now().UnixNano())
		}
		if got.Add(1) >= want {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return 0, err
	}
	defer stop()
	select {
	case <-done:
	case <-time.After(d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	el := time.Since(start)
	if f := first.Load(); f != 0 {
		el = time.Since(time.Unix(0, f))
	}
	n := got.Load()
	if n < want {
		return float64(n) / el.Seconds(), fmt.Errorf("%s: drained %d of %d in %s", t.name(), n, want, d)
	}
	return float64(n) / el.Seconds(), nil
}

// latency sends size-byte messages stamped with the send time at rate
// msg/s for d with one producer (async, so the rate holds) and records
// receive − send at one consumer.
func latency(ctx context.Context, t target, topic string, rate int, d time.Duration, size int) (p50, p99, p999 time.Duration, err error) {
	total := int(float64(rate) * d.Seconds())
	lat := make([]int64, 0, total)
	var mu sync.Mutex
	var got atomic.Int64
	var warmSeen atomic.Bool
	done := make(chan struct{})
	var once sync.Once
	stop, err := t.consume(ctx, topic, "latency", 1, func(b []byte) {
		if len(b) < 8 {
			return
		}
		ns := time.Now().UnixNano() - int64(binary.LittleEndian.Uint64(b))
		if ns < 0 { // the warm-up message, stamped an hour ahead
			warmSeen.Store(true)
			return
		}
		mu.Lock()
		if len(lat) < cap(lat) {
			lat = append(lat, ns)
		}
		mu.Unlock()
		if got.Add(1) >= int64(total) {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	x, err := t.newSender(ctx, topic, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer x.close()
	// warm-up message with a stamp in the future is skipped by the consumer
	warm := make([]byte, size)
	binary.LittleEndian.PutUint64(warm, uint64(time.Now().Add(time.Hour).UnixNano()))
	if err := x.send(ctx, warm); err != nil {
		return 0, 0, 0, fmt.Errorf("%s warm-up: %w", t.name(), err)
	}
	// The consumer is settled on the queues (rebalanced, long-polling)
	// once the warm-up message reached it.
	settle := time.Now().Add(60 * time.Second)
	for !warmSeen.Load() {
		if time.Now().After(settle) || ctx.Err() != nil {
			return 0, 0, 0, fmt.Errorf("%s: warm-up message not delivered within 60 s", t.name())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the other queues' pulls are held too
	// A traced broker's measured window starts here.
	if w, ok := t.(windowed); ok {
		if err := w.startWindow(ctx); err != nil {
			return 0, 0, 0, err
		}
	}
	var inflight sync.WaitGroup
	var errs atomic.Int64
	start := time.Now()
	sentN := 0
	for sentN < total && ctx.Err() == nil && time.Since(start) < d+5*time.Second {
		due := int(time.Since(start).Seconds() * float64(rate))
		for ; sentN < due && sentN < total; sentN++ {
			b := make([]byte, size)
			binary.LittleEndian.PutUint64(b, uint64(time.Now().UnixNano()))
			inflight.Add(1)
			if err := x.sendAsync(ctx, b, func(err error) {
				if err != nil {
					errs.Add(1)
				}
				inflight.Done()
			}); err != nil {
				errs.Add(1)
				inflight.Done()
			}
		}
		time.Sleep(time.Millisecond)
	}
	waitFor(&inflight, 30*time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < total*9/10 {
		return 0, 0, 0, fmt.Errorf("%s: received %d of %d (send errors %d)", t.name(), len(lat), total, errs.Load())
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return time.Duration(lat[min(len(lat)-1, int(f*float64(len(lat))))]) }
	return q(0.50), q(0.99), q(0.999), nil
}

// fanout publishes n messages with one async producer while groups
// groups each receive all of them; it returns deliveries per second
// (n × groups / time until the last group has all).
func fanout(ctx context.Context, t target, topic string, n int64, size, groups, window int, d time.Duration) (float64, error) {
	counts := make([]atomic.Int64, groups)
	var complete atomic.Int64
	done := make(chan struct{})
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	for g := 0; g < groups; g++ {
		stop, err := t.consume(ctx, topic, fmt.Sprintf("fan%d", g), 1, func([]byte) {
			if counts[g].Add(1) == n+1 { // + the warm-up message
				if complete.Add(1) == int64(groups) {
					close(done)
				}
			}
		})
		if err != nil {
			return 0, err
		}
		stops = append(stops, stop)
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	r, err := publish(ctx, t, topic, pubSpec{size: size, producers: 1, async: true, window: window, n: n, dur: d})
	if err != nil {
		return 0, err
	}
	if r.msgs < n {
		return 0, fmt.Errorf("%s: fan-out published %d of %d", t.name(), r.msgs, n)
	}
	select {
	case <-done:
	case <-time.After(d):
		var min int64 = n
		for g := range counts {
			if c := counts[g].Load(); c < min {
				min = c
			}
		}
		return 0, fmt.Errorf("%s: fan-out: slowest group got %d of %d", t.name(), min, n)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n*int64(groups)) / time.Since(start).Seconds(), nil
}

// errBox gives atomic.Value one concrete type whatever the error's.
type errBox struct{ err error }
