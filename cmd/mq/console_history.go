package main

// The console's history: from the moment the console starts, a sampler
// (one goroutine, every interval, 10 s in `mq console` and `mq dev`) reads
// the cluster's cumulative counters and keeps the last hour of them in
// fixed rings, whether or not anyone has the page open. The charts, the
// overview's top-10 and the TPS columns are rates computed from these
// counters (messages per second between samples).
//
// What is kept, per series, is two int64 rings of histSlots(interval)
// samples (361 at 10 s: one hour) sharing one ring of sample times:
//
//   - a broker: messages stored and delivered today (runtime info
//     msgPutTotalTodayNow, msgGetTotalTodayNow);
//   - a topic: the sum of its queues' max offsets (messages written) and
//     the messages the tracked groups have committed on it (accumulated
//     from their offset advances, so a group starting or stopping to be
//     tracked makes no jump);
//   - a consumer group: the sum of its committed offsets (consumed) and
//     its lag.
//
// The number of series is capped: histMaxBrokers brokers, histMaxTopics
// topics and histMaxGroups groups, so the samples take at most
// (64+500+500) × 2 rings × 721 slots × 8 bytes ≈ 12 MiB at the shortest
// intervals and ≈ 6.2 MiB at 10 s. The sampler's calls are bounded the
// same way: per tick it reads the tracked series plus at most histProbe
// untracked candidates of each kind. Below a cap every topic or group is
// tracked. At a cap, the candidates are taken in turn (a rotating cursor
// over the untracked names), and one is admitted only when it was active
// more recently than the tracked series of its kind that was idle the
// longest, which is evicted (ties: the name sorting last goes first).
// Activity is the last time a series' counters moved, or the broker's
// last-write / last-consume timestamp of the topic or group, whichever
// is later. Topics and groups that no longer exist are dropped at once.

import (
	"context"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"
)

const (
	histMaxBrokers = 64
	histMaxTopics  = 500
	histMaxGroups  = 500
	// histProbe is how many untracked topics (and groups) a tick reads.
	histProbe = 16
	// histMaxSlots bounds a ring whatever the interval.
	histMaxSlots = 721
	// histMissing marks a slot with no sample of a series.
	histMissing = math.MinInt64
)

// Series kinds.
const (
	kindBroker = "broker"
	kindTopic  = "topic"
	kindGroup  = "group"
)

// histSlots is the ring length for interval: one hour and one sample,
// at most histMaxSlots.
func histSlots(interval time.Duration) int {
	if interval <= 0 {
		return histMaxSlots
	}
	return min(int(time.Hour/interval)+1, histMaxSlots)
}

// hseries is one tracked broker, topic or group.
type hseries struct {
	kind, name string
	// a and b are rings of counters (see the file comment); histMissing
	// where there is no sample.
	a, b []int64
	// active is the last activity, epoch ms.
	active int64
}

// hobs is one observation of a series in a tick.
type hobs struct {
	a, b   int64
	active int64 // the broker's own timestamp of last activity, 0 if none
}

type history struct {
	mu    sync.Mutex
	slots int
	times []int64 // ring of sample times (epoch ms); 0: empty
	next  int     // the slot written next
	n     int     // filled slots
	// caps per kind (tests lower them).
	caps   map[string]int
	series map[string]map[string]*hseries // kind → name
	cursor map[string]int                 // probe cursor per kind
}

func newHistory(interval time.Duration) *history {
	h := &history{caps: map[string]int{kindBroker: histMaxBrokers, kindTopic: histMaxTopics, kindGroup: histMaxGroups},
		series: map[string]map[string]*hseries{kindBroker: {}, kindTopic: {}, kindGroup: {}}, cursor: map[string]int{}}
	h.reset(interval)
	return h
}

// reset empties the history and sizes its rings for interval.
func (h *history) reset(interval time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots = histSlots(interval)
	h.times = make([]int64, h.slots)
	h.next, h.n = 0, 0
	for k := range h.series {
		h.series[k] = map[string]*hseries{}
	}
}

func (h *history) newSeries(kind, name string) *hseries {
	s := &hseries{kind: kind, name: name, a: make([]int64, h.slots), b: make([]int64, h.slots)}
	for i := range s.a {
		s.a[i], s.b[i] = histMissing, histMissing
	}
	return s
}

// plan is what to read of kind this tick, given every existing name:
// the tracked ones, and untracked candidates (as many as free slots, at
// least histProbe when full). Tracked series whose name is gone are
// dropped.
func (h *history) plan(kind string, names []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tracked := h.series[kind]
	present := make(map[string]bool, len(names))
	var out, untracked []string
	for _, n := range names {
		present[n] = true
		if tracked[n] != nil {
			out = append(out, n)
		} else {
			untracked = append(untracked, n)
		}
	}
	for n := range tracked {
		if !present[n] {
			delete(tracked, n)
		}
	}
	if len(untracked) == 0 {
		return out
	}
	sort.Strings(untracked)
	take := min(len(untracked), max(h.caps[kind]-len(tracked), 0)+histProbe)
	start := h.cursor[kind] % len(untracked)
	for i := range take {
		out = append(out, untracked[(start+i)%len(untracked)])
	}
	h.cursor[kind] = (start + take) % len(untracked)
	return out
}

