package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/mirror"
)

// mirrorConsoleDevs starts a central `mq dev` serving the console and an
// edge `mq dev` whose mirror link e2c forwards the topic Readings (2
// queues) into it; n messages are sent on the edge. It returns the edge,
// the central name server and the console's base URL.
func mirrorConsoleDevs(t *testing.T, n int) (edge *testserver.Proc, centralNS, base string) {
	t.Helper()
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	central := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=" + consoleAddr}})
	link := fmt.Sprintf("mirror.links=[{name: e2c, target: {namesrv: ['%s']}, topics: [Readings], checkpoint_interval: 100ms, refresh_interval: 300ms, catch_up: newest_first}]",
		central.Namesrv)
	edge = testserver.StartDev(t, testserver.Options{Sets: []string{"broker.cluster=Edge", "console.listen=", "metrics.listen=", link}})
	waitListening(t, consoleAddr)
	mqOK(t, edge.Namesrv, "topic", "create", "--topic", "Readings", "--read-queues", "2", "--write-queues", "2")
	for i := 0; i < n; i++ {
		mqOK(t, edge.Namesrv, "message", "send", "--topic", "Readings", "--body", fmt.Sprintf("r%d", i))
	}
	return edge, central.Namesrv, "http://" + consoleAddr
}

// TestConsoleMirror: the console of the central cluster serves the mirror
// link writing into it (GET /api/mirror): clusters and name servers,
// state, catch-up order, messages, lag, throughput, last checkpoint, per
// topic and per source queue (position against the source's max offset),
// and the central broker's dedup window; the same report as `mq admin
// mirror status --queues` and `mq admin mirror dedup`. When the edge is
// killed its checkpoint goes overdue and the link shows as cut.
func TestConsoleMirror(t *testing.T) {
	edge, ns, base := mirrorConsoleDevs(t, 6)
	var ans mirrorAnswer
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ans = mirrorAnswer{}
		if httpJSON(t, "GET", base+"/api/mirror", nil, &ans) == http.StatusOK && len(ans.Links) == 1 &&
			ans.Links[0].Mirrored == 6 && ans.Links[0].LagMessages == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, ans.Links, 1)
	l := ans.Links[0]
	assert.Equal(t, "e2c", l.Link)
	assert.Equal(t, "Edge", l.SourceCluster)
	assert.Equal(t, "DefaultCluster", l.TargetCluster)
	assert.Equal(t, edge.Namesrv, l.Source)
	assert.Equal(t, ns, l.Target)
	assert.Equal(t, mirror.StateRunning, l.State)
	assert.True(t, l.Up)
	assert.Equal(t, mirror.CatchUpNewestFirst, l.CatchUp)
	assert.Equal(t, int64(6), l.Mirrored)
	assert.Zero(t, l.LagMessages)
	assert.Greater(t, l.Rate, 0.0, "messages written in the last 10 s")
	assert.WithinDuration(t, time.Now(), time.UnixMilli(l.CheckpointTime), 10*time.Second)
	require.Len(t, l.Topics, 1)
	assert.Equal(t, "Readings", l.Topics[0].Topic)
	assert.Equal(t, int64(6), l.Topics[0].Messages)
	require.Len(t, l.Queues, 2, "one row per source queue")
	var total int64
	for _, q := range l.Queues {
		assert.Equal(t, "Readings", q.Topic)
		assert.Equal(t, q.MaxOffset, q.Next, "position at the source's max offset")
		assert.Zero(t, q.Lag)
		total += q.MaxOffset
	}
	assert.Equal(t, int64(6), total)
	require.Len(t, ans.Dedup, 1)
	assert.Equal(t, "broker-a", ans.Dedup[0].Broker)
	assert.GreaterOrEqual(t, ans.Dedup[0].Windows, int64(1), "Readings has a window")
	assert.GreaterOrEqual(t, ans.Dedup[0].IDs, int64(6))
	assert.Equal(t, int64(131072), ans.Dedup[0].Capacity)

	// One source: the CLI's report is the console's.
	var cli []mirrorLinkView
	mqJSON(t, ns, &cli, "mirror", "status", "--queues")
	require.Len(t, cli, 1)
	assert.Equal(t, l.Queues, cli[0].Queues)
	assert.Equal(t, l.Mirrored, cli[0].Mirrored)
	assert.Equal(t, l.State, cli[0].State)
	assert.LessOrEqual(t, l.CheckpointTime, cli[0].CheckpointTime)
	var dd []mirrorDedupView
	mqJSON(t, ns, &dd, "mirror", "dedup")
	require.Len(t, dd, 1)
	assert.Equal(t, ans.Dedup[0].IDs, dd[0].IDs)

	// The edge dies: no checkpoint comes any more.
	edge.Kill()
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ans = mirrorAnswer{}
		if httpJSON(t, "GET", base+"/api/mirror", nil, &ans) == http.StatusOK && len(ans.Links) == 1 && ans.Links[0].State == mirror.StateCut {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Len(t, ans.Links, 1)
	assert.Equal(t, mirror.StateCut, ans.Links[0].State, "an overdue checkpoint is a cut link")
	assert.False(t, ans.Links[0].Up)
	assert.GreaterOrEqual(t, ans.Links[0].CheckpointAge, 5.0)
}

