package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const (
	liveTopic   = "LiveTopic"
	liveGroup   = "LiveGroup"
	caughtGroup = "CaughtUpGroup"
	liveSends   = 5
	liveCommit  = 2
)

// live is an in-process name server and broker (commitlog store, TCP on
// loopback) with the metrics service, after traffic: liveSends sends to
// liveTopic queue 0 over TCP, a consumer heartbeat and one pull of them all by liveGroup, which
// commits liveCommit, and caughtGroup, which commits them all.
type live struct {
	t   *testing.T
	url string
	b   *broker.Broker
	s   *Service
	// invoke sends a request to the broker over the fixture's client.
	invoke func(code int32, ext map[string]string, body []byte) *remoting.Command
}

func transports() *transport.Set {
	return transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
}

func startLive(t *testing.T) *live {
	t.Helper()
	return startLiveWith(t, Config{Listen: "127.0.0.1:0"}, nil)
}

// startLiveWith is startLive with the metrics configuration cfg and h
// answering the broker's requests to the fixture's client.
func startLiveWith(t *testing.T, cfg Config, h remoting.Handler) *live {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()

	nc := namesrv.NewConfig()
	nc.Listen = "127.0.0.1:0"
	nc.KVConfigPath = dir + "/kv.json"
	ns, err := namesrv.New(nc, transports(), nil)
	require.NoError(t, err)
	require.NoError(t, ns.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, ns.Stop(context.Background())) })

	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir + "/store", Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	bc.Cluster, bc.Name = "LiveCluster", "live-broker-a"
	_, nsHostPort := transport.SplitScheme(ns.Addrs()[0])
	bc.Namesrv = []string{nsHostPort}
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: transports(), DataDir: dir + "/store", Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)

	s, err := New(&cfg, Deps{Broker: b, Namesrv: ns, StorageDir: dir + "/store"})
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, b.Stop(context.Background())) })
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		assert.NoError(t, s.Stop(context.Background()))
		http.DefaultClient.CloseIdleConnections()
	})

	client := remoting.NewClient(transports().Dial, h, nil, remoting.PeerOptions{})
	t.Cleanup(func() { client.Close() })
	addr := b.Addrs()[0]
	invoke := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := client.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, "code %d: %s", code, resp.Remark)
		return resp
	}
	// A consumer's heartbeat creates its group's retry topic (backlog).
	hb, err := json.Marshal(protocol.HeartbeatData{ClientID: "127.0.0.1@live", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: liveGroup, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: liveTopic, SubString: "*", ExpressionType: "TAG"}},
	}}})
	require.NoError(t, err)
	invoke(remoting.HeartBeat, nil, hb)
	for i := 0; i < liveSends; i++ {
		invoke(remoting.SendMessage, map[string]string{
			"producerGroup": "LivePG", "topic": liveTopic, "defaultTopic": protocol.AutoCreateTopic,
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": message.Properties{"TAGS": "A"}.Encode(), "reconsumeTimes": "0", "unitMode": "false",
			"maxReconsumeTimes": "0", "batch": "false",
		}, []byte("body-"+strconv.Itoa(i)))
	}
	invoke(remoting.PullMessage, map[string]string{
		"consumerGroup": liveGroup, "topic": liveTopic, "queueId": "0",
		"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "4", // FLAG_SUBSCRIPTION
		"commitOffset": "-1", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil)
	commit := func(group string, off int) {
		invoke(remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": liveTopic, "queueId": "0", "commitOffset": strconv.Itoa(off),
		}, nil)
	}
	commit(liveGroup, liveCommit)
	commit(caughtGroup, liveSends)
	l := &live{t: t, url: "http://" + s.Addr() + "/metrics", b: b, s: s, invoke: invoke}
	// The broker registers with the name server in the background.
	require.Eventually(t, func() bool {
		v, ok := l.value(l.scrape(), "quiver_namesrv_brokers", nil)
		return ok && v == 1
	}, 10*time.Second, 10*time.Millisecond, "broker registered with the name server")
	return l
}

// scrape fetches /metrics and parses it with Prometheus' text parser.
func (l *live) scrape() map[string]*dto.MetricFamily {
	l.t.Helper()
	resp, err := http.Get(l.url)
	require.NoError(l.t, err)
	defer resp.Body.Close()
	require.Equal(l.t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(l.t, err)
	return fams
}

// value finds the first series of name carrying labels (a subset).
func (l *live) value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
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

func (l *live) must(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	l.t.Helper()
	v, ok := l.value(fams, name, labels)
	require.True(l.t, ok, "%s%v missing", name, labels)
	return v
}

// TestExporterFamilies checks the rocketmq-exporter families after the
// live fixture's traffic: consume rate per group, consumer delay by store
// time, producer offset per topic, and cluster/broker labels on every
// broker series.
func TestExporterFamilies(t *testing.T) {
	l := startLive(t)
	fams := l.scrape()
	tq := map[string]string{"topic": liveTopic}
	gq := map[string]string{"group": liveGroup, "topic": liveTopic, "queue": "0"}

	assert.Equal(t, float64(liveSends), l.must(fams, "quiver_consumer_messages_total", map[string]string{"group": liveGroup, "topic": liveTopic}))
	assert.Greater(t, l.must(fams, "quiver_consumer_bytes_total", map[string]string{"group": liveGroup, "topic": liveTopic}), float64(liveSends*6))
	assert.Equal(t, float64(liveSends), l.must(fams, "quiver_messages_out_total", tq))
	assert.Equal(t, float64(liveSends), l.must(fams, "quiver_topic_max_offset", tq))
	assert.Equal(t, float64(liveSends), l.must(fams, "quiver_queue_max_offset", map[string]string{"topic": liveTopic, "queue": "0"}))
	assert.Equal(t, float64(liveCommit), l.must(fams, "quiver_consumer_offset", gq))
	assert.Equal(t, float64(liveSends-liveCommit), l.must(fams, "quiver_consumer_lag_messages", gq))

	// Delay: the age of message liveCommit, sent during this test.
	delay := l.must(fams, "quiver_consumer_delay_seconds", gq)
	assert.Greater(t, delay, 0.0)
	assert.Less(t, delay, 60.0)
	assert.Equal(t, 0.0, l.must(fams, "quiver_consumer_delay_seconds", map[string]string{"group": caughtGroup, "topic": liveTopic, "queue": "0"}), "caught up")
	assert.Equal(t, 0.0, l.must(fams, "quiver_consumer_delay_unmeasured_queues", nil))
	// It grows with time at the next scrape (the store time is cached,
	// not the delay).
	require.Eventually(t, func() bool {
		return l.must(l.scrape(), "quiver_consumer_delay_seconds", gq) > delay
	}, 10*time.Second, 20*time.Millisecond)

	// Every broker series names its cluster and broker; name-server and
	// process series do not.
	brokerSeries := 0
	for name, f := range fams {
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, lp := range m.Label {
				have[lp.GetName()] = lp.GetValue()
			}
			switch {
			case len(name) > len("quiver_namesrv_") && name[:len("quiver_namesrv_")] == "quiver_namesrv_",
				len(name) < len("quiver_") || name[:len("quiver_")] != "quiver_":
				assert.NotContains(t, have, "broker", name)
			default:
				brokerSeries++
				assert.Equal(t, "LiveCluster", have["cluster"], name)
				assert.Equal(t, "live-broker-a", have["broker"], name)
			}
		}
	}
	assert.Greater(t, brokerSeries, 20)
}