// record stores one tick taken at t (epoch ms): obs by kind and name.
// Tracked series not observed get a gap; untracked ones observed are
// admitted as the file comment says.
func (h *history) record(t int64, obs map[string]map[string]hobs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.next
	prev := (i - 1 + h.slots) % h.slots
	h.times[i] = t
	h.next = (i + 1) % h.slots
	h.n = min(h.n+1, h.slots)
	for kind, tracked := range h.series {
		got := obs[kind]
		for name, s := range tracked {
			o, ok := got[name]
			if !ok {
				s.a[i], s.b[i] = histMissing, histMissing
				continue
			}
			if (s.a[prev] != histMissing && s.a[prev] != o.a) || (s.b[prev] != histMissing && s.b[prev] != o.b) {
				s.active = max(s.active, t)
			}
			s.a[i], s.b[i] = o.a, o.b
			s.active = max(s.active, o.active)
		}
		// Candidates, most recently active first.
		var cand []string
		for name := range got {
			if tracked[name] == nil {
				cand = append(cand, name)
			}
		}
		sort.Slice(cand, func(x, y int) bool {
			ax, ay := got[cand[x]].active, got[cand[y]].active
			if ax != ay {
				return ax > ay
			}
			return cand[x] < cand[y]
		})
		for _, name := range cand {
			o := got[name]
			if len(tracked) >= h.caps[kind] {
				victim := h.idlest(tracked)
				if victim == nil || victim.active >= o.active {
					continue
				}
				delete(tracked, victim.name)
			}
			s := h.newSeries(kind, name)
			s.a[i], s.b[i], s.active = o.a, o.b, o.active
			tracked[name] = s
		}
	}
}

// idlest is the series idle the longest (ties: the name sorting last).
func (h *history) idlest(tracked map[string]*hseries) *hseries {
	var v *hseries
	for _, s := range tracked {
		if v == nil || s.active < v.active || (s.active == v.active && s.name > v.name) {
			v = s
		}
	}
	return v
}

// order is the ring's filled slots, oldest first.
func (h *history) order() []int {
	out := make([]int, 0, h.n)
	for k := h.n; k > 0; k-- {
		out = append(out, (h.next-k+h.slots)%h.slots)
	}
	return out
}

// tracked lists the tracked names of kind, sorted.
func (h *history) tracked(kind string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sortedKeys(h.series[kind])
}

// samples is how many ticks the history holds.
func (h *history) samples() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// ringBytes is the memory the rings take.
func (h *history) ringBytes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.times)
	for _, m := range h.series {
		for _, s := range m {
			n += len(s.a) + len(s.b)
		}
	}
	return n * 8
}

// rateWindow is what a TPS figure averages over.
const rateWindow = time.Minute

// tps is the rate of kind/name's counters a and b over the last
// rateWindow (messages per second); nil when unknown (fewer than two
// samples, or a counter went back).
func (h *history) tps(kind, name string) (a, b *float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[kind][name]
	if s == nil {
		return nil, nil
	}
	idx := h.order()
	return h.windowRate(idx, s.a), h.windowRate(idx, s.b)
}

func (h *history) windowRate(idx []int, ring []int64) *float64 {
	last := -1
	for k := len(idx) - 1; k >= 0; k-- {
		if ring[idx[k]] != histMissing {
			last = k
			break
		}
	}
	if last < 1 {
		return nil
	}
	tl := h.times[idx[last]]
	first := -1
	for k := last - 1; k >= 0; k-- {
		if tl-h.times[idx[k]] > rateWindow.Milliseconds() && first >= 0 {
			break
		}
		if ring[idx[k]] != histMissing {
			first = k
		}
	}
	if first < 0 {
		return nil
	}
	dv, dt := ring[idx[last]]-ring[idx[first]], tl-h.times[idx[first]]
	if dv < 0 || dt <= 0 {
		return nil
	}
	r := float64(dv) * 1000 / float64(dt)
	return &r
}

// last is kind/name's latest b counter (a group's lag), ok false if none.
func (h *history) last(kind, name string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[kind][name]
	if s == nil || h.n == 0 {
		return 0, false
	}
	i := (h.next - 1 + h.slots) % h.slots
	if s.b[i] == histMissing {
		return 0, false
	}
	return s.b[i], true
}

// histLine is one line of a chart: values per sample time, null where
// unknown.
type histLine struct {
	Name   string     `json:"name"`
	Values []*float64 `json:"values"`
}

// histView is GET /api/history's answer.
type histView struct {
	Interval int64      `json:"interval"` // ms
	Times    []int64    `json:"times"`
	Lines    []histLine `json:"lines"`
}

// lineSpec asks for one line: the rate of counter a or b of a series, or
// its b value as is (gauge).
type lineSpec struct {
	kind, name, label string
	b, gauge          bool
}

