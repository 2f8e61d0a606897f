package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

// TestAdminMirrorStatus: an edge `mq dev` runs a mirror link from its
// configuration (mirror.links) into a central `mq dev`; the messages
// arrive, `mq admin mirror status -n central` shows the link from its
// checkpoint, and the edge's /metrics exports the link's series.
func TestAdminMirrorStatus(t *testing.T) {
	central := testserver.StartDev(t, testserver.Options{})
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	// No source: the edge broker's own cluster.
	link := fmt.Sprintf("mirror.links=[{name: e2c, target: {namesrv: ['%s']}, topics: [Readings], checkpoint_interval: 100ms, refresh_interval: 300ms}]",
		central.Namesrv)
	edge := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.cluster=Edge", "metrics.listen=" + metricsAddr, link}})
	edgeNS := edge.Namesrv
	mqOK(t, edgeNS, "topic", "create", "--topic", "Readings", "--read-queues", "2", "--write-queues", "2")
	for i := 0; i < 5; i++ {
		mqOK(t, edgeNS, "message", "send", "--topic", "Readings", "--body", fmt.Sprintf("r%d", i))
	}
	var views []mirrorLinkView
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		views = nil
		if _, err := mqRun(t, central.Namesrv, "mirror", "status", "-o", "json"); err == nil {
			mqJSON(t, central.Namesrv, &views, "mirror", "status")
			if len(views) == 1 && views[0].Mirrored == 5 && views[0].LagMessages == 0 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, views, 1)
	v := views[0]
	assert.Equal(t, "e2c", v.Link)
	assert.Equal(t, "Edge", v.SourceCluster)
	assert.Equal(t, "DefaultCluster", v.TargetCluster)
	assert.True(t, v.Up)
	assert.Equal(t, int64(5), v.Mirrored)
	assert.Zero(t, v.LagMessages)

	rows := parseTable(t, mqOK(t, central.Namesrv, "mirror", "status", "e2c", "--queues"))
	require.Len(t, rows, 2, "one row per source queue")
	assert.Equal(t, "Readings", rows[0]["TOPIC"])

	_, err := mqRun(t, central.Namesrv, "mirror", "status", "nosuchlink")
	require.Error(t, err)

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), `quiver_mirror_link_up{broker=`)
	assert.Contains(t, string(body), `quiver_mirror_messages_total{`)
	var line string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "quiver_mirror_messages_total{") {
			line = l
		}
	}
	assert.True(t, strings.HasSuffix(line, " 5"), "messages mirrored: %q", line)
}
