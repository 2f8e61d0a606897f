package congestion

// QUIVER patch: Quiver's tests of its BBR sender, driven by a small
// deterministic simulator of one bottleneck link.

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/internal/monotime"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/internal/protocol"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/internal/utils"
)

type simClock struct{ now monotime.Time }

func (c *simClock) Now() monotime.Time { return c.now }

// simLink is a bottleneck of rate bytes per second with a drop-tail queue of
// queueLimit bytes, a base (propagation) RTT, and random loss on the way in.
// The receiver acks every packet at once; the sender declares a packet lost
// when a packet sent three later is acked (no reordering on this path).
type simLink struct {
	t        *testing.T
	clock    *simClock
	rtt      *utils.RTTStats
	cc       SendAlgorithmWithDebugInfos // the controller under test
	b        *bbrSender                  // cc when it is BBR, else nil
	rng      *rand.Rand
	rate     float64 // bytes per second
	baseRTT  time.Duration
	queueLim protocol.ByteCount
	loss     float64

	nextPN      protocol.PacketNumber
	lastDepart  monotime.Time
	acks        []simAck // in arrival order (departures are FIFO)
	outstanding map[protocol.PacketNumber]simSent
	oldest      protocol.PacketNumber
	inflight    protocol.ByteCount
	delivered   protocol.ByteCount
	maxRTT      time.Duration // the largest RTT sample since the last reset
	modes       map[bbrMode]bool
}

type simAck struct {
	pn protocol.PacketNumber
	at monotime.Time
}

type simSent struct {
	at   monotime.Time
	size protocol.ByteCount
}

func newSimLink(t *testing.T, rate float64, baseRTT time.Duration, queueLim protocol.ByteCount, loss float64, seed uint64) *simLink {
	clock := &simClock{now: monotime.Time(time.Hour)}
	rtt := utils.NewRTTStats()
	b := newBBRSender(clock, rtt, &utils.ConnectionStats{}, protocol.InitialPacketSize, nil, seed)
	return &simLink{
		t:           t,
		clock:       clock,
		rtt:         rtt,
		cc:          b,
		b:           b,
		rng:         rand.New(rand.NewPCG(seed, 1)),
		rate:        rate,
		baseRTT:     baseRTT,
		queueLim:    queueLim,
		loss:        loss,
		outstanding: make(map[protocol.PacketNumber]simSent),
		modes:       make(map[bbrMode]bool),
	}
}

func (l *simLink) bdp() protocol.ByteCount {
	return protocol.ByteCount(l.rate * l.baseRTT.Seconds())
}

// run advances the simulation by d, sending whenever the controller allows.
func (l *simLink) run(d time.Duration) {
	end := l.clock.now.Add(d)
	for steps := 0; steps < 10_000_000; steps++ {
		now := l.clock.now
		// Process the acks due by now.
		for len(l.acks) > 0 && !l.acks[0].at.After(now) {
			a := l.acks[0]
			l.acks = l.acks[1:]
			l.ack(a, now)
		}
		// Send what the window and the pacer allow.
		const size = protocol.InitialPacketSize
		for l.cc.CanSend(l.inflight) && l.cc.HasPacingBudget(now) {
			l.send(now, size)
		}
		next := end
		if len(l.acks) > 0 && l.acks[0].at.Before(next) {
			next = l.acks[0].at
		}
		if l.cc.CanSend(l.inflight) {
			ts := l.cc.TimeUntilSend(l.inflight)
			if !ts.After(now) {
				ts = now.Add(time.Microsecond)
			}
			if ts.Before(next) {
				next = ts
			}
		}
		if !now.Before(end) {
			return
		}
		if len(l.acks) == 0 && !l.cc.CanSend(l.inflight) {
			// Every packet in flight was lost and nothing acks them: a
			// probe timeout (3 base RTTs here) declares them lost.
			next = now.Add(3 * l.baseRTT)
			if next.After(end) {
				next = end
			} else {
				l.clock.now = next
				l.declareAllLost()
				continue
			}
		}
		l.clock.now = next
	}
	l.t.Fatal("simulation did not finish")
}

