package trace_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

// traceTypes lists the types of records, in order.
func traceTypes(recs []admin.TraceRecord) []trace.Type {
	var out []trace.Type
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

// TestQuiverClientTraces: on a live mq dev with broker.trace_topic_enable,
// Quiver's producer and push consumer with WithTrace write a message's
// Pub, SubBefore and SubAfter records, the first consume failing
// (ConsumeRetryLater) and the redelivery succeeding; admin.QueryTrace
// reads them back decoded, oldest first.
func TestQuiverClientTraces(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.trace_topic_enable=true"}})
	c, err := client.New(client.WithNameServers(dev.Namesrv), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	d := trace.New(c)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, d.Close(ctx))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := admin.New(c)
	const topic = "TracedOrders"
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}))

	p, err := producer.New(c, "TracePG", producer.WithTrace(d))
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	m := client.NewMessage(topic, []byte("traced body")).SetTag("TagA").SetKeys("order-1")
	res, err := p.SendSync(ctx, m)
	require.NoError(t, err)

	calls := make(chan struct{}, 4)
	var n int
	pc, err := consumer.NewPush(c, "TraceCG", func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
		n++
		calls <- struct{}{}
		if n == 1 {
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	}, consumer.WithTrace(d), consumer.WithConsumeFrom(consumer.FromFirstOffset), consumer.WithRetryDelayLevel(1))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.All()))
	require.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(context.Background())
	for i := 0; i < 2; i++ {
		select {
		case <-calls:
		case <-ctx.Done():
			t.Fatalf("consume %d never came", i+1)
		}
	}
	require.NoError(t, d.Flush(ctx))

	var recs []admin.TraceRecord
	require.Eventually(t, func() bool {
		recs, err = a.QueryTrace(ctx, "", res.MsgID)
		return err == nil && len(recs) == 5
	}, 30*time.Second, 100*time.Millisecond, "records %v, err %v", recs, err)
	assert.Equal(t, []trace.Type{trace.Pub, trace.SubBefore, trace.SubAfter, trace.SubBefore, trace.SubAfter}, traceTypes(recs))

	pub := recs[0]
	assert.Equal(t, "TracePG", pub.Group)
	assert.Equal(t, topic, pub.Topic)
	assert.Equal(t, "TagA", pub.Tags)
	assert.Equal(t, "order-1", pub.Keys)
	assert.Equal(t, res.OffsetMsgID, pub.OffsetMsgID)
	assert.Equal(t, dev.Broker, pub.StoreHost)
	assert.Equal(t, len("traced body"), pub.BodyLength)
	assert.Equal(t, "Normal_Msg", pub.MsgType)
	assert.Equal(t, "success", pub.Status)
	assert.Equal(t, "DefaultRegion", pub.RegionID)
	assert.NotEmpty(t, pub.ClientHost)

	first, firstEnd, retry, retryEnd := recs[1], recs[2], recs[3], recs[4]
	for _, r := range recs[1:] {
		assert.Equal(t, "TraceCG", r.Group)
		assert.Equal(t, res.MsgID, r.MsgID)
	}
	assert.Equal(t, 0, first.RetryTimes)
	assert.Equal(t, 1, retry.RetryTimes, "the redelivery from the retry topic")
	assert.Equal(t, first.RequestID, firstEnd.RequestID)
	assert.Equal(t, retry.RequestID, retryEnd.RequestID)
	assert.NotEqual(t, first.RequestID, retry.RequestID)
	assert.Equal(t, "failed", firstEnd.Status)
	assert.Equal(t, trace.ConsumeFailed, firstEnd.ContextCode)
	assert.Equal(t, "success", retryEnd.Status)
	assert.Equal(t, trace.ConsumeSuccess, retryEnd.ContextCode)

	// An async send (through automatic batching) is traced from its
	// callback, with its own msgId.
	const asyncTopic = "TracedAsync"
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: asyncTopic, ReadQueueNums: 1, WriteQueueNums: 1}))
	done := make(chan *client.SendResult, 1)
	require.NoError(t, p.SendAsync(ctx, func(_ context.Context, r *client.SendResult, err error) {
		assert.NoError(t, err)
		done <- r
	}, client.NewMessage(asyncTopic, []byte("async"))))
	var ares *client.SendResult
	select {
	case ares = <-done:
	case <-ctx.Done():
		t.Fatal("async send never answered")
	}
	require.NotNil(t, ares)
	require.NoError(t, d.Flush(ctx))
	require.Eventually(t, func() bool {
		recs, err = a.QueryTrace(ctx, "", ares.MsgID)
		return err == nil && len(recs) == 1
	}, 30*time.Second, 100*time.Millisecond, "records %v, err %v", recs, err)
	assert.Equal(t, trace.Pub, recs[0].Type)
	assert.Equal(t, asyncTopic, recs[0].Topic)
	assert.Equal(t, ares.OffsetMsgID, recs[0].OffsetMsgID)
	assert.Equal(t, "success", recs[0].Status)

	st := d.Stats()
	assert.Zero(t, st.Dropped)
	assert.Zero(t, st.Failed)
	assert.Positive(t, st.Sent)

	// Another id has no trace; a wrong trace topic has no route.
	recs, err = a.QueryTrace(ctx, "", client.NewUniqID())
	require.NoError(t, err)
	assert.Empty(t, recs)
	_, err = a.QueryTrace(ctx, "NoSuchTraceTopic", res.MsgID)
	assert.ErrorIs(t, err, client.ErrNoRoute)
}

