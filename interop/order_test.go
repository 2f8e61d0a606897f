package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// orderLog checks per-key order of first deliveries. Bodies are
// "<key>:<step>"; redeliveries of steps already seen (after a rebalance
// the new owner restarts from the committed offset) are counted but
// allowed, a step that skips ahead is a violation.
type orderLog struct {
	mu         sync.Mutex
	last       map[string]int
	first      int
	dups       int
	violations []string
	byConsumer map[string]int
	slow       time.Duration
}

func newOrderLog(keys []string) *orderLog {
	l := &orderLog{last: map[string]int{}, byConsumer: map[string]int{}}
	for _, k := range keys {
		l.last[k] = -1
	}
	return l
}

func (l *orderLog) handler(name string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			key, s, _ := strings.Cut(string(m.Body), ":")
			step, err := strconv.Atoi(s)
			l.mu.Lock()
			switch last := l.last[key]; {
			case err != nil:
				l.violations = append(l.violations, "bad body "+string(m.Body))
			case step == last+1:
				l.last[key] = step
				l.first++
				l.byConsumer[name]++
			case step <= last:
				l.dups++
			default:
				l.violations = append(l.violations, fmt.Sprintf("%s: step %d delivered after %d (consumer %s, queue %d)", key, step, last, name, m.Queue.QueueId))
			}
			l.mu.Unlock()
		}
		if l.slow > 0 {
			time.Sleep(l.slow)
		}
		return consumer.ConsumeSuccess, nil
	}
}

func (l *orderLog) consumed(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byConsumer[name]
}

func (l *orderLog) firsts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// TestOrderedPerKeyAcrossConsumerRestart produces 5 keys × 100 ordered
// steps with the hash queue selector and consumes them with two orderly
// push consumers of one group while one of them restarts: every key's
// steps are first delivered in order, with no gaps.
func TestOrderedPerKeyAcrossConsumerRestart(t *testing.T) {
	// Short broker locks so queues a consumer gave up in a rebalance (the
	// Go client does not unlock them) move on quickly; the clients renew
	// every second, well within it.
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"broker.rebalance_lock_max_live_time=10s"}})
	topic := uniq("Ordered")
	group := uniq("OrderCG")
	rawCreateTopic(t, srv, topic, 4)

	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	const steps = 100
	log := newOrderLog(keys)
	log.slow = 3 * time.Millisecond
	orderly := []consumer.Option{consumer.WithConsumerOrder(true), consumer.WithRebalanceLockInterval(time.Second)}
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, instance: uniq("ordA"), extra: orderly}, log.handler("A"))
	instB := uniq("ordB")
	b := newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, instance: instB, extra: orderly}, log.handler("B"))
	waitFor(t, 30*time.Second, "both consumers registered", func() bool { return len(srvConsumerIDs(t, srv, group)) == 2 })

	p := newProducer(t, srv.Namesrv, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	queueOf := map[string]map[int]bool{}
	var qmu sync.Mutex
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for s := 0; s < steps; s++ {
			for _, k := range keys {
				m := primitive.NewMessage(topic, []byte(k+":"+strconv.Itoa(s))).WithShardingKey(k)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := p.SendSync(ctx, m)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				qmu.Lock()
				if queueOf[k] == nil {
					queueOf[k] = map[int]bool{}
				}
				queueOf[k][res.MessageQueue.QueueId] = true
				qmu.Unlock()
			}
			// Spread the 100 steps over ~40 s so that consumption spans
			// the rebalances (the Go client rebalances every 20 s).
			time.Sleep(400 * time.Millisecond)
		}
	}()

	total := len(keys) * steps
	// B gets its queues once A's locks on them expire; restart it only
	// after it consumed some.
	waitFor(t, 60*time.Second, "consumer B consuming", func() bool { return log.consumed("B") >= 10 })
	require.NoError(t, b.Shutdown())
	waitFor(t, 30*time.Second, "consumer B gone", func() bool { return len(srvConsumerIDs(t, srv, group)) == 1 })
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, instance: instB, extra: orderly}, log.handler("B'"))
	<-sent
	waitFor(t, 120*time.Second, "every step of every key", func() bool { return log.firsts() == total })

	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Empty(t, log.violations)
	for _, k := range keys {
		assert.Equal(t, steps-1, log.last[k], "last step of %s", k)
	}
	qmu.Lock()
	for k, qs := range queueOf {
		assert.Len(t, qs, 1, "key %s stays in one queue", k)
	}
	qmu.Unlock()
	assert.Positive(t, log.byConsumer["B'"], "the restarted consumer took queues back")
	t.Logf("first deliveries by consumer %v, redeliveries %d", log.byConsumer, log.dups)
}

