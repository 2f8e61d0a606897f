// Package linkemu is a user-space link emulator for the lossy-link
// laboratory: `tc netem` is not available on the project's machines, so
// packets between two network namespaces go through TUN devices and this
// process, which delays, jitters, drops (at random or in Gilbert–Elliott
// bursts), reorders and rate-limits them, each direction on its own, before
// carrying them over a veth pair to the other namespace (see Lab).
//
// The models (Impairer) are plain code over a seeded RNG, so their
// statistics are unit-tested deterministically; Lab is the plumbing.
package linkemu

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// GilbertElliott is the two-state bursty loss model: in the good state a
// packet is lost with probability LossGood, in the bad state with LossBad;
// before each packet the state flips good→bad with probability P and
// bad→good with probability R. The mean bad run lasts 1/R packets and the
// long-run loss rate is (R·LossGood + P·LossBad)/(P+R).
type GilbertElliott struct {
	P, R              float64
	LossGood, LossBad float64
}

// Rate is the model's long-run loss rate.
func (g GilbertElliott) Rate() float64 {
	if g.P+g.R == 0 {
		return g.LossGood
	}
	return (g.R*g.LossGood + g.P*g.LossBad) / (g.P + g.R)
}

// Bursty returns the Gilbert–Elliott model with long-run loss rate loss
// whose bad state loses lossBad of the packets and lasts burst packets on
// average (good state lossless).
func Bursty(loss float64, burst, lossBad float64) GilbertElliott {
	r := 1 / burst
	// loss = lossBad·P/(P+R)  ⇒  P = loss·R/(lossBad−loss)
	return GilbertElliott{P: loss * r / (lossBad - loss), R: r, LossBad: lossBad}
}

// Dir is the impairment of one direction of the link.
type Dir struct {
	// Delay is the one-way propagation delay; Jitter adds a uniform
	// [-Jitter, +Jitter] to it per packet. Packets leave in order (a later
	// packet never overtakes an earlier one) unless reordered.
	Delay, Jitter time.Duration
	// Loss drops each packet independently with this probability.
	Loss float64
	// Bursts, when set, drops packets by the Gilbert–Elliott model as
	// well (on top of Loss).
	Bursts *GilbertElliott
	// Reorder holds this fraction of the packets back by ReorderGap
	// (default Delay/2 + 1 ms), so that packets sent after them overtake.
	Reorder    float64
	ReorderGap time.Duration
	// Rate is the link's bandwidth in bytes per second (0: unlimited):
	// packets queue behind each other's serialisation time.
	Rate int64
	// Limit is the most packets in flight in this direction; further
	// packets are dropped (a router's tail drop). Default 4096.
	Limit int
}

// Profile is a named link: both directions.
type Profile struct {
	Name       string
	Note       string
	AtoB, BtoA Dir
}

func sym(name, note string, d Dir) Profile { return Profile{Name: name, Note: note, AtoB: d, BtoA: d} }

// Profiles are the laboratory's links. Delays are round trips split evenly
// between the directions; loss rates apply to each direction.
func Profiles() map[string]Profile {
	cell := Bursty(0.02, 4, 0.5)
	return map[string]Profile{
		"lan":   sym("lan", "0.2 ms RTT, no loss", Dir{Delay: 100 * time.Microsecond}),
		"loss1": sym("loss1", "LAN with 1% random loss each way", Dir{Delay: 100 * time.Microsecond, Loss: 0.01}),
		"loss5": sym("loss5", "LAN with 5% random loss each way", Dir{Delay: 100 * time.Microsecond, Loss: 0.05}),
		"wifi": sym("wifi", "5 ms RTT ±1 ms jitter, 1% random loss each way, 0.1% reordering",
			Dir{Delay: 2500 * time.Microsecond, Jitter: 500 * time.Microsecond, Loss: 0.01, Reorder: 0.001}),
		"cellular": sym("cellular", "50 ms RTT ±5 ms jitter, 2% loss each way in Gilbert–Elliott bursts (mean 4 packets, half lost), 0.5% reordering, 20 Mbit/s",
			Dir{Delay: 25 * time.Millisecond, Jitter: 2500 * time.Microsecond, Bursts: &cell, Reorder: 0.005, Rate: 20e6 / 8}),
		// A shared bottleneck for fairness runs: a router queue of about
		// two BDPs (36 packets fit the 20 ms at 20 Mbit/s, 64 more wait).
		"bottleneck": sym("bottleneck", "20 ms RTT, 20 Mbit/s, no loss, a 100-packet limit (about 2 BDPs of 1,400-byte packets)",
			Dir{Delay: 10 * time.Millisecond, Rate: 20e6 / 8, Limit: 100}),
		"satellite": sym("satellite", "300 ms RTT ±10 ms jitter, 1% random loss each way, 20 Mbit/s",
			Dir{Delay: 150 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.01, Rate: 20e6 / 8}),
	}
}

// ProfileNames are Profiles' keys, sorted.
func ProfileNames() []string {
	var n []string
	for k := range Profiles() {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Lookup returns the named profile.
func Lookup(name string) (Profile, error) {
	p, ok := Profiles()[name]
	if !ok {
		return Profile{}, fmt.Errorf("linkemu: unknown profile %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return p, nil
}

// Impairer decides the fate of one direction's packets. It is not safe
// for concurrent use.
type Impairer struct {
	d   Dir
	rng *rand.Rand
	bad bool
	// last is the latest in-order release time handed out; busy is when
	// the link finishes serialising the packets before.
	last, busy time.Time
	inFlight   int
}

// NewImpairer returns an impairer for d drawing from a PCG seeded with seed.
func NewImpairer(d Dir, seed uint64) *Impairer {
	if d.Limit <= 0 {
		d.Limit = 4096
	}
	if d.ReorderGap <= 0 {
		d.ReorderGap = d.Delay/2 + time.Millisecond
	}
	return &Impairer{d: d, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Next decides a packet of size bytes arriving at now: dropped, or
// released at the returned time. Call Done when a released packet left.
func (m *Impairer) Next(now time.Time, size int) (release time.Time, drop bool) {
	if g := m.d.Bursts; g != nil {
		if m.bad {
			if m.rng.Float64() < g.R {
				m.bad = false
			}
		} else if m.rng.Float64() < g.P {
			m.bad = true
		}
		lp := g.LossGood
		if m.bad {
			lp = g.LossBad
		}
		if lp > 0 && m.rng.Float64() < lp {
			return time.Time{}, true
		}
	}
	if m.d.Loss > 0 && m.rng.Float64() < m.d.Loss {
		return time.Time{}, true
	}
	if m.inFlight >= m.d.Limit {
		return time.Time{}, true
	}
	start := now
	if m.d.Rate > 0 {
		if m.busy.After(start) {
			start = m.busy
		}
		m.busy = start.Add(time.Duration(int64(size) * int64(time.Second) / m.d.Rate))
		start = m.busy
	}
	delay := m.d.Delay
	if j := m.d.Jitter; j > 0 {
		delay += time.Duration(m.rng.Int64N(int64(2*j)+1)) - j
		delay = max(delay, 0)
	}
	release = start.Add(delay)
	if m.d.Reorder > 0 && m.rng.Float64() < m.d.Reorder {
		m.inFlight++
		return release.Add(m.d.ReorderGap), false
	}
	if release.Before(m.last) {
		release = m.last
	}
	m.last = release
	m.inFlight++
	return release, false
}

// Done records that a released packet left the link.
func (m *Impairer) Done() { m.inFlight-- }
