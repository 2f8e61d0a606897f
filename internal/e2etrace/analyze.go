package e2etrace

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Segment names, in the order Report lists them. A segment of an answer
// (found → written, written → next pull) counts once per message the
// answer carries.
const (
	SegReadStored       = "send read → stored"
	SegStoredFound      = "stored → held pull found"
	SegFoundBuilt       = "held pull found → answer built"
	SegBuiltWrittenHeld = "answer built → written (held)"
	SegFoundWritten     = "held pull found → answer written"
	SegStoredPull       = "stored → pull read (immediate)"
	SegPullWritten      = "pull read → answer written (immediate)"
	SegWrittenNextPull  = "answer written → next pull read"
	SegReadWritten      = "send read → answer written (in the broker)"
)

// Segments lists the segment names in report order.
var Segments = []string{SegReadStored, SegStoredFound, SegFoundBuilt, SegBuiltWrittenHeld, SegFoundWritten,
	SegStoredPull, SegPullWritten, SegWrittenNextPull, SegReadWritten}

// Percentiles summarises a segment's durations (nanoseconds).
type Percentiles struct {
	N                             int
	P50, P90, P99, P999, Max, Min int64
}

// Percentile is the nearest-rank p-quantile (0 < p ≤ 1) of sorted.
func Percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

// Summarise sorts v and returns its percentiles.
func Summarise(v []int64) Percentiles {
	slices.Sort(v)
	if len(v) == 0 {
		return Percentiles{}
	}
	return Percentiles{N: len(v), P50: Percentile(v, .5), P90: Percentile(v, .9), P99: Percentile(v, .99),
		P999: Percentile(v, .999), Max: v[len(v)-1], Min: v[0]}
}

// Delivery is one message's path through the broker; a zero time is a
// point not seen (before the window, or not on that path).
type Delivery struct {
	Topic          string
	Queue          int32
	Offset         int64
	SendRead       int64
	Stored         int64
	PullRead       int64
	Found          int64
	Built, Written int64
	NextPullRead   int64
	Held           bool
}

// Report is what Analyze finds in a dump.
type Report struct {
	Meta       Meta
	Segments   map[string]Percentiles
	Deliveries []Delivery
	// Messages stored in the window; answers and messages delivered by
	// held and immediate pulls; deliveries whose send frame was not seen.
	Stored                         int
	HeldAnswers, ImmediateAnswers  int
	HeldMessages, ImmediateMessage int
	NoSendRead                     int
	// GC: the cycles of the window and the spans they covered (mark
	// phase when a gctrace log gave it, else the stop-the-world pause).
	GC          []GCSpan
	GCShare     float64 // fraction of the window inside GC spans
	MarkKnown   bool
	Outliers    int // deliveries above the p99 of SegReadWritten
	OutliersGC  int // of them, those overlapping a GC span
	SchedP50    float64
	SchedP99    float64
	SchedMax    float64
	SchedOver1m uint64
}

// GCSpan is a collection on the event clock.
type GCSpan struct {
	Num        uint32
	Start, End int64
	PauseNs    int64
	Mark       bool // Start..End is the whole cycle (gctrace), not only the pause
}

type reqKey struct {
	peer   uint64
	opaque int32
}

type msgKey struct {
	topic  uint32
	queue  int32
	offset int64
}

type queueKey struct {
	peer   uint64
	topic  uint32
	queue  int32
	offset int64
}

type pullRec struct {
	// read is when the pull's frame was read (0: before the window).
	read, found int64
	held        bool
}

// GCTrace is one GODEBUG=gctrace=1 line: the cycle's number and the wall
// durations of its sweep termination, concurrent mark and mark
// termination.
type GCTrace struct {
	Num                       uint32
	SweepTerm, Mark, MarkTerm int64 // nanoseconds
}

