package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	gconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

// tracedTraffic runs, on topic, a traced producer of pgroup and a traced
// push consumer of cgroup (Quiver's client, WithTrace) until the test
// ends; send sends one message and returns its msgId (safe from any
// goroutine).
func tracedTraffic(t *testing.T, ns, topic, pgroup, cgroup string) (send func(body string) (string, error), flush func()) {
	t.Helper()
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1")
	require.Eventually(t, func() bool {
		_, err := mqRun(t, ns, "topic", "route", "--topic", topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the name server routes %s", topic)
	c, err := client.New(client.WithNameServers(ns), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	d := trace.New(c)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := producer.New(c, pgroup, producer.WithTrace(d))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	pc, err := consumer.NewPush(c, cgroup, func(context.Context, []*client.MessageExt) consumer.Result { return consumer.ConsumeSuccess },
		consumer.WithTrace(d), consumer.WithConsumeFrom(consumer.FromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.All()))
	require.NoError(t, pc.Start(ctx))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	send = func(body string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body)).SetTag("T").SetKeys(body))
		if err != nil {
			return "", err
		}
		return res.MsgID, nil
	}
	flush = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, d.Flush(ctx))
	}
	return send, flush
}

// TestConsoleOverviewAndGroups drives the new console views on a live mq
// dev with traces on: the overview ranks the written topic first by TPS
// in and out, the topic and group lists carry TPS, the topic lists its
// consuming groups with their lag, /api/producers?group= answers, the
// trace of a message shows its send and its consumer group, the message's
// consume status names the group, and subscription groups are created,
// updated and deleted through the console's action checks.
func TestConsoleOverviewAndGroups(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.trace_topic_enable=true"}})
	ns := dev.Namesrv
	mqOK(t, ns, "topic", "create", "--topic", "QuietTopic", "--read-queues", "1", "--write-queues", "1")
	send, flush := tracedTraffic(t, ns, "BusyTopic", "BusyPG", "BusyCG")

	c := newConsole(ns, true, nil, nil)
	require.NoError(t, c.Start(context.Background(), "127.0.0.1:0", 100*time.Millisecond))
	defer c.Stop(context.Background())
	base := "http://" + c.Addr()
	require.Eventually(t, func() bool {
		tr := c.hist.tracked(kindTopic)
		return containsStr(tr, "BusyTopic") && containsStr(tr, "QuietTopic") && containsStr(c.hist.tracked(kindGroup), "BusyCG")
	}, 10*time.Second, 20*time.Millisecond, "topics and group sampled")

	var lastID string
	var ov overview
	require.Eventually(t, func() bool {
		for i := range 5 {
			id, err := send(fmt.Sprintf("busy-%d", i))
			require.NoError(t, err)
			lastID = id
		}
		require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/overview", nil, &ov))
		return len(ov.TopicsIn) >= 2 && ov.TopicsIn[0].Topic == "BusyTopic" && val(ov.TopicsIn[0].InTps) > 0 &&
			ov.TopicsOut[0].Topic == "BusyTopic" && val(ov.TopicsOut[0].OutTps) > 0
	}, 30*time.Second, 200*time.Millisecond, "BusyTopic first by TPS in and out")
	assert.Equal(t, "broker-a", ov.Brokers[0].Broker)
	assert.Positive(t, val(ov.Brokers[0].InTps))
	for _, tr := range ov.TopicsIn {
		if tr.Topic == "QuietTopic" {
			require.NotNil(t, tr.InTps)
			assert.Zero(t, *tr.InTps)
		}
	}
	require.NotEmpty(t, ov.BrokerTrend.Lines)
	assert.Equal(t, "broker-a in", ov.BrokerTrend.Lines[0].Name)
	require.NotEmpty(t, ov.TopicTrend.Lines)
	assert.Equal(t, "BusyTopic in", ov.TopicTrend.Lines[0].Name)
	assert.Equal(t, histMaxTopics, ov.Caps[kindTopic])
	assert.Positive(t, ov.Samples)

	var tp listPage[topicSummary]
	httpJSON(t, "GET", base+"/api/topics?q=BusyTopic", nil, &tp)
	require.Len(t, tp.Items, 1)
	assert.Positive(t, val(tp.Items[0].InTps), "TPS column")
	var gs []groupSummary
	require.Eventually(t, func() bool {
		httpJSON(t, "GET", base+"/api/groups", nil, &gs)
		for _, g := range gs {
			if g.Group == "BusyCG" {
				return val(g.ConsumeTps) > 0
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "consume TPS column")

	// Topic → consuming groups.
	var tg []topicGroup
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/topics/BusyTopic/groups", nil, &tg))
	require.Len(t, tg, 1)
	assert.Equal(t, "BusyCG", tg[0].Group)
	assert.Equal(t, 1, tg[0].Clients)
	assert.Equal(t, "CLUSTERING", tg[0].Model)
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/topics/QuietTopic/groups", nil, &tg))
	assert.Empty(t, tg)

	// Producers of a group.
	var pcs []groupClient
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/producers?group=BusyPG", nil, &pcs))
	require.Len(t, pcs, 1)
	assert.Equal(t, "GO", pcs[0].Language)

	// The trace of the last message: sent, then consumed by BusyCG.
	flush()
	var ta traceAnswer
	require.Eventually(t, func() bool {
		httpJSON(t, "GET", base+"/api/trace?msgId="+lastID, nil, &ta)
		return len(ta.Pub) == 1 && len(ta.Groups) == 1 && ta.Groups[0].Status == "success"
	}, 20*time.Second, 100*time.Millisecond, "trace of %s", lastID)
	assert.Equal(t, "BusyPG", ta.Pub[0].Group)
	assert.Equal(t, "BusyTopic", ta.Pub[0].Topic)
	assert.Equal(t, "BusyCG", ta.Groups[0].Group)
	assert.Equal(t, 1, ta.Groups[0].Deliveries)
	assert.Empty(t, ta.Note)
	httpJSON(t, "GET", base+"/api/trace?topic=NoSuchTraceTopic&msgId="+lastID, nil, &ta)
	assert.Contains(t, ta.Note, "traces are off")
	var e map[string]string
	assert.Equal(t, http.StatusBadRequest, httpJSON(t, "GET", base+"/api/trace", nil, &e))

	// The message's consume status per group.
	var track struct {
		Tracks []messageTrack `json:"tracks"`
	}
	require.Eventually(t, func() bool {
		httpJSON(t, "GET", base+"/api/messages/track?id="+lastID, nil, &track)
		return len(track.Tracks) == 1 && track.Tracks[0].TrackType == "CONSUMED"
	}, 20*time.Second, 100*time.Millisecond, "consumed by BusyCG: %+v", track)
	mqOK(t, ns, "group", "create", "--group", "OfflineCG")

	// Group management: create, update, delete, with the checks.
	h := newConsoleHTTP(t, base)
	var res map[string]any
	form := url.Values{"group": {"ConsoleCG"}, "mode": {"create"}, "retryMaxTimes": {"3"}, "consumeBroadcastEnable": {"false"},
		"groupRetryPolicy": {`{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000]}}`}}
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/groups", form, map[string]string{"Origin": "http://evil.example"}, &e), "cross-origin")
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/groups", form, map[string]string{consoleCSRFHeader: ""}, &e), "no CSRF token")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/groups", form, nil, &res))
	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/groups", form, nil, &e), "a second create")
	assert.Contains(t, e["error"], "exists")
	var cfg struct {
		Configs map[string]map[string]any `json:"configs"`
	}
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/groups/ConsoleCG/config", nil, &cfg))
	bc := cfg.Configs["broker-a"]
	require.NotNil(t, bc)
	assert.EqualValues(t, 3, bc["retryMaxTimes"])
	assert.Equal(t, false, bc["consumeBroadcastEnable"])
	assert.Equal(t, true, bc["consumeEnable"])
	assert.Equal(t, "CUSTOMIZED", bc["groupRetryPolicy"].(map[string]any)["type"])
	require.Contains(t, mqOK(t, ns, "group", "list"), "ConsoleCG")

	upd := url.Values{"group": {"ConsoleCG"}, "mode": {"update"}, "consumeEnable": {"false"}, "retryQueueNums": {"2"}}
	require.Equal(t, http.StatusOK, h.do("POST", "/api/groups", upd, nil, &res))
	httpJSON(t, "GET", base+"/api/groups/ConsoleCG/config", nil, &cfg)
	bc = cfg.Configs["broker-a"]
	assert.Equal(t, false, bc["consumeEnable"])
	assert.EqualValues(t, 2, bc["retryQueueNums"])
	assert.EqualValues(t, 3, bc["retryMaxTimes"], "fields not given are kept")
	assert.Equal(t, "CUSTOMIZED", bc["groupRetryPolicy"].(map[string]any)["type"], "kept")
	for _, bad := range []url.Values{
		{"group": {"ConsoleCG"}, "mode": {"update"}, "retryMaxTimes": {"many"}},
		{"group": {"ConsoleCG"}, "mode": {"update"}, "consumeEnable": {"maybe"}},
		{"group": {"ConsoleCG"}, "mode": {"update"}, "groupRetryPolicy": {`{"type":"LINEAR"}`}},
		{"group": {"NoSuchCG"}, "mode": {"update"}},
		{"group": {"bad group!"}, "mode": {"create"}},
	} {
		assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/groups", bad, nil, &e), "%v", bad)
	}

	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/groups/ConsoleCG/delete", url.Values{"confirm": {"other"}}, nil, &e))
	assert.Contains(t, e["error"], "confirm")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/groups/ConsoleCG/delete", url.Values{"confirm": {"ConsoleCG"}}, nil, &res))
	assert.NotContains(t, mqOK(t, ns, "group", "list"), "ConsoleCG")
	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/groups/ConsoleCG/delete", url.Values{"confirm": {"ConsoleCG"}}, nil, &e), "gone")

	// A read-only console refuses the writes.
	ro := newConsole(ns, false, nil, nil)
	require.NoError(t, ro.Start(context.Background(), "127.0.0.1:0", time.Second))
	defer ro.Stop(context.Background())
	rh := newConsoleHTTP(t, "http://"+ro.Addr())
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/groups", form, nil, &e))
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/groups/OfflineCG/delete", url.Values{"confirm": {"OfflineCG"}}, nil, &e))
	assert.Contains(t, mqOK(t, ns, "group", "list"), "OfflineCG")
}

// TestConsoleGroupWritesNeedACLRights: with console.auth: acl, a plain
// account cannot create or delete a subscription group (the broker
// refuses it), an admin account can.
func TestConsoleGroupWritesNeedACLRights(t *testing.T) {
	_, base := aclDev(t)
	h := newConsoleHTTP(t, base)
	var si sessionInfo
	var e map[string]string
	form := url.Values{"group": {"AclConsoleCG"}, "mode": {"create"}}
	assert.Equal(t, http.StatusUnauthorized, h.do("POST", "/api/groups", form, nil, &e), "no login")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {"appKey01"}, "secretKey": {"appSecret01"}}, nil, &si))
	h.csrf = si.CSRF
	assert.Equal(t, http.StatusBadGateway, h.do("POST", "/api/groups", form, nil, &e))
	assert.Contains(t, e["error"], "no permission")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/logout", nil, nil, &si))
	h.csrf = si.CSRF
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {"adminKey01"}, "secretKey": {"adminSecret01"}}, nil, &si))
	h.csrf = si.CSRF
	var res map[string]any
	require.Equal(t, http.StatusOK, h.do("POST", "/api/groups", form, nil, &res))
	require.Equal(t, http.StatusOK, h.do("POST", "/api/groups/AclConsoleCG/delete", url.Values{"confirm": {"AclConsoleCG"}}, nil, &res))
}

