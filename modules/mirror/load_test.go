package mirror_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
)

// TestMirrorLoad is a load run (skipped with -short): a producer sends
// 1 KiB messages at QUIVER_MIRROR_LOAD_RATE per second (default 5,000)
// for QUIVER_MIRROR_LOAD_SECONDS (default 10) into a source cluster on
// loopback while a link mirrors them. It logs the mirror lag (target
// store time minus source store time) percentiles and the catch-up
// rate after a 3 s target outage; it asserts only 0 lost and 0
// duplicates (the figures go to docs/lab/BENCHMARKS.md).
//
// At most maxInFlight sends wait for their answer: a host that cannot
// take the rate (a 2-core box under -race does 2,000-3,500 msg/s) gets it
// as fast as it takes it, the offered rate logged says so, and a send
// times out only when the broker stalls, not because the producer queued
// more than the send timeout lets through (1 in 10 runs failed so). The
// waits poll the target's message count; it is read once.
func TestMirrorLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load run")
	}
	rate := envInt("QUIVER_MIRROR_LOAD_RATE", 5000)
	secs := envInt("QUIVER_MIRROR_LOAD_SECONDS", 10)
	src := startCluster(t, "edge", false)
	dst := startCluster(t, "central", false)
	src.createTopic("load", 8)
	_, p := src.producer("load")
	startMirror(t, fastLink("load", src, dst, "load"))
	body := make([]byte, 1024)

	produceFor := func(n int) []string {
		var mu sync.Mutex
		var ids []string
		failed := map[string]int{} // send error → count
		var wg sync.WaitGroup
		inflight := make(chan struct{}, maxInFlight)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per := max(1, rate/100)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+60)*time.Second)
		defer cancel()
		for sent := 0; sent < n; {
			<-tick.C
			for i := 0; i < per && sent < n; i++ {
				inflight <- struct{}{}
				wg.Add(1)
				sent++
				err := p.SendAsync(ctx, func(_ context.Context, r *client.SendResult, err error) {
					defer wg.Done()
					defer func() { <-inflight }()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed[err.Error()]++
						return
					}
					ids = append(ids, r.MsgID)
				}, client.NewMessage("load", body))
				if err != nil {
					mu.Lock()
					failed["SendAsync: "+err.Error()]++
					mu.Unlock()
					<-inflight
					wg.Done()
				}
			}
		}
		wg.Wait()
		for e, n := range failed {
			t.Logf("%d sends failed: %s", n, e)
		}
		return ids
	}
	start := time.Now()
	sent := produceFor(rate * secs)
	elapsed := time.Since(start)
	require.Equal(t, rate*secs, len(sent), "acknowledged sends")
	var got []*client.MessageExt
	waitFor(t, 120*time.Second, "every message in the target", func() bool { return dst.count("load") >= int64(len(sent)) })
	got = dst.readAll("load")
	lost, dup := lostAndDup(sent, got)
	assert.Empty(t, lost)
	assert.Empty(t, dup)
	srcTS := map[string]time.Time{}
	for _, m := range src.readAll("load") {
		srcTS[m.MsgID] = m.StoreTimestamp
	}
	var lags []time.Duration
	for _, m := range got {
		if s, ok := srcTS[m.MsgID]; ok {
			lags = append(lags, m.StoreTimestamp.Sub(s))
		}
	}
	slices.Sort(lags)
	pct := func(q float64) time.Duration { return lags[int(q*float64(len(lags)-1))] }
	t.Logf("steady: %d msgs of 1 KiB at %.0f msg/s offered: mirror lag p50 %v p99 %v max %v",
		len(lags), float64(len(sent))/elapsed.Seconds(), pct(0.5), pct(0.99), lags[len(lags)-1])

	// Catch-up: the target is away 3 s while the source takes writes.
	dst.Stop()
	away := time.Now()
	backlog := produceFor(3 * rate)
	for time.Since(away) < 3*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	dst.Start()
	back := time.Now()
	all := append(append([]string(nil), sent...), backlog...)
	want := max(src.count("load"), int64(len(all))) // a send that timed out may be stored (and mirrored) all the same
	waitFor(t, 120*time.Second, "the backlog in the target", func() bool { return dst.count("load") >= want })
	got = dst.readAll("load")
	lost, dup = lostAndDup(all, got)
	assert.Empty(t, lost)
	assert.Empty(t, dup)
	// From the target's restart to the store time of the last backlog
	// message there (polling the target would be counted otherwise).
	inBacklog := map[string]bool{}
	for _, id := range backlog {
		inBacklog[id] = true
	}
	var first, last time.Time
	for _, m := range got {
		if !inBacklog[m.MsgID] {
			continue
		}
		if m.StoreTimestamp.After(last) {
			last = m.StoreTimestamp
		}
		if first.IsZero() || m.StoreTimestamp.Before(first) {
			first = m.StoreTimestamp
		}
	}
	took, pure := last.Sub(back), last.Sub(first)
	t.Logf("catch-up: %d msgs after a 3 s outage in %v from the target's restart (first write after %v): %.0f msg/s overall, %.0f msg/s once writing (%.1fx the offered rate)",
		len(backlog), took, first.Sub(back), float64(len(backlog))/took.Seconds(), float64(len(backlog))/pure.Seconds(), float64(len(backlog))/pure.Seconds()/float64(rate))
}

// maxInFlight bounds TestMirrorLoad's sends waiting for their answer:
// at 2,000 msg/s, half a second of the 3 s send timeout.
const maxInFlight = 1024

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
