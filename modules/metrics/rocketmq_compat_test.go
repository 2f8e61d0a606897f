package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// liveClientStatus is the ConsumerRunningInfo the fixture's client
// answers, in fastjson's shape (mqTable keyed by MessageQueue objects).
const liveClientStatus = `{"jstack":"","mqTable":{{"brokerName":"live-broker-a","queueId":0,"topic":"LiveTopic"}:{"commitOffset":2}},` +
	`"properties":{"consumeType":"CONSUME_PASSIVELY"},"statusTable":{"LiveTopic":{"consumeFailedMsgs":3,"consumeFailedTPS":0.5,` +
	`"consumeOKTPS":12.5,"consumeRT":4.0,"pullRT":1.5,"pullTPS":20.0}},"subscriptionSet":[]}`

// startCompat is the live fixture with the compatible series on, a client
// that answers GET_CONSUMER_RUNNING_INFO and a producer group online.
func startCompat(t *testing.T) *live {
	t.Helper()
	h := remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetConsumerRunningInfo {
			return remoting.Errorf(req, remoting.RequestCodeNotSupported, "not a client request")
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(liveClientStatus)
		return resp
	})
	l := startLiveWith(t, Config{Listen: "127.0.0.1:0", RocketMQExporterCompat: true}, h)
	hb, err := json.Marshal(protocol.HeartbeatData{ClientID: "127.0.0.1@live",
		ProducerDataSet: []protocol.ProducerData{{GroupName: "LivePG"}},
		ConsumerDataSet: []protocol.ConsumerData{{
			GroupName: liveGroup, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
			SubscriptionDataSet: []protocol.SubscriptionData{{Topic: liveTopic, SubString: "*", ExpressionType: "TAG"}},
		}}})
	require.NoError(t, err)
	l.invoke(remoting.HeartBeat, nil, hb)
	return l
}

// labelsOf lists the label names of a family's series.
func labelsOf(f *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			out[lp.GetName()] = true
		}
	}
	return out
}

