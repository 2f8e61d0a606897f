package e2etrace

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentiles(t *testing.T) {
	tests := []struct {
		name string
		give []int64
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", []int64{7}, Percentiles{N: 1, P50: 7, P90: 7, P99: 7, P999: 7, Max: 7, Min: 7}},
		{"1..1000 reversed", func() []int64 {
			v := make([]int64, 1000)
			for i := range v {
				v[i] = int64(1000 - i)
			}
			return v
		}(), Percentiles{N: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, Min: 1}},
		{"1..10", []int64{3, 1, 2, 10, 9, 8, 7, 6, 5, 4}, Percentiles{N: 10, P50: 5, P90: 9, P99: 10, P999: 10, Max: 10, Min: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Summarise(tt.give))
		})
	}
}

// synthetic builds, through a Ring, the events of 1000 messages each
// delivered by a held pull, with message k (1..1000) spending k ns from
// its send read to stored, 2k to its held pull found, 3k to its answer
// built, 4k to written and 5k to the consumer's next pull read; and of 4
// messages of another topic delivered together by one immediate pull.
func synthetic(t *testing.T) *Dump {
	r := NewRing(1 << 14)
	put := func(e Event) { r.Put(&e) }
	const held, imm = 1, 2
	nextPull := int64(500) // read time of the pull asking the next offset
	for i := range 1000 {
		k := int64(i + 1)
		rd := k * 1_000_000
		pop := int32(10_000 + i) // the consumer's pull of offset i
		put(Event{T: nextPull, Kind: KindRead, Peer: 2, Opaque: pop, Aux: codePullMessage})
		put(Event{T: nextPull + 1, Kind: KindPull, Peer: 2, Opaque: pop, Topic: held, Offset: int64(i)})
		put(Event{T: nextPull + 2, Kind: KindHeld, Peer: 2, Opaque: pop, Topic: held, Offset: int64(i)})
		put(Event{T: rd, Kind: KindRead, Peer: 1, Opaque: int32(i), Aux: codeSendMessage})
		st := rd + k
		put(Event{T: st, Kind: KindStored, Topic: held, Offset: int64(i)})
		found := st + 2*k
		put(Event{T: found, Kind: KindFound, Peer: 2, Opaque: pop, Topic: held, Offset: int64(i), Next: int64(i + 1)})
		put(Event{T: found + 1, Kind: KindSendDone, Peer: 1, Opaque: int32(i), Topic: held, Offset: int64(i), Next: int64(i + 1)})
		built := found + 3*k
		written := built + 4*k
		put(Event{T: written, Built: built, Kind: KindWritten, Peer: 2, Opaque: pop, Topic: held, Offset: int64(i), Next: int64(i + 1), Aux: 1})
		nextPull = written + 5*k
	}
	// a pull held since before the window, found and answered in it
	put(Event{T: 5, Kind: KindFound, Peer: 2, Opaque: 9_999, Topic: held, Offset: 2000, Next: 2001})
	put(Event{T: 6, Kind: KindStored, Topic: held, Offset: 2000})
	put(Event{T: 8, Built: 7, Kind: KindWritten, Peer: 2, Opaque: 9_999, Topic: held, Offset: 2000, Next: 2001, Aux: 1})
	put(Event{T: nextPull, Kind: KindRead, Peer: 2, Opaque: 11_000, Aux: codePullMessage})
	put(Event{T: nextPull + 1, Kind: KindPull, Peer: 2, Opaque: 11_000, Topic: held, Offset: 1000})
	// immediate: 4 messages stored 10 µs apart, then one pull answers them.
	base := int64(2_000_000_000)
	for i := range 4 {
		rd := base + int64(i)*10_000
		put(Event{T: rd, Kind: KindRead, Peer: 4, Opaque: int32(i), Aux: codeSendMessageV2})
		put(Event{T: rd + 100, Kind: KindStored, Topic: imm, Queue: 1, Offset: int64(i)})
		put(Event{T: rd + 150, Kind: KindSendDone, Peer: 4, Opaque: int32(i), Topic: imm, Queue: 1, Offset: int64(i), Next: int64(i + 1)})
	}
	pr := base + 100_000
	put(Event{T: pr, Kind: KindRead, Peer: 3, Opaque: 1, Aux: codePullMessage})
	put(Event{T: pr + 10, Kind: KindPull, Peer: 3, Opaque: 1, Topic: imm, Queue: 1, Offset: 0})
	put(Event{T: pr + 2000, Built: pr + 500, Kind: KindWritten, Peer: 3, Opaque: 1, Topic: imm, Queue: 1, Offset: 0, Next: 4, Aux: 4})
	evs, lost := r.Drain(nil)
	require.Zero(t, lost)
	return &Dump{Meta: Meta{Start: 0, End: 3_000_000_000, Events: len(evs), Topics: []string{"", "held", "imm"},
		// a collection whose cycle spans the slowest message's time in the broker
		GC: []GCCycle{{Num: 9, End: 1000*1_000_000 + 5000, PauseNs: 300}}}, Events: evs}
}

