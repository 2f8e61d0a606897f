//go:build e2etrace

package e2etrace

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// On reports a tracing build (see hooks_off.go).
const On = true

// epoch is the event clock's zero.
var epoch = time.Now()

// Now reads the event clock (monotonic nanoseconds).
func Now() int64 { return int64(time.Since(epoch)) }

// rec is the process's recorder: ring is nil while tracing is off (no
// QUIVER_E2ETRACE, or not started), and every hook returns at once.
var rec recorder

type recorder struct {
	ring atomic.Pointer[Ring]

	// topics maps a topic to its id (string → uint32); names lists them
	// by id (under tmu).
	topics sync.Map
	tmu    sync.Mutex
	names  []string

	mu     sync.Mutex // Start, Stop, dumps
	refs   int
	path   string
	log    *slog.Logger
	seq    int
	start  int64         // the window's start on the event clock
	gc0    uint32        // NumGC at the window's start
	cpu0   [2]float64    // GC and total CPU seconds at the window's start
	sched0 Histogram     // /sched/latencies:seconds at the window's start
	stop   chan struct{} // closed by the last Stop
	done   chan struct{} // closed when the signal goroutine ends
}

// Start enables the recorder when QUIVER_E2ETRACE names a dump path (a
// broker calls it as it starts; calls nest, the last Stop ends tracing).
// SIGUSR1 then dumps the window since the previous dump to that path and
// starts a new one.
func Start(log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.refs++
	if rec.refs > 1 {
		return
	}
	path := os.Getenv("QUIVER_E2ETRACE")
	if path == "" {
		log.Warn("e2etrace build without QUIVER_E2ETRACE: end-to-end tracing off")
		return
	}
	n := 1 << 21
	if v := os.Getenv("QUIVER_E2ETRACE_EVENTS"); v != "" {
		if k, err := strconv.Atoi(v); err == nil && k > 0 {
			n = k
		}
	}
	r := NewRing(n)
	rec.path, rec.log = path, log
	rec.resetWindowLocked()
	rec.ring.Store(r)
	rec.stop, rec.done = make(chan struct{}), make(chan struct{})
	// Registered before Start returns: a SIGUSR1 sent once the broker
	// listens is never lost (one not notified is dropped by the runtime).
	sig := make(chan os.Signal, 1)
	if len(dumpSignals) > 0 {
		signal.Notify(sig, dumpSignals...)
	}
	go rec.signals(sig, rec.stop, rec.done)
	log.Info("e2etrace on", "dump", path, "ring_events", r.Cap())
}

// Stop writes the last window's dump and ends tracing once every Start
// has its Stop.
func Stop() {
	rec.mu.Lock()
	if rec.refs == 0 {
		rec.mu.Unlock()
		return
	}
	rec.refs--
	if rec.refs > 0 || rec.ring.Load() == nil {
		rec.mu.Unlock()
		return
	}
	if err := rec.dumpLocked(); err != nil {
		rec.log.Error("e2etrace: dump at stop", "err", err)
	}
	rec.ring.Store(nil)
	stop, done := rec.stop, rec.done
	rec.mu.Unlock()
	close(stop)
	<-done
}

// DumpNow writes the window since the previous dump and starts a new one.
func DumpNow() error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.ring.Load() == nil {
		return fmt.Errorf("e2etrace: not recording (QUIVER_E2ETRACE unset or not started)")
	}
	return rec.dumpLocked()
}

func (r *recorder) signals(ch chan os.Signal, stop, done chan struct{}) {
	defer close(done)
	defer signal.Stop(ch)
	for {
		select {
		case <-stop:
			return
		case <-ch:
			if err := DumpNow(); err != nil {
				r.log.Error("e2etrace: dump", "err", err)
			}
		}
	}
}

// dumpLocked drains the ring with the window's runtime figures into a
// dump at path. Called under mu.
func (r *recorder) dumpLocked() error {
	ring := r.ring.Load()
	end := Now()
	evs, lost := ring.Drain(nil)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcCPU, cpu, sched := readRuntime()
	r.seq++
	d := &Dump{Meta: Meta{
		Seq: r.seq, EpochUnixNano: epoch.UnixNano(), Start: r.start, End: end,
		Dropped: lost, RingEvents: ring.Cap(), Topics: r.topicNames(),
		GCCPUSeconds: gcCPU - r.cpu0[0], CPUSeconds: cpu - r.cpu0[1],
		SchedLatency: sched.minus(r.sched0),
		GOMAXPROCS:   runtime.GOMAXPROCS(0), GOGC: os.Getenv("GOGC"), GOMEMLIMIT: os.Getenv("GOMEMLIMIT"),
	}, Events: evs}
	// MemStats keeps the last 256 pauses: cycle k (from 1) at (k-1)%256.
	first := r.gc0 + 1
	if ms.NumGC >= 256 && first <= ms.NumGC-256 {
		d.GCMissed = int(ms.NumGC - 255 - first)
		first = ms.NumGC - 255
	}
	for k := first; k <= ms.NumGC && k > 0; k++ {
		i := (k - 1) % 256
		d.GC = append(d.GC, GCCycle{Num: k, End: int64(ms.PauseEnd[i]) - epoch.UnixNano(), PauseNs: int64(ms.PauseNs[i])})
	}
	r.gc0 = ms.NumGC
	r.start, r.cpu0, r.sched0 = end, [2]float64{gcCPU, cpu}, sched
	if err := WriteFile(r.path, d); err != nil {
		return err
	}
	r.log.Info("e2etrace dump written", "path", r.path, "seq", d.Seq, "events", len(evs), "dropped", lost)
	return nil
}

