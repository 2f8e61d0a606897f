package grpc_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// runNode runs one phase of testdata/node_cycle.js against endpoints and
// decodes its JSON output into out.
func runNode(t *testing.T, dir, phase, endpoints string, out any) {
	t.Helper()
	runNodeScript(t, dir, "node_cycle.js", 3*time.Minute, out, phase, endpoints)
}

// TestNodeClientCycle drives the official Node.js 5.x client through the
// features RocketMQ 5 applications use, against a real `mq dev` process
// (gRPC endpoint, pop state, schedule, SQL92 filter): FIFO in order for an
// orderly group, a delayed message not delivered before its time, a SQL92
// subscription, redelivery after the invisible time, a changed invisible
// duration, the dead-letter queue once the group's attempts are used up, a
// PushConsumer whose failed message comes back, and a restart of the
// broker in the middle of a receive/ack cycle (no acked message comes
// again, no unacked one is lost).
func TestNodeClientCycle(t *testing.T) {
	dir := nodeClientDir(t)
	e := startNodeDev(t)
	endpoints, p := e.endpoints, e.dev
	invoke := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		t.Helper()
		return e.invoke(t, code, ext, body)
	}
	for _, topic := range []string{"NodeFifo", "NodeDelay", "NodeSql", "NodeRetry", "NodePush", "NodeRestart"} {
		e.createTopic(t, topic, 2)
	}
	for _, g := range []string{`{"groupName":"GNodeFifo","consumeMessageOrderly":true}`, `{"groupName":"GNodeRetry","retryMaxTimes":1}`} {
		resp := invoke(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(g))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	var sent struct {
		Fifo, Sql, Push, Restart []string
		Delay, Retry             string
		DelayDue                 int64
	}
	runNode(t, dir, "produce", endpoints, &sent)
	require.Len(t, sent.Fifo, 5)
	require.Len(t, sent.Push, 20)

	type view struct {
		ID, Tag, Body string
		Attempt       int
		Props         map[string]string
	}
	var got struct {
		Fifo  []string
		Delay []struct {
			ID string
			At int64
		}
		Sql   []string
		Retry struct{ First, Second, Third []view }
		Push  map[string]int
	}
	runNode(t, dir, "consume", endpoints, &got)
	assert.Equal(t, []string{"f0", "f1", "f2", "f3", "f4"}, got.Fifo, "one message group, in order")
	require.Len(t, got.Delay, 1)
	assert.Equal(t, sent.Delay, got.Delay[0].ID)
	assert.GreaterOrEqual(t, got.Delay[0].At, sent.DelayDue-200, "not delivered before its delivery time (200 ms clock granularity)")
	slices.Sort(got.Sql)
	assert.Equal(t, []string{"10", "8", "9"}, got.Sql, "a > 7, each once")

	require.Len(t, got.Retry.First, 1)
	assert.Equal(t, 1, got.Retry.First[0].Attempt)
	require.Len(t, got.Retry.Second, 1, "redelivered after the invisible time")
	assert.Equal(t, sent.Retry, got.Retry.Second[0].ID)
	assert.Equal(t, 2, got.Retry.Second[0].Attempt)
	assert.Empty(t, got.Retry.Third, "retryMaxTimes 1: two deliveries, then the dead-letter queue")
	dlq := invoke(remoting.PullMessage, map[string]string{
		"consumerGroup": "dlq-reader", "topic": protocol.DLQTopic("GNodeRetry"), "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
	}, nil)
	require.Equal(t, remoting.Success, dlq.Code, dlq.Remark)
	dl, err := client.DecodeMessages(dlq.Body, "")
	require.NoError(t, err)
	require.Len(t, dl, 1)
	assert.Equal(t, "retry me", string(dl[0].Body))
	assert.Equal(t, "NodeRetry", dl[0].Property("RETRY_TOPIC"))

	require.Len(t, got.Push, 20, "every message reached the PushConsumer")
	for i := range 20 {
		want := 1
		if i == 0 {
			want = 2 // failed once, redelivered after the policy's first delay
		}
		assert.Equal(t, want, got.Push["p"+strconv.Itoa(i)], "p%d", i)
	}

	var r1 struct{ Received, Acked []string }
	runNode(t, dir, "restart1", endpoints, &r1)
	require.Len(t, r1.Received, 6)
	require.Len(t, r1.Acked, 3)
	p.Restart()
	var r2 struct {
		Received []struct {
			ID      string
			Attempt int
		}
	}
	runNode(t, dir, "restart2", endpoints, &r2)
	var again []string
	for _, m := range r2.Received {
		again = append(again, m.ID)
		assert.Equal(t, 2, m.Attempt, "redelivered once, after its invisible time")
	}
	var unacked []string
	for _, id := range r1.Received {
		if !slices.Contains(r1.Acked, id) {
			unacked = append(unacked, id)
		}
	}
	slices.Sort(again)
	slices.Sort(unacked)
	assert.Equal(t, unacked, again, "after the restart: exactly the unacked messages, each once")
}