// view draws lines over the held samples.
func (h *history) view(interval time.Duration, specs []lineSpec) histView {
	h.mu.Lock()
	defer h.mu.Unlock()
	idx := h.order()
	v := histView{Interval: interval.Milliseconds(), Times: make([]int64, len(idx)), Lines: []histLine{}}
	for k, i := range idx {
		v.Times[k] = h.times[i]
	}
	for _, sp := range specs {
		s := h.series[sp.kind][sp.name]
		if s == nil {
			continue
		}
		ring := s.a
		if sp.b {
			ring = s.b
		}
		l := histLine{Name: sp.label, Values: make([]*float64, len(idx))}
		for k, i := range idx {
			if ring[i] == histMissing {
				continue
			}
			if sp.gauge {
				f := float64(ring[i])
				l.Values[k] = &f
				continue
			}
			if k == 0 || ring[idx[k-1]] == histMissing {
				continue
			}
			dv, dt := ring[i]-ring[idx[k-1]], h.times[i]-h.times[idx[k-1]]
			if dv < 0 || dt <= 0 {
				continue
			}
			f := float64(dv) * 1000 / float64(dt)
			l.Values[k] = &f
		}
		v.Lines = append(v.Lines, l)
	}
	return v
}

// sampler is the state of the sampling goroutine: the groups' last
// committed offsets per topic, from which the topics' consumed counters
// accumulate.
type sampler struct {
	prev     map[string]int64 // group + "\x00" + topic → committed offset sum
	consumed map[string]int64 // topic → messages committed by tracked groups
}

// sample reads one tick of counters (see the file comment).
func (c *consoleServer) sample(ctx context.Context) {
	a := c.adm(io.Discard)
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ms, err := a.masters(ctx)
	if err != nil {
		c.log.Debug("console: sample", "err", err)
		return
	}
	lib, err := a.library()
	if err != nil {
		return
	}
	now := time.Now().UnixMilli()
	obs := map[string]map[string]hobs{kindBroker: {}, kindTopic: {}, kindGroup: {}}

	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	want := map[string]bool{}
	for _, n := range c.hist.plan(kindBroker, names) {
		want[n] = true
	}
	brokerNames := map[string]bool{}
	for _, m := range ms {
		brokerNames[m.Name], brokerNames[m.Cluster] = true, true
		if !want[m.Name] {
			continue
		}
		rt, err := a.runtimeInfo(ctx, m.Addr)
		if err != nil {
			continue
		}
		in, _ := strconv.ParseInt(rt["msgPutTotalTodayNow"], 10, 64)
		out, _ := strconv.ParseInt(rt["msgGetTotalTodayNow"], 10, 64)
		obs[kindBroker][m.Name] = hobs{a: in, b: out}
	}

	// Groups first: their offset advances feed the topics' consumed
	// counters.
	seen := map[string]bool{}
	for _, m := range ms {
		table, err := lib.SubscriptionGroups(ctx, m.Addr)
		if err != nil {
			continue
		}
		for g := range table {
			if !isSystemGroup(g) {
				seen[g] = true
			}
		}
	}
	if c.samp.prev == nil {
		c.samp.prev, c.samp.consumed = map[string]int64{}, map[string]int64{}
	}
	prev := map[string]int64{}
	for _, g := range c.hist.plan(kindGroup, sortedKeys(seen)) {
		var o hobs
		byTopic := map[string]int64{}
		ok := false
		for _, m := range ms {
			cs, err := lib.ConsumeStats(ctx, m.Addr, g, "")
			if err != nil {
				continue
			}
			ok = true
			for mq, w := range cs.OffsetTable {
				o.a += w.ConsumerOffset
				o.b += max(w.BrokerOffset-w.ConsumerOffset, 0)
				o.active = max(o.active, w.LastTimestamp)
				byTopic[mq.Topic] += w.ConsumerOffset
			}
		}
		if !ok {
			continue
		}
		obs[kindGroup][g] = o
		for t, off := range byTopic {
			k := g + "\x00" + t
			if p, had := c.samp.prev[k]; had && off > p {
				c.samp.consumed[t] += off - p
			}
			prev[k] = off
		}
	}
	c.samp.prev = prev

	all, err := lib.Topics(ctx)
	if err == nil {
		var topics []string
		exists := map[string]bool{}
		for _, t := range all {
			if !isInternalTopic(t) && !brokerNames[t] {
				topics = append(topics, t)
				exists[t] = true
			}
		}
		for t := range c.samp.consumed {
			if !exists[t] {
				delete(c.samp.consumed, t)
			}
		}
		for _, t := range c.hist.plan(kindTopic, topics) {
			var o hobs
			ok := false
			for _, m := range ms {
				tbl, err := lib.TopicStats(ctx, m.Addr, t)
				if err != nil {
					continue
				}
				ok = true
				for _, q := range tbl {
					o.a += q.MaxOffset
					o.active = max(o.active, q.LastUpdateTimestamp)
				}
			}
			if ok {
				o.b = c.samp.consumed[t]
				obs[kindTopic][t] = o
			}
		}
	}
	c.hist.record(now, obs)
}
