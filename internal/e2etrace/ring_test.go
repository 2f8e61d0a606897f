package e2etrace

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRingDrainsWhatWasPut(t *testing.T) {
	r := NewRing(100)
	require.Equal(t, 128, r.Cap())
	for i := range 100 {
		r.Put(&Event{T: int64(i), Kind: KindStored, Topic: 7, Queue: -3, Peer: 1 << 40, Opaque: -9, Aux: 320, Offset: int64(i) << 33, Next: -1, Built: 5})
	}
	evs, lost := r.Drain(nil)
	require.Len(t, evs, 100)
	assert.Zero(t, lost)
	for i, e := range evs {
		assert.Equal(t, Event{T: int64(i), Kind: KindStored, Topic: 7, Queue: -3, Peer: 1 << 40, Opaque: -9, Aux: 320, Offset: int64(i) << 33, Next: -1, Built: 5}, e)
	}
	evs, lost = r.Drain(evs[:0])
	assert.Empty(t, evs, "a drain takes only what was put since the previous one")
	assert.Zero(t, lost)
}

func TestRingOverwritesTheOldestAndCountsThem(t *testing.T) {
	r := NewRing(64)
	for i := range 64*3 + 5 {
		r.Put(&Event{T: int64(i), Kind: KindRead})
	}
	evs, lost := r.Drain(nil)
	require.Len(t, evs, 64)
	assert.Equal(t, uint64(2*64+5), lost)
	assert.Equal(t, int64(2*64+5), evs[0].T, "the newest ring-full is kept")
	assert.Equal(t, int64(3*64+4), evs[63].T)
	assert.Equal(t, uint64(2*64+5), r.Dropped())
}

// Writers and a drainer at once: every event drained is whole (its words
// agree) and drained + lost = put. Run with -race.
func TestRingConcurrentPutAndDrain(t *testing.T) {
	r := NewRing(256)
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				v := int64(w*each + i)
				r.Put(&Event{T: v, Kind: KindPull, Offset: v, Next: v + 1, Built: -v})
			}
		}()
	}
	done := make(chan struct{})
	var got []Event
	var lost uint64
	go func() {
		defer close(done)
		for range 200 {
			var l uint64
			got, l = r.Drain(got)
			lost += l
		}
	}()
	wg.Wait()
	<-done
	var l uint64
	got, l = r.Drain(got)
	lost += l
	assert.Equal(t, uint64(writers*each), uint64(len(got))+lost)
	for _, e := range got {
		require.Equal(t, e.T, e.Offset)
		require.Equal(t, e.T+1, e.Next)
		require.Equal(t, -e.T, e.Built)
	}
}

func TestDumpRoundTrip(t *testing.T) {
	d := &Dump{Meta: Meta{Seq: 3, EpochUnixNano: 1e18, Start: 10, End: 99, Dropped: 2, RingEvents: 64, Topics: []string{"", "T"},
		GC: []GCCycle{{Num: 4, End: 50, PauseNs: 7}}, SchedLatency: Histogram{Counts: []uint64{1, 2}, Buckets: []float64{0, 1e-6, 1e-3}}},
		Events: []Event{{T: 11, Kind: KindRead, Peer: 2, Opaque: 5, Aux: 10}, {T: 12, Kind: KindWritten, Topic: 1, Queue: 3, Offset: 4, Next: 6, Built: 11, Aux: 2}}}
	var b bytes.Buffer
	require.NoError(t, d.Write(&b))
	got, err := Read(&b)
	require.NoError(t, err)
	d.Meta.Events = 2
	assert.Equal(t, d, got)
	_, err = Read(bytes.NewReader([]byte("not a dump\n")))
	assert.ErrorIs(t, err, ErrNotDump)
}