// TestGlobalOrderOneQueue consumes a one-queue topic with an orderly
// consumer: messages arrive exactly in send order.
func TestGlobalOrderOneQueue(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Global")
	rawCreateTopic(t, srv, topic, 1)
	var mu sync.Mutex
	var got []string
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("GlobalCG"), extra: []consumer.Option{consumer.WithConsumerOrder(true)}},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				got = append(got, string(m.Body))
			}
			mu.Unlock()
			return consumer.ConsumeSuccess, nil
		})
	p := newProducer(t, srv.Namesrv)
	const n = 200
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
		res := sendSync(t, p, newMsg(topic, want[i]))
		require.Equal(t, 0, res.MessageQueue.QueueId)
	}
	waitFor(t, 60*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, got[:n])
}

// TestBroadcastEachConsumerGetsEverything runs two BROADCASTING consumers
// of one group: each receives every message, and the broker keeps no
// offset for the group even when a pull asks it to commit one.
func TestBroadcastEachConsumerGetsEverything(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Broadcast")
	group := uniq("BcastCG")
	rawCreateTopic(t, srv, topic, 4)
	bcast := []consumer.Option{consumer.WithConsumerModel(consumer.BroadCasting)}
	c1, c2 := newCollector(), newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, extra: bcast}, c1.handle)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, extra: bcast}, c2.handle)
	waitFor(t, 30*time.Second, "both consumers registered", func() bool { return len(srvConsumerIDs(t, srv, group)) == 2 })

	p := newProducer(t, srv.Namesrv)
	const n = 40
	for i := 0; i < n; i++ {
		sendSync(t, p, newMsg(topic, fmt.Sprintf("b-%d", i)))
	}
	c1.waitFor(t, n, 60*time.Second)
	c2.waitFor(t, n, 60*time.Second)
	assert.Equal(t, c1.bodies(), c2.bodies())

	// A pull carrying a commit offset for the broadcasting group is not
	// stored, so the group's broker offsets stay where a new group starts.
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "1", "sysFlag": "5", "commitOffset": "7", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil))
	require.NoError(t, err)
	require.Contains(t, []int32{remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately}, resp.Code, resp.Remark)
	for q, off := range committedOffsets(t, srv, group, topic, 4) {
		assert.LessOrEqual(t, off, int64(0), "queue %d: no broker offset for a broadcasting group", q)
	}
	// The clustering path still stores them.
	cg := uniq("ClusterCG")
	hb, _ := json.Marshal(map[string]any{"clientID": "127.0.0.1@raw", "producerDataSet": []any{},
		"consumerDataSet": []map[string]any{{"groupName": cg, "consumeType": "CONSUME_PASSIVELY", "messageModel": protocol.Clustering,
			"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": []any{}, "unitMode": false}}})
	resp, err = c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.HeartBeat, nil, hb))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	_, err = c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": cg, "topic": topic, "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "1", "sysFlag": "5", "commitOffset": "7", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil))
	require.NoError(t, err)
	assert.Equal(t, int64(7), committedOffsets(t, srv, cg, topic, 1)[0])
}
