package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// mqRun runs `mq admin <args>` in process against ns and returns stdout.
func mqRun(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"admin", "--namesrv", ns, "--timeout", "5s"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func mqOK(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := mqRun(t, ns, args...)
	require.NoError(t, err, "mq admin %s\n%s", strings.Join(args, " "), out)
	return out
}

// mqJSON runs a command with --output json and decodes its answer.
func mqJSON(t *testing.T, ns string, v any, args ...string) {
	t.Helper()
	out := mqOK(t, ns, append(args, "--output", "json")...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

var cols = regexp.MustCompile(`\s{2,}`)

// parseTable reads an aligned table (header, then rows; columns are two
// or more spaces apart) up to the first blank line.
func parseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	head := cols.Split(strings.TrimSpace(lines[0]), -1)
	var rows []map[string]string
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		f := cols.Split(strings.TrimSpace(l), -1)
		if len(f) != len(head) {
			continue // summary line
		}
		r := map[string]string{}
		for i, h := range head {
			r[h] = f[i]
		}
		rows = append(rows, r)
	}
	return rows
}

func column(rows []map[string]string, k string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[k])
	}
	return out
}

// fakeConsumer registers group as a consumer of topic over its own
// connection (HEART_BEAT) and commits offset on queue 0.
func fakeConsumer(t *testing.T, broker, group, topic string, offset int64) {
	t.Helper()
	c := benchClient()
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hb := protocol.HeartbeatData{ClientID: "127.0.0.1@admin-test", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: topic, SubString: "*", ExpressionType: "TAG", SubVersion: 1}},
	}}}
	body, _ := json.Marshal(hb)
	resp, err := c.Invoke(ctx, broker, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp, err = c.Invoke(ctx, broker, remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": strconv.FormatInt(offset, 10)}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// TestAdminCommands drives each command group against one live mq dev
// (in -short too: about ten seconds once mq is built): table and JSON
// output checked on content, exit code 1 for unknown topics and groups.
func TestAdminCommands(t *testing.T) {
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"metrics.listen=" + metricsAddr, "console.listen="}})
	ns := dev.Namesrv
	const topic, group = "AdminTopic", "AdminGroup"

	t.Run("cluster list", func(t *testing.T) {
		rows := parseTable(t, mqOK(t, ns, "cluster", "list"))
		require.Len(t, rows, 1)
		assert.Equal(t, "broker-a", rows[0]["BROKER"])
		assert.Equal(t, dev.Broker, rows[0]["ADDR"])
		assert.Equal(t, "V4_9_8", rows[0]["VERSION"])
		var js []map[string]any
		mqJSON(t, ns, &js, "cluster", "list")
		require.Len(t, js, 1)
		assert.Equal(t, "DefaultCluster", js[0]["cluster"])
	})

	t.Run("topic create, update, list, route", func(t *testing.T) {
		rows := parseTable(t, mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "4", "--write-queues", "4"))
		require.Len(t, rows, 1)
		assert.Equal(t, "4", rows[0]["READ QUEUES"])
		assert.Equal(t, "created", rows[0]["ACTION"])
		assert.Equal(t, "broker-a", rows[0]["BROKER"])
		var upd []topicRow
		mqJSON(t, ns, &upd, "topic", "update", "--topic", topic, "--read-queues", "2", "--write-queues", "2")
		require.Len(t, upd, 1)
		assert.Equal(t, topicRow{Topic: topic, Broker: "broker-a", Addr: dev.Broker, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, upd[0])
		assert.Contains(t, mqFail(t, ns, 1, "topic", "update", "--topic", "NoSuchTopic", "--perm", "6"), "topic NoSuchTopic does not exist")
		assert.Contains(t, mqFail(t, ns, 1, "topic", "route", "--topic", "NoSuchTopic"), "does not exist")

		// The name server learns of the update at the broker's next
		// registration, which the update triggers.
		require.Eventually(t, func() bool {
			out, err := mqRun(t, ns, "topic", "route", "--topic", topic)
			return err == nil && strings.Contains(out, "  2  ")
		}, 10*time.Second, 20*time.Millisecond)
		rows = parseTable(t, mqOK(t, ns, "topic", "route", "--topic", topic))
		require.Len(t, rows, 1)
		assert.Equal(t, "2", rows[0]["WRITE QUEUES"])
		assert.Equal(t, dev.Broker, rows[0]["ADDR"])
		assert.Contains(t, column(parseTable(t, mqOK(t, ns, "topic", "list")), "TOPIC"), topic)
		var list []string
		mqJSON(t, ns, &list, "topic", "list")
		assert.Contains(t, list, topic)
		assert.NotContains(t, list, protocol.AutoCreateTopic)
		var rd protocol.TopicRouteData
		mqJSON(t, ns, &rd, "topic", "route", "--topic", topic)
		require.Len(t, rd.QueueDatas, 1)
		assert.EqualValues(t, 2, rd.QueueDatas[0].ReadQueueNums)
	})

	var ids []string
	t.Run("message send", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			var res map[string]any
			mqJSON(t, ns, &res, "message", "send", "--topic", topic, "--body", fmt.Sprintf("body-%d", i), "--keys", fmt.Sprintf("key-%d", i), "--tags", "TagA")
			ids = append(ids, res["offsetMsgId"].(string))
			assert.EqualValues(t, 0, res["queueId"])
		}
		rows := parseTable(t, mqOK(t, ns, "message", "send", "--topic", topic, "--body", "body-3", "--keys", "key-3"))
		require.Len(t, rows, 1)
		assert.Equal(t, "3", rows[0]["OFFSET"])
		ids = append(ids, rows[0]["OFFSET MSG ID"])
	})

	t.Run("topic status", func(t *testing.T) {
		var qs []queueStats
		mqJSON(t, ns, &qs, "topic", "status", "--topic", topic)
		require.Len(t, qs, 2)
		assert.EqualValues(t, 4, qs[0].MaxOffset)
		assert.EqualValues(t, 0, qs[0].MinOffset)
		assert.Greater(t, qs[0].LastUpdateTimestamp, time.Now().Add(-time.Minute).UnixMilli())
		assert.EqualValues(t, 0, qs[1].MaxOffset)
		rows := parseTable(t, mqOK(t, ns, "topic", "status", "--topic", topic))
		require.Len(t, rows, 2)
		assert.Equal(t, "4", rows[0]["MAX OFFSET"])
		assert.Equal(t, "-", rows[1]["LAST UPDATED"])
		assert.Contains(t, mqFail(t, ns, 1, "topic", "status", "--topic", "NoSuchTopic"), "does not exist")
	})

	t.Run("message get", func(t *testing.T) {
		var m messageView
		mqJSON(t, ns, &m, "message", "get", "--id", ids[1])
		assert.Equal(t, "body-1", m.Body)
		assert.Equal(t, "key-1", m.Keys)
		assert.Equal(t, "TagA", m.Properties["TAGS"])
		rows := parseTable(t, mqOK(t, ns, "message", "get", "--id", ids[2]))
		fields := map[string]string{}
		for _, r := range rows {
			fields[r["FIELD"]] = r["VALUE"]
		}
		assert.Equal(t, "body-2", fields["Body"])
		assert.Equal(t, ids[2], fields["Offset msg ID"])
	})

	t.Run("message query", func(t *testing.T) {
		var ms []messageView
		mqJSON(t, ns, &ms, "message", "query", "--topic", topic, "--key", "key-2", "--begin", "-1h")
		require.Len(t, ms, 1)
		assert.Equal(t, "body-2", ms[0].Body)
		rows := parseTable(t, mqOK(t, ns, "message", "query", "--topic", topic, "--key", "key-0"))
		require.Len(t, rows, 1)
		assert.Equal(t, `"body-0"`, rows[0]["BODY"])
		mqJSON(t, ns, &ms, "message", "query", "--topic", topic, "--key", "key-0", "--begin", "-1h", "--end", "-30m")
		assert.Empty(t, ms)
	})

	t.Run("message consume", func(t *testing.T) {
		var ms []messageView
		mqJSON(t, ns, &ms, "message", "consume", "--topic", topic, "--from", "offset")
		require.Len(t, ms, 4)
		for i, m := range ms {
			assert.Equal(t, fmt.Sprintf("body-%d", i), m.Body)
		}
		mqJSON(t, ns, &ms, "message", "consume", "--topic", topic, "--from", "offset", "--offset", "2")
		require.Len(t, ms, 2)
		assert.Equal(t, "body-2", ms[0].Body)
		mqJSON(t, ns, &ms, "message", "consume", "--topic", topic, "--from", "time", "--timestamp", "-1h", "--max", "3")
		assert.Len(t, ms, 3)
		mqJSON(t, ns, &ms, "message", "consume", "--topic", topic, "--from", "time", "--timestamp", "+1h")
		assert.Empty(t, ms)
		rows := parseTable(t, mqOK(t, ns, "message", "consume", "--topic", topic))
		assert.Len(t, rows, 4)
	})

	keep := t // the fake consumer stays connected for the metrics check
	t.Run("group create, list, status", func(t *testing.T) {
		rows := parseTable(t, mqOK(t, ns, "group", "create", "--group", group, "--retry-max", "3"))
		require.Len(t, rows, 1)
		assert.Equal(t, "3", rows[0]["RETRY MAX"])
		assert.Contains(t, column(parseTable(t, mqOK(t, ns, "group", "list")), "GROUP"), group)
		var gl []struct{ Group string }
		mqJSON(t, ns, &gl, "group", "list")
		var names []string
		for _, g := range gl {
			names = append(names, g.Group)
		}
		assert.Contains(t, names, group)

		fakeConsumer(keep, dev.Broker, group, topic, 1)
		var st groupStatus
		mqJSON(t, ns, &st, "group", "status", "--group", group)
		assert.EqualValues(t, 3, st.Lag)
		require.Len(t, st.Queues, 2)
		assert.EqualValues(t, 4, st.Queues[0].BrokerOffset)
		assert.EqualValues(t, 1, st.Queues[0].ConsumerOffset)
		assert.EqualValues(t, 3, st.Queues[0].Lag)
		assert.Greater(t, st.Queues[0].LastTimestamp, int64(0))
		require.Len(t, st.Clients, 1)
		assert.Equal(t, "127.0.0.1@admin-test", st.Clients[0].ClientID)
		assert.EqualValues(t, codec.ServerVersion, st.Clients[0].Version)
		assert.Equal(t, codec.ServerLanguage, st.Clients[0].Language)
		assert.Contains(t, st.Clients[0].ClientAddr, "127.0.0.1:")
		assert.Equal(t, "CLUSTERING", st.MessageModel)

		out := mqOK(t, ns, "group", "status", "--group", group)
		rows = parseTable(t, out)
		require.Len(t, rows, 2)
		assert.Equal(t, "3", rows[0]["LAG"])
		assert.Contains(t, out, "total lag 3")
		_, clients, ok := strings.Cut(out, "total lag 3\n\n")
		require.True(t, ok, out)
		crows := parseTable(t, clients)
		require.Len(t, crows, 1)
		assert.Equal(t, "409", crows[0]["VERSION"])
		assert.Contains(t, mqFail(t, ns, 1, "group", "status", "--group", "NoSuchGroup"), "NoSuchGroup does not exist")
		assert.Contains(t, mqFail(t, ns, 1, "group", "create", "--group", group), "already exists")
	})

	t.Run("broker status", func(t *testing.T) {
		var st map[string]map[string]string
		mqJSON(t, ns, &st, "broker", "status")
		rt := st[dev.Broker]
		require.NotNil(t, rt, "%v", st)
		n, _ := strconv.Atoi(rt["msgPutTotalTodayNow"])
		assert.GreaterOrEqual(t, n, 4)
		assert.NotEmpty(t, rt["commitLogMaxOffset"])
		conns, _ := strconv.Atoi(rt["quiverConnections"])
		assert.GreaterOrEqual(t, conns, 2) // the fake consumer and this command
		rows := parseTable(t, mqOK(t, ns, "broker", "status", "--broker", dev.Broker))
		kv := map[string]string{}
		for _, r := range rows {
			kv[r["KEY"]] = r["VALUE"]
		}
		assert.Equal(t, "V4_9_8", kv["brokerVersionDesc"])
	})

	t.Run("metrics", func(t *testing.T) { checkMetrics(t, metricsAddr, topic, group) })

	t.Run("offset reset and dlq list", func(t *testing.T) {
		out := mqOK(t, ns, "offset", "reset", "--group", group, "--topic", topic, "--timestamp", "-1h", "--yes")
		assert.Contains(t, out, "reset to")
		rows := parseTable(t, out)
		require.Len(t, rows, 2)
		assert.Equal(t, []string{"0", "0"}, column(rows, "OFFSET"))
		var st groupStatus
		mqJSON(t, ns, &st, "group", "status", "--group", group)
		assert.EqualValues(t, 4, st.Lag)
		var rep struct {
			Group  string       `json:"group"`
			Queues []resetQueue `json:"queues"`
			Told   int          `json:"consumersNotified"`
			Force  bool         `json:"force"`
			Topic  string       `json:"topic"`
		}
		mqJSON(t, ns, &rep, "offset", "reset", "--group", group, "--topic", topic, "--timestamp", "now", "--yes")
		assert.Equal(t, group, rep.Group)
		require.Len(t, rep.Queues, 2)
		assert.EqualValues(t, 4, rep.Queues[0].Offset, "now: the end of queue 0")
		assert.Contains(t, mqFail(t, ns, 1, "offset", "reset", "--group", "NoSuchGroup", "--topic", topic, "--timestamp", "-1h", "--yes"), "does not exist")
		assert.Contains(t, mqFail(t, ns, 1, "offset", "reset", "--group", group, "--topic", "NoSuchTopic", "--timestamp", "-1h", "--yes"), "does not exist")
		assert.Contains(t, mqOK(t, ns, "dlq", "list", "--group", group), "no dead letters")
		var dl []deadLetter
		mqJSON(t, ns, &dl, "dlq", "list", "--group", group)
		assert.Empty(t, dl)
		assert.NotNil(t, dl, "an empty JSON list, not null")
		assert.Contains(t, mqFail(t, ns, 1, "dlq", "list", "--group", "NoSuchGroup"), "does not exist")
	})

	t.Run("acl sign", func(t *testing.T) {
		var ext map[string]string
		mqJSON(t, ns, &ext, "acl", "sign", "--access-key", "ak", "--secret-key", "sk", "topic=T")
		want := map[string]string{"topic": "T", acl.KeyAccessKey: "ak"}
		want[acl.KeySignature] = acl.Signature([]byte("sk"), acl.Content(want, nil))
		assert.Equal(t, want, ext)
		_, err := mqRun(t, ns, "acl", "sign", "topic=T")
		assert.Error(t, err)
	})

	t.Run("group and topic delete", func(t *testing.T) {
		assert.Equal(t, "true", parseTable(t, mqOK(t, ns, "group", "delete", "--group", group, "--yes"))[0]["DELETED"])
		var gl []struct{ Group string }
		mqJSON(t, ns, &gl, "group", "list")
		for _, g := range gl {
			assert.NotEqual(t, group, g.Group)
		}
		var del map[string]any
		mqJSON(t, ns, &del, "topic", "delete", "--topic", topic, "--yes")
		assert.Equal(t, true, del["deleted"])
		assert.Equal(t, []any{"broker-a"}, del["brokers"])
		assert.Contains(t, mqFail(t, ns, 1, "topic", "delete", "--topic", topic, "--yes"), "not found")
		assert.Contains(t, mqFail(t, ns, 1, "group", "delete", "--group", group, "--yes"), "not found")
		var list []string
		mqJSON(t, ns, &list, "topic", "list")
		assert.NotContains(t, list, topic)
	})

	t.Run("failure exits non-zero with one line", func(t *testing.T) {
		cmd := exec.Command(testserver.Binary(t), "admin", "topic", "status", "--topic", "NoSuchTopic")
		cmd.Env = append(cmd.Environ(), "QUIVER_NAMESRV="+ns)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 1, ee.ExitCode())
		assert.Equal(t, "mq: topic NoSuchTopic does not exist\n", stderr.String())
		_, err = mqRun(t, "127.0.0.1:1", "cluster", "list")
		assert.Error(t, err)
		_, err = mqRun(t, ns, "cluster", "list", "--output", "yaml")
		assert.ErrorContains(t, err, "--output")
	})
}