type commitAll struct{}

func (commitAll) ExecuteLocalTransaction(context.Context, *client.Message) producer.LocalTransactionState {
	return producer.Commit
}

func (commitAll) CheckLocalTransaction(context.Context, *client.MessageExt) producer.LocalTransactionState {
	return producer.Commit
}

// TestQuiverTransactionTraces: a transactional send with WithTrace writes
// the half message's Pub (Trans_Msg_Half) and, once END_TRANSACTION went
// out, an EndTransaction record with Java's state name, as Java's
// EndTransactionTraceHookImpl.
func TestQuiverTransactionTraces(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.trace_topic_enable=true"}})
	c, err := client.New(client.WithNameServers(dev.Namesrv), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	d := trace.New(c)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, d.Close(ctx))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := admin.New(c)
	const topic = "TracedPayments"
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}))

	tp, err := producer.NewTransactional(c, "TraceTxPG", commitAll{}, producer.WithTrace(d))
	require.NoError(t, err)
	defer tp.Shutdown(context.Background())
	res, err := tp.SendMessageInTransaction(ctx, client.NewMessage(topic, []byte("pay")).SetTag("TagT").SetKeys("pay-1"))
	require.NoError(t, err)
	require.Equal(t, producer.Commit, res.State)
	require.NoError(t, d.Flush(ctx))

	var recs []admin.TraceRecord
	require.Eventually(t, func() bool {
		recs, err = a.QueryTrace(ctx, "", res.MsgID)
		return err == nil && len(recs) == 2
	}, 30*time.Second, 100*time.Millisecond, "records %v, err %v", recs, err)
	assert.Equal(t, []trace.Type{trace.Pub, trace.EndTransaction}, traceTypes(recs))
	assert.Equal(t, "Trans_Msg_Half", recs[0].MsgType)
	end := recs[1]
	assert.Equal(t, "TraceTxPG", end.Group)
	assert.Equal(t, topic, end.Topic)
	assert.Equal(t, "TagT", end.Tags)
	assert.Equal(t, "pay-1", end.Keys)
	assert.Equal(t, dev.Broker, end.StoreHost)
	assert.Equal(t, "Trans_msg_Commit", end.MsgType)
	assert.Equal(t, "COMMIT_MESSAGE", end.TransactionState)
	assert.Equal(t, res.TransactionID, end.TransactionID)
	assert.False(t, end.FromTransactionCheck)
}