var gctraceRE = regexp.MustCompile(`gc (\d+) @[0-9.]+s [0-9]+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)

// ParseGCTrace reads the gctrace lines of a log (other lines are
// skipped).
func ParseGCTrace(r io.Reader) (map[uint32]GCTrace, error) {
	out := map[uint32]GCTrace{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := gctraceRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.ParseUint(m[1], 10, 32)
		ms := func(s string) int64 { f, _ := strconv.ParseFloat(s, 64); return int64(f * 1e6) }
		out[uint32(n)] = GCTrace{Num: uint32(n), SweepTerm: ms(m[2]), Mark: ms(m[3]), MarkTerm: ms(m[4])}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("e2etrace: read gctrace: %w", err)
	}
	return out, nil
}

// Analyze joins a dump's events into deliveries and summarises them;
// gctrace (may be nil) gives the collections' mark phases.
func Analyze(d *Dump, gctrace map[uint32]GCTrace) *Report {
	evs := slices.Clone(d.Events)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.T, b.T) })
	lastRead := map[reqKey]int64{}
	sendRead := map[msgKey]int64{}
	stored := map[msgKey]int64{}
	pulls := map[reqKey]*pullRec{}
	// pull reads by (peer, queue, offset), in time order: the next pull
	// after an answer asks for the answer's next offset.
	pullsAt := map[queueKey][]int64{}
	type answer struct {
		e    Event
		pull *pullRec
	}
	var answers []answer
	// pullOf is the pull of request rk; one read before the window (a
	// pull held when the window started) has read 0: unknown.
	pullOf := func(rk reqKey) *pullRec {
		p := pulls[rk]
		if p == nil {
			p = &pullRec{}
			pulls[rk] = p
		}
		return p
	}
	rep := &Report{Meta: d.Meta, Segments: map[string]Percentiles{}}
	for _, e := range evs {
		rk := reqKey{e.Peer, e.Opaque}
		switch e.Kind {
		case KindRead:
			lastRead[rk] = e.T
		case KindStored:
			k := msgKey{e.Topic, e.Queue, e.Offset}
			if _, ok := stored[k]; !ok {
				stored[k] = e.T
				rep.Stored++
			}
		case KindSendDone:
			if r, ok := lastRead[rk]; ok {
				for o := e.Offset; o < e.Next; o++ {
					sendRead[msgKey{e.Topic, e.Queue, o}] = r
				}
			}
		case KindPull:
			read, ok := lastRead[rk]
			if !ok {
				read = e.T
			}
			pulls[rk] = &pullRec{read: read}
			qk := queueKey{e.Peer, e.Topic, e.Queue, e.Offset}
			pullsAt[qk] = append(pullsAt[qk], read)
		case KindHeld:
			pullOf(rk).held = true
		case KindFound:
			if p := pullOf(rk); p.found == 0 {
				p.found = e.T
			}
		case KindWritten:
			answers = append(answers, answer{e, pullOf(rk)})
		}
	}
	seg := map[string][]int64{}
	topic := func(id uint32) string {
		if int(id) < len(d.Topics) {
			return d.Topics[id]
		}
		return fmt.Sprint("#", id)
	}
	for _, a := range answers {
		e, p := a.e, a.pull
		held := p.found != 0
		if held {
			rep.HeldAnswers++
		} else {
			rep.ImmediateAnswers++
		}
		var next int64
		for _, r := range pullsAt[queueKey{e.Peer, e.Topic, e.Queue, e.Next}] {
			if r > p.read {
				next = r
				break
			}
		}
		for o := e.Offset; o < e.Next; o++ {
			mk := msgKey{e.Topic, e.Queue, o}
			st, ok := stored[mk]
			if !ok {
				continue // stored before the window, or filtered out
			}
			dl := Delivery{Topic: topic(e.Topic), Queue: e.Queue, Offset: o, Stored: st, PullRead: p.read,
				Built: e.Built, Written: e.T, NextPullRead: next, Held: held}
			if held {
				rep.HeldMessages++
				dl.Found = p.found
				if st <= p.found {
					seg[SegStoredFound] = append(seg[SegStoredFound], p.found-st)
				}
				seg[SegFoundBuilt] = append(seg[SegFoundBuilt], e.Built-p.found)
				seg[SegBuiltWrittenHeld] = append(seg[SegBuiltWrittenHeld], e.T-e.Built)
				seg[SegFoundWritten] = append(seg[SegFoundWritten], e.T-p.found)
			} else {
				rep.ImmediateMessage++
				if p.read != 0 {
					seg[SegStoredPull] = append(seg[SegStoredPull], p.read-st)
					seg[SegPullWritten] = append(seg[SegPullWritten], e.T-p.read)
				}
			}
			if next != 0 {
				seg[SegWrittenNextPull] = append(seg[SegWrittenNextPull], next-e.T)
			}
			if r, ok := sendRead[mk]; ok {
				dl.SendRead = r
				seg[SegReadStored] = append(seg[SegReadStored], st-r)
				seg[SegReadWritten] = append(seg[SegReadWritten], e.T-r)
			} else {
				rep.NoSendRead++
			}
			rep.Deliveries = append(rep.Deliveries, dl)
		}
	}
	for _, name := range Segments {
		rep.Segments[name] = Summarise(seg[name])
	}
	rep.gc(d, gctrace)
	rep.SchedP50, rep.SchedP99, rep.SchedMax, rep.SchedOver1m = d.SchedLatency.summary()
	return rep
}

// gc places the window's collections and counts the outliers (above the
// p99 of the time in the broker) that overlap one.
func (r *Report) gc(d *Dump, gctrace map[uint32]GCTrace) {
	var covered int64
	for _, c := range d.GC {
		s := GCSpan{Num: c.Num, End: c.End, Start: c.End - c.PauseNs, PauseNs: c.PauseNs}
		if t, ok := gctrace[c.Num]; ok {
			s.Start, s.Mark = c.End-(t.SweepTerm+t.Mark+t.MarkTerm), true
			r.MarkKnown = true
		}
		covered += s.End - s.Start
		r.GC = append(r.GC, s)
	}
	if w := d.End - d.Start; w > 0 {
		r.GCShare = float64(covered) / float64(w)
	}
	p99 := r.Segments[SegReadWritten].P99
	for _, dl := range r.Deliveries {
		if dl.SendRead == 0 || dl.Written-dl.SendRead <= p99 {
			continue
		}
		r.Outliers++
		if r.overlapsGC(dl.SendRead, dl.Written) {
			r.OutliersGC++
		}
	}
}

func (r *Report) overlapsGC(from, to int64) bool {
	for _, s := range r.GC {
		if s.Start <= to && s.End >= from {
			return true
		}
	}
	return false
}

// minus is h − base, bucket by bucket (the same runtime's buckets).
func (h Histogram) minus(base Histogram) Histogram {
	if len(base.Counts) != len(h.Counts) {
		return h
	}
	out := Histogram{Counts: make([]uint64, len(h.Counts)), Buckets: h.Buckets}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i] - base.Counts[i]
	}
	return out
}

// summary returns the histogram's p50, p99 and largest value (upper
// bounds of their buckets, seconds) and the count above 1 ms.
func (h Histogram) summary() (p50, p99, maxv float64, over1ms uint64) {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 || len(h.Buckets) != len(h.Counts)+1 {
		return 0, 0, 0, 0
	}
	upper := func(i int) float64 {
		if math.IsInf(h.Buckets[i+1], 1) || h.Buckets[i+1] == math.MaxFloat64 {
			return h.Buckets[i]
		}
		return h.Buckets[i+1]
	}
	var cum uint64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		cum += c
		if p50 == 0 && float64(cum) >= 0.5*float64(total) {
			p50 = upper(i)
		}
		if p99 == 0 && float64(cum) >= 0.99*float64(total) {
			p99 = upper(i)
		}
		maxv = upper(i)
		if h.Buckets[i] >= 1e-3 {
			over1ms += c
		}
	}
	return p50, p99, maxv, over1ms
}

func us(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) }

// Write prints the report as markdown tables (microseconds).
func (r *Report) Write(w io.Writer) {
	m := r.Meta
	win := float64(m.End-m.Start) / 1e9
	fmt.Fprintf(w, "Window %.2f s, %d events (ring %d, dropped %d), %d messages stored, %d deliveries seen "+
		"(%d by held pulls in %d answers, %d by immediate pulls in %d answers; %d without their send frame in the window).\n\n",
		win, m.Events, m.RingEvents, m.Dropped, r.Stored, len(r.Deliveries),
		r.HeldMessages, r.HeldAnswers, r.ImmediateMessage, r.ImmediateAnswers, r.NoSendRead)
	fmt.Fprintln(w, "| segment (µs) | n | p50 | p90 | p99 | p999 | max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, name := range Segments {
		p := r.Segments[name]
		if p.N == 0 {
			fmt.Fprintf(w, "| %s | 0 | | | | | |\n", name)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", name, p.N, us(p.P50), us(p.P90), us(p.P99), us(p.P999), us(p.Max))
	}
	var pauses []int64
	for _, s := range r.GC {
		pauses = append(pauses, s.PauseNs)
	}
	ps := Summarise(pauses)
	span := "stop-the-world pauses only (no gctrace log given)"
	if r.MarkKnown {
		span = "whole cycles, from the gctrace log"
	}
	fmt.Fprintf(w, "\nGC: %d cycles in the window (%d beyond MemStats' 256 not listed), STW pause p50 %s µs, max %s µs; "+
		"GC spans (%s) cover %.1f%% of the window; GC CPU %.1f%% of the broker's %.2f s (runtime/metrics estimate). "+
		"Of the %d deliveries above the p99 of %q, %d (%.0f%%) overlap a GC span (%.1f%% expected by chance).\n",
		len(r.GC), m.GCMissed, us(ps.P50), us(ps.Max), span, 100*r.GCShare, 100*safeDiv(m.GCCPUSeconds, m.CPUSeconds), m.CPUSeconds,
		r.Outliers, SegReadWritten, r.OutliersGC, 100*safeDiv(float64(r.OutliersGC), float64(r.Outliers)), 100*r.GCShare)
	fmt.Fprintf(w, "Scheduler latency (runnable → running, runtime/metrics): p50 ≤ %s µs, p99 ≤ %s µs, max ≤ %s µs, %d waits over 1 ms; GOMAXPROCS %d, GOGC %q.\n",
		us(int64(r.SchedP50*1e9)), us(int64(r.SchedP99*1e9)), us(int64(r.SchedMax*1e9)), r.SchedOver1m, m.GOMAXPROCS, m.GOGC)
	r.writeSlowest(w, 5)
}

// writeSlowest lists the n slowest deliveries (time in the broker) with
// their segments.
func (r *Report) writeSlowest(w io.Writer, n int) {
	var ds []Delivery
	for _, d := range r.Deliveries {
		if d.SendRead != 0 {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b Delivery) int { return cmp.Compare(b.Written-b.SendRead, a.Written-a.SendRead) })
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSlowest deliveries (µs from the send frame read):\n\n| queue:offset | path | stored | pull read | found | built | written | next pull | GC |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range ds[:min(n, len(ds))] {
		rel := func(t int64) string {
			if t == 0 {
				return ""
			}
			return us(t - d.SendRead)
		}
		path := "immediate"
		if d.Held {
			path = "held"
		}
		gc := ""
		if r.overlapsGC(d.SendRead, d.Written) {
			gc = "yes"
		}
		fmt.Fprintf(w, "| %d:%d | %s | %s | %s | %s | %s | %s | %s | %s |\n", d.Queue, d.Offset, path,
			rel(d.Stored), rel(d.PullRead), rel(d.Found), rel(d.Built), rel(d.Written), rel(d.NextPullRead), gc)
	}
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// String is Write into a string.
func (r *Report) String() string {
	var b strings.Builder
	r.Write(&b)
	return b.String()
}