// TestConsoleMirrorInBrowser: the Mirror page in Chromium shows the link
// running with its queues and the dedup window, then cut once the edge is
// killed.
func TestConsoleMirrorInBrowser(t *testing.T) {
	b := startChromium(t)
	edge, _, base := mirrorConsoleDevs(t, 4)
	b.base = base
	b.open("/mirror")
	b.waitFor(`document.getElementById("mirror").classList.contains("on")`, "mirror page")
	// The page refreshes every 10 s; reload until the link is caught up.
	for range 100 {
		if v, _ := b.eval(`[...document.querySelectorAll("#mirror-links tr")].some(r => r.cells[0].innerText === "e2c" && r.cells[3].innerText === "running" && r.cells[5].innerText === "4" && r.cells[6].innerText === "0")`).(bool); v {
			break
		}
		time.Sleep(200 * time.Millisecond)
		b.open("/mirror")
	}
	b.waitFor(`[...document.querySelectorAll("#mirror-links tr")].some(r => r.cells[0].innerText === "e2c" && r.cells[1].innerText.startsWith("Edge") && r.cells[3].innerText === "running" && r.cells[4].innerText === "newest_first" && r.cells[5].innerText === "4" && r.cells[6].innerText === "0")`, "link running, 4 mirrored, lag 0")
	b.waitFor(`document.querySelectorAll("#mirror-queues tr").length === 3 && [...document.querySelectorAll("#mirror-queues tr")].slice(1).every(r => r.cells[1].innerText === "Readings" && r.cells[4].innerText === r.cells[5].innerText && r.cells[6].innerText === "0")`, "two source queues at the max offset")
	b.waitFor(`[...document.querySelectorAll("#mirror-topics tr")].some(r => r.cells[1].innerText === "Readings" && r.cells[2].innerText === "4")`, "topic row")
	b.waitFor(`[...document.querySelectorAll("#mirror-dedup tr")].some(r => r.cells[0].innerText === "broker-a" && +r.cells[3].innerText >= 4 && r.cells[4].innerText === "131072")`, "dedup window")
	b.screenshot("console-mirror")
	edge.Kill()
	for range 150 {
		if v, _ := b.eval(`[...document.querySelectorAll("#mirror-links tr")].some(r => r.cells[3].innerText === "cut")`).(bool); v {
			break
		}
		time.Sleep(200 * time.Millisecond)
		b.open("/mirror")
	}
	b.waitFor(`[...document.querySelectorAll("#mirror-links tr")].some(r => r.cells[0].innerText === "e2c" && r.cells[3].innerText === "cut")`, "link cut")
}
