package interop

import (
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	qconsumer "github.com/quivermq/quiver/client/consumer"
	qproducer "github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/officialtrace"
	"github.com/quivermq/quiver/internal/testserver"
)

// traceFlow is one traced message: sent, consumed once with a failure,
// then again from the retry topic with success.
type traceFlow struct {
	msgID         string
	topic         string
	pGroup, cGrp  string
	consumes      atomic.Int32
	consumedTwice chan struct{}
}

func newTraceFlow(topic string) *traceFlow {
	return &traceFlow{topic: topic, pGroup: uniq("TracePG"), cGrp: uniq("TraceCG"), consumedTwice: make(chan struct{})}
}

// consumed counts a consume and reports whether it is the first.
func (f *traceFlow) consumed() bool {
	n := f.consumes.Add(1)
	if n == 2 {
		close(f.consumedTwice)
	}
	return n == 1
}

func (f *traceFlow) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.consumedTwice:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: %d consumes within 60s, want 2", f.topic, f.consumes.Load())
	}
}

// queryTrace polls admin.QueryTrace until the flow's five records are in.
func queryTrace(t *testing.T, a *admin.Admin, msgID string) []admin.TraceRecord {
	t.Helper()
	var recs []admin.TraceRecord
	var err error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		recs, err = a.QueryTrace(ctx, "", msgID)
		return err == nil && len(recs) >= 5
	}, 30*time.Second, 100*time.Millisecond, "records %+v, err %v", recs, err)
	var types []trace.Type
	for _, r := range recs {
		types = append(types, r.Type)
	}
	require.Equal(t, []trace.Type{trace.Pub, trace.SubBefore, trace.SubAfter, trace.SubBefore, trace.SubAfter}, types)
	return recs
}