func TestAnalyzeSegments(t *testing.T) {
	rep := Analyze(synthetic(t), nil)
	k := func(m int64) Percentiles {
		return Percentiles{N: 1000, P50: 500 * m, P90: 900 * m, P99: 990 * m, P999: 999 * m, Max: 1000 * m, Min: m}
	}
	assert.Equal(t, k(2), rep.Segments[SegStoredFound])
	// with the pull held since before the window: 2, 1 and 3 ns
	plus := func(p Percentiles, v int64) Percentiles { p.N++; p.Min = v; return p }
	assert.Equal(t, plus(k(3), 2), rep.Segments[SegFoundBuilt])
	assert.Equal(t, plus(k(4), 1), rep.Segments[SegBuiltWrittenHeld])
	assert.Equal(t, plus(k(7), 3), rep.Segments[SegFoundWritten])
	assert.Equal(t, k(5), rep.Segments[SegWrittenNextPull], "the next pull asks for the answer's next offset")
	// the 4 immediate messages waited 100 µs − 100 ns − 10 µs × i for the pull
	assert.Equal(t, Percentiles{N: 4, P50: 79_900, P90: 99_900, P99: 99_900, P999: 99_900, Max: 99_900, Min: 69_900}, rep.Segments[SegStoredPull])
	assert.Equal(t, Percentiles{N: 4, P50: 2000, P90: 2000, P99: 2000, P999: 2000, Max: 2000, Min: 2000}, rep.Segments[SegPullWritten])
	rs := rep.Segments[SegReadStored]
	assert.Equal(t, 1004, rs.N)
	assert.Equal(t, int64(1000), rs.Max)
	rw := rep.Segments[SegReadWritten]
	assert.Equal(t, 1004, rw.N)
	assert.Equal(t, int64(102_000), rw.Max, "the first immediate message: read, then 100 µs until the pull, 2 µs to write")
	assert.Equal(t, int64(9_940), rw.P99, "held message 994 (10k), of 1004")

	assert.Equal(t, 1005, rep.Stored)
	assert.Equal(t, 1001, rep.HeldAnswers)
	assert.Equal(t, 1001, rep.HeldMessages)
	assert.Equal(t, 1, rep.ImmediateAnswers)
	assert.Equal(t, 4, rep.ImmediateMessage)
	assert.Equal(t, 1, rep.NoSendRead, "offset 2000's send came before the window")

	// read → written above its p99: held messages 995..1000 and the 4
	// immediate ones; the GC span (the pause only, no gctrace) overlaps
	// message 1000 alone.
	assert.Equal(t, 10, rep.Outliers)
	assert.Equal(t, 1, rep.OutliersGC)
	assert.InDelta(t, 300.0/3e9, rep.GCShare, 1e-12)

	out := rep.String()
	for _, name := range Segments {
		assert.Contains(t, out, "| "+name+" |")
	}
	assert.Contains(t, out, "| "+SegStoredFound+" | 1000 | 1.0 | 1.8 | 2.0 | 2.0 | 2.0 |")
}

func TestAnalyzeWithGCTrace(t *testing.T) {
	log := "time=... level=WARN msg=x\n" +
		"gc 9 @1.005s 3%: 0.020+4.5+0.030 ms clock, 0.04+0.1/2/0+0.06 ms cpu, 4->5->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 10 @2.000s 3%: 1+2+3 ms clock, 0.04+0.1/2/0+0.06 ms cpu, 4->5->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P\n"
	tr, err := ParseGCTrace(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, map[uint32]GCTrace{9: {9, 20_000, 4_500_000, 30_000}, 10: {10, 1_000_000, 2_000_000, 3_000_000}}, tr)
	rep := Analyze(synthetic(t), tr)
	require.Len(t, rep.GC, 1)
	assert.True(t, rep.MarkKnown)
	assert.Equal(t, GCSpan{Num: 9, End: 1_000_005_000, Start: 1_000_005_000 - 4_550_000, PauseNs: 300, Mark: true}, rep.GC[0])
	// the cycle spans the 4.55 ms before 1000.005 ms: held messages
	// 996..1000 (read at k ms, written 10k ns later) overlap it
	assert.Equal(t, 5, rep.OutliersGC)
	assert.InDelta(t, 4_550_000/3e9, rep.GCShare, 1e-12)
}

func TestHistogramSummary(t *testing.T) {
	h := Histogram{Counts: []uint64{60, 40, 9, 1}, Buckets: []float64{0, 1e-6, 1e-4, 2e-3, 1}}
	base := Histogram{Counts: []uint64{10, 0, 0, 0}, Buckets: h.Buckets}
	d := h.minus(base)
	assert.Equal(t, []uint64{50, 40, 9, 1}, d.Counts)
	p50, p99, maxv, over := d.summary()
	assert.Equal(t, 1e-6, p50)
	assert.Equal(t, 2e-3, p99)
	assert.Equal(t, 1.0, maxv)
	assert.Equal(t, uint64(1), over)

	// the last bucket is open: its lower bound is the largest value known
	inf := Histogram{Counts: []uint64{1, 1}, Buckets: []float64{-math.MaxFloat64, 5e-3, math.MaxFloat64}}
	_, _, maxv, over = inf.summary()
	assert.Equal(t, 5e-3, maxv)
	assert.Equal(t, uint64(1), over)
}