func (l *simLink) send(now monotime.Time, size protocol.ByteCount) {
	pn := l.nextPN
	l.nextPN++
	l.inflight += size
	l.outstanding[pn] = simSent{at: now, size: size}
	l.cc.OnPacketSent(now, l.inflight, pn, size, true)
	if l.rng.Float64() < l.loss {
		return
	}
	queued := protocol.ByteCount(0)
	if l.lastDepart.After(now) {
		queued = protocol.ByteCount(l.lastDepart.Sub(now).Seconds() * l.rate)
	}
	if queued+size > l.queueLim {
		return // drop-tail
	}
	start := now
	if l.lastDepart.After(start) {
		start = l.lastDepart
	}
	l.lastDepart = start.Add(time.Duration(float64(size) / l.rate * float64(time.Second)))
	l.acks = append(l.acks, simAck{pn: pn, at: l.lastDepart.Add(l.baseRTT)})
}

func (l *simLink) ack(a simAck, now monotime.Time) {
	p, ok := l.outstanding[a.pn]
	if !ok {
		return
	}
	prior := l.inflight
	// Loss detection first, as quic-go's handler does.
	for ; l.oldest+3 <= a.pn; l.oldest++ {
		if q, ok := l.outstanding[l.oldest]; ok {
			delete(l.outstanding, l.oldest)
			l.inflight -= q.size
			l.cc.OnCongestionEvent(l.oldest, q.size, prior)
		}
	}
	delete(l.outstanding, a.pn)
	l.inflight -= p.size
	l.delivered += p.size
	sample := now.Sub(p.at)
	l.rtt.UpdateRTT(sample, 0)
	l.maxRTT = max(l.maxRTT, sample)
	l.cc.MaybeExitSlowStart()
	l.cc.OnPacketAcked(a.pn, p.size, prior, now)
	if l.b != nil {
		l.modes[l.b.mode] = true
		l.checkInvariants()
	}
}

func (l *simLink) declareAllLost() {
	prior := l.inflight
	for ; l.oldest < l.nextPN; l.oldest++ {
		if q, ok := l.outstanding[l.oldest]; ok {
			delete(l.outstanding, l.oldest)
			l.inflight -= q.size
			l.cc.OnCongestionEvent(l.oldest, q.size, prior)
		}
	}
}

func (l *simLink) checkInvariants() {
	l.t.Helper()
	b := l.b
	if b.cwnd < b.minPipeCwnd() || b.cwnd > b.maxCwnd() {
		l.t.Fatalf("cwnd %d outside [%d, %d]", b.cwnd, b.minPipeCwnd(), b.maxCwnd())
	}
	if b.pacingRate == 0 || b.pacingRate > bbrMaxBandwidth {
		l.t.Fatalf("pacing rate %d out of range", b.pacingRate)
	}
}

func bwBytes(bw Bandwidth) float64 { return float64(bw / BytesPerSecond) }

func within(got, want, tol float64) bool { return got >= want*(1-tol) && got <= want*(1+tol) }

// goodput measures the delivered bytes per second over d.
func (l *simLink) goodput(d time.Duration) float64 {
	before := l.delivered
	l.run(d)
	return float64(l.delivered-before) / d.Seconds()
}

func TestBBRConvergesToBottleneck(t *testing.T) {
	const rate = 1.25e6 // 10 Mbit/s
	const rtt = 40 * time.Millisecond
	for _, tc := range []struct {
		name   string
		loss   float64
		rounds int
	}{
		{"no loss", 0, 20},
		{"5% random loss", 0.05, 40},
	} {
		for _, seed := range []uint64{7, 21, 99} {
			t.Run(fmt.Sprintf("%s seed %d", tc.name, seed), func(t *testing.T) {
				l := newSimLink(t, rate, rtt, protocol.ByteCount(rate*rtt.Seconds()), tc.loss, seed)
				l.run(time.Duration(tc.rounds) * rtt)
				if !l.b.filledPipe || l.b.mode == bbrStartup {
					t.Fatalf("still in %v after %d rounds", l.b.mode, tc.rounds)
				}
				if got := bwBytes(l.b.bw); !within(got, rate, 0.15) {
					t.Fatalf("bw estimate %.0f B/s after %d rounds, want %.0f ±15%%", got, tc.rounds, rate)
				}
				if l.b.minRTT < rtt || l.b.minRTT > rtt+5*time.Millisecond {
					t.Fatalf("min RTT %v, want about %v", l.b.minRTT, rtt)
				}
				// And it keeps the link busy: Reno at 5 % loss gets a fraction.
				if g := l.goodput(5 * time.Second); g < 0.75*rate*(1-tc.loss) {
					t.Fatalf("goodput %.0f B/s, want at least 75%% of %.0f", g, rate*(1-tc.loss))
				}
				if got := bwBytes(l.b.bw); !within(got, rate, 0.15) {
					t.Fatalf("bw estimate %.0f B/s after 5 s more, want %.0f ±15%%", got, rate)
				}
			})
		}
	}
}