// filled names the fields of a record that are set, for comparing the
// records of two clients whose values differ (ids, times, hosts). The
// cost is left out: a send or consume may take under a millisecond.
func filled(r admin.TraceRecord) []string {
	var out []string
	v := reflect.ValueOf(r)
	for i := 0; i < v.NumField(); i++ {
		if name := v.Type().Field(i).Name; name != "CostMs" && !v.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// TestOfficialGoClientTraces: with broker.trace_topic_enable the trace
// topic has a route, so the official Go client's producer and push
// consumer with WithTrace store their trace records; they decode without
// error, admin.QueryTrace reads a send, a failed consume and the
// successful redelivery, and mq admin queryMsgTraceById and message
// trace print them. Quiver's own client, doing the same, writes records
// that decode to the same fields with the same outcomes.
func TestOfficialGoClientTraces(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.trace_topic_enable=true"}})
	awaitRoute(t, srv.Namesrv, trace.DefaultTopic)
	c, err := client.New(client.WithNameServers(srv.Namesrv), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	a := admin.New(c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The official client.
	official := newTraceFlow(uniq("TraceGo"))
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: official.topic, ReadQueueNums: 1, WriteQueueNums: 1}))
	awaitRoute(t, srv.Namesrv, official.topic)
	traceCfg := officialtrace.Config(srv.Namesrv)
	p := newProducer(t, srv.Namesrv, producer.WithGroupName(official.pGroup), producer.WithTrace(traceCfg))
	m := newMsg(official.topic, "traced by the Go client")
	m.WithTag("TagA")
	m.WithKeys([]string{"order-1"})
	res := sendSync(t, p, m)
	official.msgID = res.MsgID
	newPushConsumer(t, srv.Namesrv, official.topic, consumerOpts{group: official.cGrp, extra: []consumer.Option{consumer.WithTrace(traceCfg)}},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			if official.consumed() {
				cc, _ := primitive.GetConcurrentlyCtx(ctx)
				cc.DelayLevelWhenNextConsume = 1
				return consumer.ConsumeRetryLater, nil
			}
			return consumer.ConsumeSuccess, nil
		})
	official.wait(t)
	goRecs := queryTrace(t, a, official.msgID)

	// The trace messages as stored: keyed by the msgId, every record
	// readable by Java's rules.
	route, err := a.Route(ctx, trace.DefaultTopic)
	require.NoError(t, err)
	addr := route.Data.BrokerDatas[0].BrokerAddrs[0]
	stored, err := a.QueryMessage(ctx, addr, admin.Query{Topic: trace.DefaultTopic, Key: official.msgID, MaxNum: 64, End: time.Now().Add(time.Hour).UnixMilli()})
	require.NoError(t, err)
	require.NotEmpty(t, stored)
	for _, sm := range stored {
		assert.Contains(t, sm.Properties.KeyList(), official.msgID)
		ctxs, err := trace.Decode(string(sm.Body))
		require.NoError(t, err, "%q", sm.Body)
		assert.NotEmpty(t, ctxs)
	}

	pub, sub1, end1, sub2, end2 := goRecs[0], goRecs[1], goRecs[2], goRecs[3], goRecs[4]
	assert.Equal(t, official.pGroup, pub.Group)
	assert.Equal(t, official.topic, pub.Topic)
	assert.Equal(t, "TagA", pub.Tags)
	assert.Equal(t, "order-1", pub.Keys)
	assert.Equal(t, res.OffsetMsgID, pub.OffsetMsgID)
	assert.Equal(t, srv.Broker, pub.StoreHost)
	assert.Equal(t, "success", pub.Status)
	assert.Equal(t, "Normal_Msg", pub.MsgType)
	for _, r := range goRecs[1:] {
		assert.Equal(t, official.cGrp, r.Group)
	}
	assert.Equal(t, 0, sub1.RetryTimes)
	assert.Equal(t, 1, sub2.RetryTimes)
	assert.Equal(t, sub1.RequestID, end1.RequestID)
	assert.Equal(t, "failed", end1.Status)
	assert.Equal(t, trace.ConsumeFailed, end1.ContextCode)
	assert.Equal(t, "FAILED", end1.Result)
	assert.Equal(t, "SUCCESS", end2.Result)
	assert.Equal(t, "success", end2.Status)
	assert.Equal(t, trace.ConsumeSuccess, end2.ContextCode)

	// mq admin, mqadmin's way and Quiver's.
	out, err := exec.CommandContext(ctx, testserver.Binary(t), "admin", "-n", srv.Namesrv, "queryMsgTraceById", "-i", official.msgID).CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	t.Logf("mq admin queryMsgTraceById:\n%s", text)
	assert.Contains(t, text, "#ProducerGroup")
	assert.Contains(t, text, "#ConsumerGroup")
	pubLine, subLines := "", []string{}
	for _, l := range strings.Split(text, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "Pub":
			pubLine = l
		case len(f) > 0 && f[0] == "Sub":
			subLines = append(subLines, l)
		}
	}
	assert.Contains(t, pubLine, official.pGroup)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(pubLine), "success"), pubLine)
	require.Len(t, subLines, 2, text)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(subLines[0]), "failed"), subLines[0])
	assert.True(t, strings.HasSuffix(strings.TrimSpace(subLines[1]), "success"), subLines[1])
	assert.Contains(t, subLines[0], official.cGrp)

	out, err = exec.CommandContext(ctx, testserver.Binary(t), "admin", "-n", srv.Namesrv, "message", "trace", official.msgID, "-o", "json").Output()
	require.NoError(t, err, "%s", out)
	var fromCLI []admin.TraceRecord
	require.NoError(t, json.Unmarshal(out, &fromCLI))
	assert.Equal(t, goRecs, fromCLI)
	out, err = exec.CommandContext(ctx, testserver.Binary(t), "admin", "-n", srv.Namesrv, "message", "trace", client.NewUniqID()).CombinedOutput()
	assert.Error(t, err, "no trace is a failure, as mqadmin's")
	assert.Contains(t, string(out), "no trace of message")

	// Quiver's client, the same flow.
	ours := newTraceFlow(uniq("TraceQuiver"))
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: ours.topic, ReadQueueNums: 1, WriteQueueNums: 1}))
	d := trace.New(c)
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		assert.NoError(t, d.Close(cctx))
	}()
	qp, err := qproducer.New(c, ours.pGroup, qproducer.WithTrace(d))
	require.NoError(t, err)
	defer qp.Shutdown(context.Background())
	qres, err := qp.SendSync(ctx, client.NewMessage(ours.topic, []byte("traced by Quiver's client")).SetTag("TagA").SetKeys("order-1"))
	require.NoError(t, err)
	ours.msgID = qres.MsgID
	qc, err := qconsumer.NewPush(c, ours.cGrp, func(_ context.Context, _ []*client.MessageExt) qconsumer.Result {
		if ours.consumed() {
			return qconsumer.ConsumeRetryLater
		}
		return qconsumer.ConsumeSuccess
	}, qconsumer.WithTrace(d), qconsumer.WithConsumeFrom(qconsumer.FromFirstOffset), qconsumer.WithRetryDelayLevel(1))
	require.NoError(t, err)
	require.NoError(t, qc.Subscribe(ours.topic, qconsumer.All()))
	require.NoError(t, qc.Start(ctx))
	defer qc.Shutdown(context.Background())
	ours.wait(t)
	require.NoError(t, d.Flush(ctx))
	ourRecs := queryTrace(t, a, ours.msgID)

	for i := range goRecs {
		g, q := goRecs[i], ourRecs[i]
		assert.Equal(t, filled(g), filled(q), "record %d (%s): the same fields set", i, g.Type)
		assert.Equal(t, g.Status, q.Status, "record %d", i)
		assert.Equal(t, g.ContextCode, q.ContextCode, "record %d", i)
		assert.Equal(t, g.RetryTimes, q.RetryTimes, "record %d", i)
		assert.Equal(t, g.Tags, q.Tags, "record %d", i)
		assert.Equal(t, g.Keys, q.Keys, "record %d", i)
		assert.Equal(t, g.MsgType, q.MsgType, "record %d", i)
		assert.Equal(t, g.RegionID, q.RegionID, "record %d", i)
		assert.Equal(t, g.ClientHost, q.ClientHost, "record %d: both clients on this host", i)
	}
}
