package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tick plans and records one sample of topics at t, each topic's counter
// and activity given by f.
func histTick(h *history, t int64, topics []string, f func(name string) hobs) {
	obs := map[string]hobs{}
	for _, n := range h.plan(kindTopic, topics) {
		obs[n] = f(n)
	}
	h.record(t, map[string]map[string]hobs{kindTopic: obs})
}

// TestConsoleHistoryBounded: with 5,000 topics (10 times the cap) over
// more than an hour of 10 s ticks, the history tracks at most
// histMaxTopics of them, every ring keeps its fixed length, each tick
// reads at most cap+histProbe topics, and the memory stays under the
// documented bound.
func TestConsoleHistoryBounded(t *testing.T) {
	h := newHistory(10 * time.Second)
	require.Equal(t, 361, h.slots)
	var topics []string
	for i := range 5000 {
		topics = append(topics, fmt.Sprintf("T%05d", i))
	}
	var groups []string
	for i := range 5000 {
		groups = append(groups, fmt.Sprintf("G%05d", i))
	}
	t0 := int64(1_700_000_000_000)
	for k := range 400 {
		now := t0 + int64(k)*10_000
		plan := h.plan(kindTopic, topics)
		require.LessOrEqual(t, len(plan), histMaxTopics+histProbe, "reads per tick are bounded")
		obs := map[string]hobs{}
		for _, n := range plan {
			obs[n] = hobs{a: int64(k), active: now}
		}
		gobs := map[string]hobs{}
		for _, n := range h.plan(kindGroup, groups) {
			gobs[n] = hobs{a: int64(k), b: 1, active: now}
		}
		h.record(now, map[string]map[string]hobs{kindTopic: obs, kindGroup: gobs})
	}
	assert.Len(t, h.tracked(kindTopic), histMaxTopics)
	assert.Len(t, h.tracked(kindGroup), histMaxGroups)
	assert.Equal(t, 361, h.samples(), "one hour of 10 s samples, the oldest overwritten")
	for _, m := range h.series {
		for _, s := range m {
			require.Len(t, s.a, 361)
			require.Len(t, s.b, 361)
		}
	}
	// (64+500+500) series × 2 rings × 361 slots × 8 bytes + the times.
	limit := ((histMaxBrokers+histMaxTopics+histMaxGroups)*2 + 1) * 361 * 8
	assert.LessOrEqual(t, h.ringBytes(), limit)
	assert.Less(t, float64(limit), 6.3*(1<<20), "the bound the file comment states")
	// The shortest intervals still keep at most histMaxSlots samples.
	assert.Equal(t, histMaxSlots, histSlots(20*time.Millisecond))
}

// TestConsoleHistoryEviction: at the cap, a candidate is admitted only
// when it was active more recently than the idlest tracked series, which
// goes (ties: the name sorting last); deleted topics go at once; every
// untracked topic is probed in turn.
func TestConsoleHistoryEviction(t *testing.T) {
	h := newHistory(time.Second)
	h.caps[kindTopic] = 3
	active := map[string]int64{"A": 100, "B": 300, "C": 300, "D": 0, "E": 0}
	f := func(n string) hobs { return hobs{a: 1, active: active[n]} }
	all := []string{"A", "B", "C", "D", "E"}
	histTick(h, 1000, all, f)
	require.Equal(t, []string{"A", "B", "C"}, h.tracked(kindTopic), "the most recently active fill the free slots")

	active["E"] = 50 // older than A: stays out
	histTick(h, 2000, all, f)
	require.Equal(t, []string{"A", "B", "C"}, h.tracked(kindTopic))

	active["D"] = 200 // newer than A (100): A, idle the longest, goes
	histTick(h, 3000, all, f)
	require.Equal(t, []string{"B", "C", "D"}, h.tracked(kindTopic))

	// A tie at the idlest: the name sorting last goes first. B and C at
	// 300 both; D's counter moves at t=4000, so D is active at 4000.
	active["A"] = 350
	histTick(h, 4000, all, func(n string) hobs {
		o := f(n)
		if n == "D" {
			o.a = 2
		}
		return o
	})
	require.Equal(t, []string{"A", "B", "D"}, h.tracked(kindTopic), "C (tied with B at 300) evicted")

	// Deleted: dropped at once, and the slot goes to a candidate.
	histTick(h, 5000, []string{"A", "D", "C", "E"}, f)
	require.Equal(t, []string{"A", "C", "D"}, h.tracked(kindTopic))

	// Probing rotates over the untracked names.
	h2 := newHistory(time.Second)
	h2.caps[kindTopic] = 1
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("P%02d", i))
	}
	histTick(h2, 1, names, func(string) hobs { return hobs{} })
	probed := map[string]bool{}
	for range 3 {
		for _, n := range h2.plan(kindTopic, names) {
			probed[n] = true
		}
	}
	assert.Len(t, probed, 40, "three ticks of 16 probes reach all 39 untracked names")
}

// TestConsoleHistoryRates: a TPS is the counter's advance over the last
// minute; a counter going back (an offset reset, midnight) is unknown,
// not negative; gaps are nulls in the lines.
func TestConsoleHistoryRates(t *testing.T) {
	h := newHistory(10 * time.Second)
	vals := []int64{0, 100, 300, 600, 1000, 1500, 2100, 2800}
	for k, v := range vals {
		histTick(h, int64(k)*10_000, []string{"T"}, func(string) hobs { return hobs{a: v, b: v / 2} })
	}
	in, out := h.tps(kindTopic, "T")
	require.NotNil(t, in)
	// Last minute: from t=10 s (100) to t=70 s (2800).
	assert.InDelta(t, 45.0, *in, 1e-9)
	assert.InDelta(t, 22.5, *out, 1e-9)

	histTick(h, 80_000, []string{"T"}, func(string) hobs { return hobs{a: 5, b: 5} })
	in, _ = h.tps(kindTopic, "T")
	assert.Nil(t, in, "went back")

	histTick(h, 90_000, []string{}, nil) // deleted? no: absent from the plan only
	v := h.view(10*time.Second, []lineSpec{{kind: kindTopic, name: "T", label: "T in"}})
	require.Len(t, v.Lines, 0, "T was dropped as deleted")

	h = newHistory(10 * time.Second)
	histTick(h, 0, []string{"T"}, func(string) hobs { return hobs{a: 0} })
	in, _ = h.tps(kindTopic, "T")
	assert.Nil(t, in, "one sample: no rate")
	h.record(10_000, nil) // T missed this tick
	histTick(h, 20_000, []string{"T"}, func(string) hobs { return hobs{a: 40} })
	histTick(h, 30_000, []string{"T"}, func(string) hobs { return hobs{a: 60} })
	v = h.view(10*time.Second, []lineSpec{{kind: kindTopic, name: "T", label: "T in"}})
	require.Len(t, v.Lines, 1)
	require.Len(t, v.Lines[0].Values, 4)
	assert.Nil(t, v.Lines[0].Values[0])
	assert.Nil(t, v.Lines[0].Values[1], "gap")
	assert.Nil(t, v.Lines[0].Values[2], "after a gap")
	assert.InDelta(t, 2.0, *v.Lines[0].Values[3], 1e-9)
	in, _ = h.tps(kindTopic, "T")
	assert.InDelta(t, 2.0, *in, 1e-9, "the window spans the gap: (60-0)/30 s")
}