func TestBBRBacksOffWhenQueueBuilds(t *testing.T) {
	const rate = 2.5e6
	const rtt = 20 * time.Millisecond
	// A deep buffer (8 BDPs) that a loss-based controller would fill.
	l := newSimLink(t, rate, rtt, 8*protocol.ByteCount(rate*rtt.Seconds()), 0, 11)
	l.run(3 * time.Second)
	if got := bwBytes(l.b.bw); !within(got, rate, 0.15) {
		t.Fatalf("bw %.0f before the drop, want %.0f", got, rate)
	}
	// The bottleneck halves (another flow arrives): a queue builds and the
	// RTT rises; BBR must bring its model and window down to the new BDP.
	l.rate = rate / 2
	l.run(8 * time.Second)
	if got := bwBytes(l.b.bw); !within(got, rate/2, 0.15) {
		t.Fatalf("bw %.0f B/s 8 s after the drop, want %.0f ±15%%", got, rate/2)
	}
	if got := bwBytes(l.b.pacingRate); got > 1.3*rate/2 {
		t.Fatalf("pacing rate %.0f B/s, want at most 1.3×%.0f", got, rate/2)
	}
	// The window follows the model: at most 2.25 BDP (ProbeBW_UP's gain)
	// plus the aggregation and quantization allowances, where it was 4 new
	// BDPs before the drop; and the standing queue stays bounded: RTT
	// samples stay under 3 base RTTs.
	bdp := l.bdp()
	l.maxRTT = 0
	var maxCwnd protocol.ByteCount
	for range 300 {
		l.run(10 * time.Millisecond)
		maxCwnd = max(maxCwnd, l.b.cwnd)
	}
	if maxCwnd > 3*bdp {
		t.Fatalf("cwnd rose to %d, want at most 3 BDP (BDP %d)", maxCwnd, bdp)
	}
	if l.maxRTT > 3*rtt {
		t.Fatalf("RTT rose to %v with a base of %v: the queue was not drained", l.maxRTT, rtt)
	}
}

func TestBBRHeavyLossBoundsInflight(t *testing.T) {
	const rate = 1.25e6
	const rtt = 40 * time.Millisecond
	l := newSimLink(t, rate, rtt, protocol.ByteCount(rate*rtt.Seconds()), 0.30, 3)
	l.run(10 * time.Second)
	if l.b.inflightHi == infBytes {
		t.Fatal("inflight_hi unset after 10 s at 30% loss")
	}
	if l.b.inflightHi > 2*l.bdp() {
		t.Fatalf("inflight_hi %d, want below 2 BDP (%d) at 30%% loss", l.b.inflightHi, 2*l.bdp())
	}
	if l.b.mode == bbrStartup {
		t.Fatal("still in Startup at 30% loss")
	}
	// The model's bandwidth is not above the link, and data still flows.
	if got := bwBytes(l.b.bw); got > 1.15*rate {
		t.Fatalf("bw %.0f above the link's %.0f", got, rate)
	}
	if g := l.goodput(5 * time.Second); g == 0 {
		t.Fatal("no data delivered at 30% loss")
	}
}