// The compatible series carry rocketmq-exporter's names, label sets and
// values computed from the fixture's traffic.
func TestRocketMQExporterSeries(t *testing.T) {
	l := startCompat(t)
	fams := l.scrape()
	const cl, bn = "LiveCluster", "live-broker-a"
	topic := map[string]string{"cluster": cl, "broker": bn, "topic": liveTopic}
	group := map[string]string{"cluster": cl, "broker": bn, "topic": liveTopic, "group": liveGroup}

	assert.Equal(t, float64(liveSends), l.must(fams, "rocketmq_producer_offset", topic))
	assert.Equal(t, float64(liveCommit), l.must(fams, "rocketmq_consumer_offset", group))
	assert.Equal(t, float64(liveSends), l.must(fams, "rocketmq_consumer_offset", map[string]string{"group": caughtGroup, "topic": liveTopic}))
	assert.Equal(t, float64(liveSends-liveCommit), l.must(fams, "rocketmq_group_diff",
		map[string]string{"group": liveGroup, "topic": liveTopic, "countOfOnlineConsumers": "1", "msgModel": "1"}))
	assert.Equal(t, 0.0, l.must(fams, "rocketmq_group_diff", map[string]string{"group": caughtGroup, "topic": liveTopic, "countOfOnlineConsumers": "0"}))
	lat := l.must(fams, "rocketmq_group_get_latency_by_storetime", group)
	assert.Positive(t, lat, "message liveCommit waits")
	assert.Less(t, lat, 60_000.0, "milliseconds")
	assert.Equal(t, 0.0, l.must(fams, "rocketmq_group_get_latency_by_storetime", map[string]string{"group": caughtGroup}))
	assert.Equal(t, 1.0, l.must(fams, "rocketmq_group_count", map[string]string{"group": liveGroup, "localaddr": "127.0.0.1@live"}))
	assert.Equal(t, 1.0, l.must(fams, "rocketmq_producer_count", map[string]string{"cluster": cl, "broker": bn, "group": "LivePG"}))
	assert.Contains(t, fams, "rocketmq_producer_tps")
	assert.Contains(t, fams, "rocketmq_consumer_tps")
	assert.Contains(t, fams, "rocketmq_broker_tps")
	l.must(fams, "rocketmq_topic_retry_offset", map[string]string{"topic": protocol.RetryGroupPrefix + liveGroup})

	cq := map[string]string{"clientId": "127.0.0.1@live", "group": liveGroup, "topic": liveTopic}
	assert.Equal(t, 3.0, l.must(fams, "rocketmq_client_consume_fail_msg_count", cq))
	assert.Equal(t, 0.5, l.must(fams, "rocketmq_client_consume_fail_msg_tps", cq))
	assert.Equal(t, 12.5, l.must(fams, "rocketmq_client_consume_ok_msg_tps", cq))
	assert.Equal(t, 4.0, l.must(fams, "rocketmq_client_consume_rt", cq))
	assert.Equal(t, 1.5, l.must(fams, "rocketmq_client_consumer_pull_rt", cq))
	assert.Equal(t, 20.0, l.must(fams, "rocketmq_client_consumer_pull_tps", cq))

	rt := map[string]string{"cluster": cl, "brokerIP": "127.0.0.1:10911", "brokerHost": "", "des": "V4_9_8", "broker_version": "409"}
	assert.Equal(t, float64(liveSends), l.must(fams, "rocketmq_brokeruntime_msg_put_total_today_now", rt))
	assert.Equal(t, float64(liveSends), l.must(fams, "rocketmq_brokeruntime_msg_gettotal_today_now", rt))
	assert.Positive(t, l.must(fams, "rocketmq_brokeruntime_commitlogdir_capacity_total", rt))
	assert.Positive(t, l.must(fams, "rocketmq_brokeruntime_commitlog_maxoffset", rt))
	assert.Equal(t, float64(liveSends), l.must(fams, "rocketmq_brokeruntime_putmessage_times_total", rt))

	// Label sets are exactly the exporter's.
	want := map[string][]string{
		"rocketmq_producer_offset":                         compatTopicLabels,
		"rocketmq_consumer_offset":                         compatGroupLabels,
		"rocketmq_group_diff":                              compatDiffLabels,
		"rocketmq_group_count":                             compatCountLabels,
		"rocketmq_client_consume_rt":                       compatClientLabels,
		"rocketmq_broker_tps":                              compatBrokerLabels,
		"rocketmq_brokeruntime_put_tps10":                  compatRuntimeLabels,
		"rocketmq_brokeruntime_pmdt_0ms":                   compatRuntimeLabels,
		"rocketmq_brokeruntime_commitlogdir_capacity_free": compatRuntimeLabels,
	}
	for name, labels := range want {
		require.Contains(t, fams, name)
		got := labelsOf(fams[name])
		assert.Len(t, got, len(labels), name)
		for _, lb := range labels {
			assert.True(t, got[lb], "%s lacks label %s", name, lb)
		}
	}
}

// The series are off with metrics.rocketmq_exporter_compat false.
func TestRocketMQExporterSeriesOff(t *testing.T) {
	l := startLive(t) // Config{} leaves the switch off
	for name := range l.scrape() {
		assert.False(t, strings.HasPrefix(name, "rocketmq_"), name)
	}
	assert.True(t, NewConfig().RocketMQExporterCompat, "on by default")
}