// checkMetrics scrapes /metrics after the admin test's traffic (4 sends
// to queue 0, a group 3 behind) and parses it with the Prometheus text
// parser.
func checkMetrics(t *testing.T, addr, topic, group string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	value := func(name string, labels map[string]string) (float64, bool) {
		f, ok := fams[name]
		if !ok {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				found := false
				for _, lp := range m.Label {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			case m.Summary != nil:
				return float64(m.Summary.GetSampleCount()), true
			}
		}
		return 0, false
	}
	must := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := value(name, labels)
		require.True(t, ok, "%s%v missing", name, labels)
		return v
	}
	assert.Equal(t, 4.0, must("quiver_messages_in_total", map[string]string{"topic": topic}))
	assert.Greater(t, must("quiver_bytes_in_total", map[string]string{"topic": topic}), 4.0*6)
	// message consume ran five times over the backlog: 4 + 2 + 3 + 0 + 4.
	assert.Equal(t, 13.0, must("quiver_messages_out_total", map[string]string{"topic": topic}))
	assert.Greater(t, must("quiver_bytes_out_total", map[string]string{"topic": topic}), 13.0*6)
	assert.GreaterOrEqual(t, must("quiver_send_duration_seconds", nil), 4.0)
	assert.GreaterOrEqual(t, must("quiver_pull_duration_seconds", nil), 5.0)
	assert.Equal(t, 3.0, must("quiver_consumer_lag_messages", map[string]string{"group": group, "topic": topic, "queue": "0"}))
	assert.Equal(t, 4.0, must("quiver_queue_max_offset", map[string]string{"topic": topic, "queue": "0"}))
	assert.Greater(t, must("quiver_store_size_bytes", nil), 0.0)
	assert.GreaterOrEqual(t, must("quiver_store_fsync_seconds", nil), 0.0, "fsync rounds are exported")
	assert.GreaterOrEqual(t, must("quiver_store_fsync_max_seconds", nil), 0.0)
	assert.Greater(t, must("quiver_disk_free_bytes", nil), 0.0)
	assert.GreaterOrEqual(t, must("quiver_connections", map[string]string{"transport": "tcp"}), 1.0)
	assert.Equal(t, 1.0, must("quiver_namesrv_brokers", nil))
	assert.GreaterOrEqual(t, must("quiver_namesrv_topics", nil), 2.0)
	assert.Equal(t, 0.0, must("quiver_backlog_messages", map[string]string{"kind": "retry", "topic": protocol.RetryTopic(group)}))
	must("quiver_backlog_messages", map[string]string{"kind": "schedule"})
	must("quiver_broker_busy_total", map[string]string{"reason": "store"})
	for _, path := range []string{"/healthz", "/readyz"} {
		r, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		r.Body.Close()
		assert.Equal(t, http.StatusOK, r.StatusCode, path)
	}
}