func TestBBRProbeRTTAfterMinRTTWindow(t *testing.T) {
	const rate = 1.25e6
	const rtt = 40 * time.Millisecond
	l := newSimLink(t, rate, rtt, protocol.ByteCount(rate*rtt.Seconds()), 0, 5)
	l.run(4 * time.Second)
	if l.modes[bbrProbeRTT] {
		t.Fatal("ProbeRTT before the min-RTT window expired")
	}
	// Run on in small steps until ProbeRTT, watching its window.
	var entered bool
	for i := 0; i < 400 && !entered; i++ {
		l.run(10 * time.Millisecond)
		entered = l.b.mode == bbrProbeRTT
	}
	if !entered {
		t.Fatalf("no ProbeRTT within 8 s; mode %v", l.b.mode)
	}
	var sawLow bool
	for i := 0; i < 100 && l.b.mode == bbrProbeRTT; i++ {
		l.run(5 * time.Millisecond)
		if l.b.mode == bbrProbeRTT && l.b.cwnd <= l.b.probeRTTCwnd() {
			sawLow = true
		}
	}
	if !sawLow {
		t.Fatal("ProbeRTT did not bound cwnd to half a BDP")
	}
	if !l.b.isProbeBW() {
		t.Fatalf("after ProbeRTT: %v, want ProbeBW", l.b.mode)
	}
}

// TestBBRStateBoundedOnOddSamples feeds samples a real path produces only by
// accident: zero RTTs, 10 s RTTs, acks out of order, acks of unknown packets.
func TestBBRStateBoundedOnOddSamples(t *testing.T) {
	clock := &simClock{now: monotime.Time(time.Hour)}
	b := newBBRSender(clock, utils.NewRTTStats(), &utils.ConnectionStats{}, protocol.InitialPacketSize, nil, 1)
	rng := rand.New(rand.NewPCG(9, 9))
	const size = protocol.InitialPacketSize
	var pn protocol.PacketNumber
	var inflight protocol.ByteCount
	check := func(what string) {
		t.Helper()
		if b.cwnd < b.minPipeCwnd() || b.cwnd > b.maxCwnd() {
			t.Fatalf("%s: cwnd %d out of bounds", what, b.cwnd)
		}
		if b.pacingRate == 0 || b.pacingRate > bbrMaxBandwidth {
			t.Fatalf("%s: pacing rate %d", what, b.pacingRate)
		}
		if b.minRTT < 0 {
			t.Fatalf("%s: min RTT %v", what, b.minRTT)
		}
		_ = b.TimeUntilSend(inflight)
		_ = b.HasPacingBudget(clock.now)
	}
	sendN := func(n int) []protocol.PacketNumber {
		var pns []protocol.PacketNumber
		for range n {
			inflight += size
			b.OnPacketSent(clock.now, inflight, pn, size, true)
			pns = append(pns, pn)
			pn++
		}
		return pns
	}
	ackAll := func(pns []protocol.PacketNumber, at monotime.Time) {
		prior := inflight
		for _, p := range pns {
			inflight -= min(size, inflight)
			b.OnPacketAcked(p, size, prior, at)
		}
	}
	for round := 0; round < 200; round++ {
		pns := sendN(20)
		switch round % 5 {
		case 0: // zero RTT: the ack carries the send time
			ackAll(pns, clock.now)
			check("zero RTT")
		case 1: // a 10 s RTT
			clock.now = clock.now.Add(10 * time.Second)
			ackAll(pns, clock.now)
			check("10 s RTT")
		case 2: // reordered: acks in random order, times going back and forth
			rng.Shuffle(len(pns), func(i, j int) { pns[i], pns[j] = pns[j], pns[i] })
			for i, p := range pns {
				at := clock.now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
				if i%3 == 0 {
					at = clock.now.Add(-time.Millisecond) // before it was sent
				}
				prior := inflight
				inflight -= size
				b.OnPacketAcked(p, size, prior, at)
			}
			check("reordered")
		case 3: // acks for packet numbers never sent, and losses of them
			for i := range 20 {
				b.OnPacketAcked(pn+protocol.PacketNumber(1000+i), size, inflight, clock.now)
				b.OnCongestionEvent(pn+protocol.PacketNumber(5000+i), size, inflight)
			}
			b.OnCongestionEvent(pn, 0, inflight) // an ECN mark
			clock.now = clock.now.Add(30 * time.Millisecond)
			ackAll(pns, clock.now)
			check("unknown packets")
		case 4: // half lost, the rest after 30 ms
			prior := inflight
			for _, p := range pns[:10] {
				inflight -= size
				b.OnCongestionEvent(p, size, prior)
			}
			clock.now = clock.now.Add(30 * time.Millisecond)
			ackAll(pns[10:], clock.now)
			check("losses")
		}
		clock.now = clock.now.Add(time.Millisecond)
	}
	if len(b.packets) > 100 {
		t.Fatalf("%d packet records left after every packet was acked or lost", len(b.packets))
	}
	// A 10 s sample must not have become the min RTT while shorter ones exist.
	if b.minRTT >= 10*time.Second {
		t.Fatalf("min RTT %v", b.minRTT)
	}
}

