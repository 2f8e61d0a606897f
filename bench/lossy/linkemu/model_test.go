package linkemu

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_700_000_000, 0)

// run feeds n packets of size bytes, one every gap, and returns the drop
// pattern and the delays of the packets kept (each released at once).
func run(d Dir, seed uint64, n int, gap time.Duration, size int) (drops []bool, delays []time.Duration) {
	m := NewImpairer(d, seed)
	for i := range n {
		now := t0.Add(time.Duration(i) * gap)
		rel, drop := m.Next(now, size)
		drops = append(drops, drop)
		if !drop {
			delays = append(delays, rel.Sub(now))
			m.Done()
		}
	}
	return drops, delays
}

func lossRate(drops []bool) float64 {
	n := 0
	for _, d := range drops {
		if d {
			n++
		}
	}
	return float64(n) / float64(len(drops))
}

// meanBurst is the mean length of runs of consecutive drops.
func meanBurst(drops []bool) float64 {
	runs, lost, in := 0, 0, false
	for _, d := range drops {
		if d {
			lost++
			if !in {
				runs++
			}
		}
		in = d
	}
	if runs == 0 {
		return 0
	}
	return float64(lost) / float64(runs)
}

func TestRandomLoss(t *testing.T) {
	tests := []struct {
		give float64
	}{{0}, {0.01}, {0.05}, {0.2}}
	for _, tt := range tests {
		drops, _ := run(Dir{Loss: tt.give}, 1, 200_000, time.Microsecond, 100)
		got := lossRate(drops)
		// 200k Bernoulli trials: 5 standard deviations.
		tol := 5 * math.Sqrt(tt.give*(1-tt.give)/200_000)
		assert.InDelta(t, tt.give, got, tol+1e-9, "loss %v", tt.give)
		if tt.give > 0 {
			// Independent drops: bursts average 1/(1-p).
			assert.InDelta(t, 1/(1-tt.give), meanBurst(drops), 0.05, "loss %v", tt.give)
		}
	}
}

func TestGilbertElliottBursts(t *testing.T) {
	g := Bursty(0.02, 4, 0.5)
	require.InDelta(t, 0.02, g.Rate(), 1e-12)
	drops, _ := run(Dir{Bursts: &g}, 7, 400_000, time.Microsecond, 100)
	assert.InDelta(t, 0.02, lossRate(drops), 0.003)
	// Drops cluster: bursts are longer than random loss's 1.02, and the
	// chance that the packet after a drop is dropped too is far above 2%.
	assert.Greater(t, meanBurst(drops), 1.3)
	after, both := 0, 0
	for i := 1; i < len(drops); i++ {
		if drops[i-1] {
			after++
			if drops[i] {
				both++
			}
		}
	}
	assert.Greater(t, float64(both)/float64(after), 0.2)

	// Same seed, same pattern; another seed, another pattern.
	again, _ := run(Dir{Bursts: &g}, 7, 400_000, time.Microsecond, 100)
	assert.Equal(t, drops, again)
	other, _ := run(Dir{Bursts: &g}, 8, 400_000, time.Microsecond, 100)
	assert.NotEqual(t, drops, other)
}

func TestDelayJitterInOrder(t *testing.T) {
	d := Dir{Delay: 25 * time.Millisecond, Jitter: 5 * time.Millisecond}
	m := NewImpairer(d, 3)
	var last time.Time
	var minD, maxD time.Duration = time.Hour, 0
	var sum time.Duration
	const n = 10_000
	for i := range n {
		now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
		rel, drop := m.Next(now, 1200)
		require.False(t, drop)
		m.Done()
		require.False(t, rel.Before(last), "packet %d overtook the one before", i)
		last = rel
		dl := rel.Sub(now)
		minD, maxD, sum = min(minD, dl), max(maxD, dl), sum+dl
	}
	assert.GreaterOrEqual(t, minD, 20*time.Millisecond)
	assert.LessOrEqual(t, maxD, 30*time.Millisecond)
	// In-order release pulls the mean above Delay a little, never below.
	mean := sum / n
	assert.GreaterOrEqual(t, mean, 25*time.Millisecond)
	assert.Less(t, mean, 29*time.Millisecond)
}

func TestReorder(t *testing.T) {
	d := Dir{Delay: 10 * time.Millisecond, Reorder: 0.1}
	m := NewImpairer(d, 5)
	var rels []time.Time
	for i := range 10_000 {
		rel, drop := m.Next(t0.Add(time.Duration(i)*time.Millisecond), 100)
		require.False(t, drop)
		m.Done()
		rels = append(rels, rel)
	}
	overtaken := 0
	for i := 0; i+1 < len(rels); i++ {
		if rels[i+1].Before(rels[i]) {
			overtaken++
		}
	}
	// Held back by Delay/2+1 ms = 6 ms with packets 1 ms apart: the next
	// packet overtakes every held one.
	assert.InDelta(t, 0.1, float64(overtaken)/float64(len(rels)), 0.015)
}

func TestRateAndLimit(t *testing.T) {
	// 1 MB/s: a 1000-byte packet takes 1 ms on the wire; ten sent at once
	// leave 1 ms apart.
	m := NewImpairer(Dir{Rate: 1_000_000, Limit: 5}, 1)
	var rels []time.Time
	drops := 0
	for range 10 {
		rel, drop := m.Next(t0, 1000)
		if drop {
			drops++
			continue
		}
		rels = append(rels, rel)
	}
	require.Len(t, rels, 5, "the limit of 5 in flight drops the rest")
	assert.Equal(t, 5, drops)
	for i, r := range rels {
		assert.Equal(t, time.Duration(i+1)*time.Millisecond, r.Sub(t0))
	}
	m.Done()
	_, drop := m.Next(t0, 1000)
	assert.False(t, drop, "a slot freed by Done takes a packet again")
}

func TestProfiles(t *testing.T) {
	for _, name := range []string{"lan", "wifi", "cellular", "satellite", "loss1", "loss5", "bottleneck"} {
		p, err := Lookup(name)
		require.NoError(t, err)
		assert.Equal(t, name, p.Name)
	}
	_, err := Lookup("wfi")
	assert.ErrorContains(t, err, `unknown profile "wfi" (known: bottleneck, cellular, lan, loss1, loss5, satellite, wifi)`)
	cell, _ := Lookup("cellular")
	assert.InDelta(t, 0.02, cell.AtoB.Bursts.Rate(), 1e-9)
	assert.Equal(t, 50*time.Millisecond, cell.AtoB.Delay+cell.BtoA.Delay)
}