var (
	rmqMetric    = regexp.MustCompile(`\brocketmq_\w+`)
	rmqGrouping  = regexp.MustCompile(`\b(?:by|on|ignoring)\s*\(([^)]*)\)`)
	rmqMatchers  = regexp.MustCompile(`\{([^}]*)\}`)
	rmqMatchName = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)`)
	// rmqAggregate is sum(<expr holding one metric>) by (<labels>): the
	// labels must be on that metric for the grouping to keep them.
	rmqAggregate = regexp.MustCompile(`\b(?:sum|avg|min|max|count)\s*\(((?:[^()]|\([^()]*\))*)\)\s*by\s*\(([^)]*)\)`)
)

func splitLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// readQueries reads testdata/rocketmq_exporter_queries.txt: one
// expression a line, "#" comments and "[section]" headers aside.
func readQueries(t *testing.T) []string {
	f, err := os.Open("testdata/rocketmq_exporter_queries.txt")
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		out = append(out, line)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestRocketMQExporterQueries checks every query of rocketmq-exporter's
// Grafana dashboard (10477) and alert rules against a live scrape of a
// broker with traffic: each metric a query names is served, and each
// label it groups, joins or matches on is on the series it applies to.
// It does not evaluate PromQL (that needs Prometheus' engine); the
// message-accumulation expression is worked out by hand below.
func TestRocketMQExporterQueries(t *testing.T) {
	l := startCompat(t)
	fams := l.scrape()
	queries := readQueries(t)
	require.Len(t, queries, 58, "52 dashboard targets and 6 alert rules")
	for _, q := range queries {
		names := rmqMetric.FindAllString(q, -1)
		require.NotEmpty(t, names, q)
		union := map[string]bool{}
		for _, n := range names {
			f, ok := fams[n]
			if !assert.True(t, ok, "%s (query %q) is not served", n, q) {
				continue
			}
			assert.NotEmpty(t, f.Metric, n)
			for lb := range labelsOf(f) {
				union[lb] = true
			}
		}
		var used []string
		for _, m := range rmqGrouping.FindAllStringSubmatch(q, -1) {
			used = append(used, splitLabels(m[1])...)
		}
		for _, m := range rmqMatchers.FindAllStringSubmatch(q, -1) {
			for _, mm := range rmqMatchName.FindAllStringSubmatch(m[1], -1) {
				used = append(used, mm[1])
			}
		}
		for _, lb := range used {
			assert.True(t, union[lb], "label %s of %q is on none of its series", lb, q)
		}
		for _, m := range rmqAggregate.FindAllStringSubmatch(q, -1) {
			for _, n := range rmqMetric.FindAllString(m[1], -1) {
				if f, ok := fams[n]; ok {
					have := labelsOf(f)
					for _, lb := range splitLabels(m[2]) {
						assert.True(t, have[lb], "%s lacks %s, grouped by in %q", n, lb, q)
					}
				}
			}
		}
	}

	// rocketmq_message_accumulation: sum(rocketmq_producer_offset) by
	// (topic) - on(topic) group_right sum(rocketmq_consumer_offset) by
	// (group,topic), for liveGroup on liveTopic.
	produced := l.must(fams, "rocketmq_producer_offset", map[string]string{"topic": liveTopic})
	consumed := l.must(fams, "rocketmq_consumer_offset", map[string]string{"topic": liveTopic, "group": liveGroup})
	assert.Equal(t, float64(liveSends-liveCommit), produced-consumed)
}

// A client whose running-info call fails is not asked again at the next
// scrapes (for compatClientMute): one wedged consumer must not slow every
// scrape by the call timeout.
func TestRocketMQExporterClientMuted(t *testing.T) {
	var calls atomic.Int32
	h := remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.GetConsumerRunningInfo {
			calls.Add(1)
		}
		return remoting.Errorf(req, remoting.SystemError, "no running info")
	})
	l := startLiveWith(t, Config{Listen: "127.0.0.1:0", RocketMQExporterCompat: true}, h)
	for range 3 {
		fams := l.scrape()
		assert.NotContains(t, fams, "rocketmq_client_consume_rt")
		assert.Contains(t, fams, "rocketmq_group_diff")
	}
	assert.EqualValues(t, 1, calls.Load(), "asked once, then muted")
}