func TestChoiceCreatesController(t *testing.T) {
	for _, tc := range []struct {
		name string
		bbr  bool
	}{{"", false}, {"reno", false}, {"bbr", true}} {
		alg, err := ParseAlgorithm(tc.name)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		c := New(Choice{Algorithm: alg}, DefaultClock{}, utils.NewRTTStats(), &utils.ConnectionStats{}, protocol.InitialPacketSize, nil)
		if _, isBBR := c.(*bbrSender); isBBR != tc.bbr {
			t.Fatalf("%q made %T", tc.name, c)
		}
	}
	if _, err := ParseAlgorithm("cubic"); err == nil {
		t.Fatal("cubic accepted")
	}
}

// TestBBRAgainstRenoOnRandomLoss runs quic-go's Reno (with Quiver's 0.85
// backoff) and BBR over the same simulated link — 10 Mbit/s, 40 ms, a
// BDP of buffer, 5 % random loss — for 20 s: Reno halves (×0.85) on every
// loss and stays far below the link; BBR keeps it busy.
func TestBBRAgainstRenoOnRandomLoss(t *testing.T) {
	const rate = 1.25e6
	const rtt = 40 * time.Millisecond
	goodput := func(l *simLink) float64 {
		l.run(2 * time.Second)
		return l.goodput(20 * time.Second)
	}
	bbr := newSimLink(t, rate, rtt, protocol.ByteCount(rate*rtt.Seconds()), 0.05, 42)
	reno := newSimLink(t, rate, rtt, protocol.ByteCount(rate*rtt.Seconds()), 0.05, 42)
	reno.cc = NewCubicSender(reno.clock, reno.rtt, &utils.ConnectionStats{}, protocol.InitialPacketSize, true, nil, 0.85)
	reno.b = nil
	gb, gr := goodput(bbr), goodput(reno)
	t.Logf("goodput at 5%% loss: bbr %.0f B/s, reno %.0f B/s, link %.0f B/s", gb, gr, rate)
	if gb < 0.75*rate*0.95 {
		t.Fatalf("bbr goodput %.0f B/s, want at least 75%% of what the link delivers", gb)
	}
	if gb < 2*gr {
		t.Fatalf("bbr goodput %.0f B/s not twice reno's %.0f", gb, gr)
	}
}

// TestBBRCountsLosses: the connection's loss counters, which quictransport's
// Stats and the lab's packet tables read, count losses under BBR as under
// reno (the lab reported 0 lost for every BBR cell before).
func TestBBRCountsLosses(t *testing.T) {
	clock := &simClock{now: monotime.Time(time.Hour)}
	stats := &utils.ConnectionStats{}
	b := newBBRSender(clock, utils.NewRTTStats(), stats, protocol.InitialPacketSize, nil, 1)
	const size = protocol.InitialPacketSize
	for pn := range protocol.PacketNumber(4) {
		b.OnPacketSent(clock.now, size*protocol.ByteCount(pn+1), pn, size, true)
	}
	b.OnCongestionEvent(1, size, 4*size)
	b.OnCongestionEvent(3, size, 3*size)
	b.OnCongestionEvent(2, 0, 2*size) // an ECN mark loses nothing
	if got := stats.PacketsLost.Load(); got != 2 {
		t.Fatalf("PacketsLost = %d, want 2", got)
	}
	if got := stats.BytesLost.Load(); got != 2*uint64(size) {
		t.Fatalf("BytesLost = %d, want %d", got, 2*size)
	}
}