func (r *recorder) resetWindowLocked() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcCPU, cpu, sched := readRuntime()
	r.start, r.gc0, r.cpu0, r.sched0 = Now(), ms.NumGC, [2]float64{gcCPU, cpu}, sched
}

func readRuntime() (gcCPU, cpu float64, sched Histogram) {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/sched/latencies:seconds"},
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64 {
		gcCPU = s[0].Value.Float64()
	}
	cpu = processCPU()
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[1].Value.Float64Histogram()
		sched = Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: append([]float64(nil), h.Buckets...)}
		for i, b := range sched.Buckets { // JSON has no infinities
			switch {
			case math.IsInf(b, -1):
				sched.Buckets[i] = -math.MaxFloat64
			case math.IsInf(b, 1):
				sched.Buckets[i] = math.MaxFloat64
			}
		}
	}
	return gcCPU, cpu, sched
}

// topicID interns topic.
func (r *recorder) topicID(topic string) uint32 {
	if v, ok := r.topics.Load(topic); ok {
		return v.(uint32)
	}
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if v, ok := r.topics.Load(topic); ok {
		return v.(uint32)
	}
	if len(r.names) == 0 {
		r.names = append(r.names, "")
	}
	id := uint32(len(r.names))
	if id >= maxTopics {
		return 0
	}
	r.names = append(r.names, topic)
	r.topics.Store(topic, id)
	return id
}

func (r *recorder) topicNames() []string {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	return append([]string(nil), r.names...)
}

// FrameRead records a SEND or PULL frame read at t (Now before decoding).
func FrameRead(t int64, peer uint64, code, opaque int32) {
	ring := rec.ring.Load()
	if ring == nil || !traced(code) {
		return
	}
	ring.Put(&Event{T: t, Kind: KindRead, Peer: peer, Opaque: opaque, Aux: code})
}

// Stored records a message appended at offset of (topic, queue).
func Stored(topic string, queue int32, offset int64) {
	if ring := rec.ring.Load(); ring != nil {
		ring.Put(&Event{T: Now(), Kind: KindStored, Topic: rec.topicID(topic), Queue: queue, Offset: offset})
	}
}

// SendDone records that request (peer, opaque) stored n messages from
// offset of (topic, queue).
func SendDone(peer uint64, opaque int32, topic string, queue int32, offset int64, n int) {
	if ring := rec.ring.Load(); ring != nil {
		ring.Put(&Event{T: Now(), Kind: KindSendDone, Peer: peer, Opaque: opaque, Topic: rec.topicID(topic), Queue: queue,
			Offset: offset, Next: offset + int64(n)})
	}
}

func pullEvent(k Kind, peer uint64, opaque int32, topic string, queue int32, offset, next int64) {
	if ring := rec.ring.Load(); ring != nil {
		ring.Put(&Event{T: Now(), Kind: k, Peer: peer, Opaque: opaque, Topic: rec.topicID(topic), Queue: queue, Offset: offset, Next: next})
	}
}

// Pull records a PULL_MESSAGE (peer, opaque) for offset of (topic, queue).
func Pull(peer uint64, opaque int32, topic string, queue int32, offset int64) {
	pullEvent(KindPull, peer, opaque, topic, queue, offset, 0)
}

// Held records a pull parked on its empty queue.
func Held(peer uint64, opaque int32, topic string, queue int32, offset int64) {
	pullEvent(KindHeld, peer, opaque, topic, queue, offset, 0)
}

// Found records a held pull found by a message stored below max.
func Found(peer uint64, opaque int32, topic string, queue int32, offset, max int64) {
	pullEvent(KindFound, peer, opaque, topic, queue, offset, max)
}

// Written returns a Sent for a pull answer just built, carrying records
// messages of offsets [offset, next): it records the answer written (when
// the connection's writer calls it, after the write returned) and then
// runs sent.
func Written(sent func(), peer uint64, opaque int32, topic string, queue int32, offset, next int64, records int) func() {
	ring := rec.ring.Load()
	if ring == nil {
		return sent
	}
	e := Event{Built: Now(), Kind: KindWritten, Peer: peer, Opaque: opaque, Topic: rec.topicID(topic), Queue: queue,
		Offset: offset, Next: next, Aux: int32(min(records, 1<<31-1))}
	return func() {
		e.T = Now()
		ring.Put(&e)
		if sent != nil {
			sent()
		}
	}
}