// TestConsoleResendToGroup: the console has an online consumer of a group
// (the official Go 4.x client) consume a message again
// (CONSUME_MESSAGE_DIRECTLY): its handler sees the message a second time
// and the client's result is answered; a group with no consumer online
// and a read-only console are refused.
func TestConsoleResendToGroup(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	ns := dev.Namesrv
	const topic, group = "DirectTopic", "DirectCG"
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1")
	var mu sync.Mutex
	seen := map[string]int{}
	pc, err := rocketmq.NewPushConsumer(gconsumer.WithNameServer([]string{ns}), gconsumer.WithGroupName(group),
		gconsumer.WithInstance(fmt.Sprintf("direct-%d", time.Now().UnixNano())), gconsumer.WithConsumeFromWhere(gconsumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, gconsumer.MessageSelector{}, func(_ context.Context, ms ...*primitive.MessageExt) (gconsumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			seen[string(m.Body)]++
		}
		return gconsumer.ConsumeSuccess, nil
	}))
	require.NoError(t, pc.Start())
	t.Cleanup(func() { _ = pc.Shutdown() })
	count := func(body string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[body]
	}
	var sent map[string]any
	mqJSON(t, ns, &sent, "message", "send", "--topic", topic, "--body", "direct-1")
	require.Eventually(t, func() bool { return count("direct-1") == 1 }, 30*time.Second, 50*time.Millisecond, "consumed once")

	c := newConsole(ns, true, nil, nil)
	require.NoError(t, c.Start(context.Background(), "127.0.0.1:0", time.Second))
	defer c.Stop(context.Background())
	h := newConsoleHTTP(t, "http://"+c.Addr())
	var res struct {
		ClientID string         `json:"clientId"`
		Result   map[string]any `json:"result"`
	}
	require.Equal(t, http.StatusOK, h.do("POST", "/api/messages/consume", url.Values{"id": {sent["offsetMsgId"].(string)}, "group": {group}}, nil, &res))
	assert.NotEmpty(t, res.ClientID)
	assert.Contains(t, res.Result, "consumeResult")
	assert.Equal(t, 2, count("direct-1"), "the handler ran again")

	var e map[string]string
	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/messages/consume", url.Values{"id": {sent["offsetMsgId"].(string)}, "group": {"NobodyCG"}}, nil, &e))
	assert.Contains(t, e["error"], "no consumer online")
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/messages/consume", url.Values{"id": {sent["offsetMsgId"].(string)}, "group": {group}},
		map[string]string{"Origin": "http://evil.example"}, &e))
	ro := newConsole(ns, false, nil, nil)
	require.NoError(t, ro.Start(context.Background(), "127.0.0.1:0", time.Second))
	defer ro.Stop(context.Background())
	rh := newConsoleHTTP(t, "http://"+ro.Addr())
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/messages/consume", url.Values{"id": {sent["offsetMsgId"].(string)}, "group": {group}}, nil, &e))
	assert.Equal(t, 2, count("direct-1"), "refused: not consumed again")
}
