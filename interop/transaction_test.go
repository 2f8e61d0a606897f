package interop

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// txSets make the check-back quick: half messages older than 1 s are
// checked every second.
var txSets = []string{"transaction.check_interval=1s", "transaction.timeout=1s", "transaction.check_max=100"}

// txListener decides local transactions with functions of the message
// body and counts check-backs per body.
type txListener struct {
	exec  func(body string) primitive.LocalTransactionState
	check func(body string) primitive.LocalTransactionState

	mu     sync.Mutex
	checks map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	return l.exec(string(m.Body))
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	if l.checks == nil {
		l.checks = map[string]int{}
	}
	l.checks[string(m.Body)]++
	l.mu.Unlock()
	return l.check(string(m.Body))
}

func (l *txListener) checked(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checks[body]
}

func (l *txListener) checkedBodies() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.checks {
		out = append(out, k)
	}
	return out
}

func state(s primitive.LocalTransactionState) func(string) primitive.LocalTransactionState {
	return func(string) primitive.LocalTransactionState { return s }
}

func newTxProducer(t *testing.T, ns, group, instance string, l *txListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { p.Shutdown() }) })
	return &txProducer{TransactionProducer: p, once: &once}
}

type txProducer struct {
	rocketmq.TransactionProducer
	once *sync.Once
}

func (p *txProducer) Shutdown() error {
	var err error
	p.once.Do(func() { err = p.TransactionProducer.Shutdown() })
	return err
}

func sendTx(t *testing.T, p rocketmq.TransactionProducer, topic, body string) *primitive.TransactionSendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := p.SendMessageInTransaction(ctx, primitive.NewMessage(topic, []byte(body)))
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status, "send result %v", res)
	return res
}

// deliveries counts every delivery by body.
type deliveries struct {
	mu sync.Mutex
	n  map[string]int
	m  map[string]*primitive.MessageExt
}

func newDeliveries() *deliveries {
	return &deliveries{n: map[string]int{}, m: map[string]*primitive.MessageExt{}}
}

func (d *deliveries) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		d.n[string(m.Body)]++
		d.m[string(m.Body)] = m
	}
	return consumer.ConsumeSuccess, nil
}

func (d *deliveries) count(body string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[body]
}

func (d *deliveries) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.n))
	for k, v := range d.n {
		out[k] = v
	}
	return out
}

func (d *deliveries) get(body string) *primitive.MessageExt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[body]
}

// waitFor polls until cond holds or fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTransactionCommitRollbackUnknown runs the three local-transaction
// outcomes through the official transactional producer: committed
// messages are delivered once, rolled-back ones never, and unknown ones
// after the broker checks back and the producer answers commit.
func TestTransactionCommitRollbackUnknown(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: txSets})
	topic := uniq("TxTopic")
	group := uniq("TxPG")
	l := &txListener{
		exec: func(body string) primitive.LocalTransactionState {
			switch {
			case strings.HasPrefix(body, "commit"):
				return primitive.CommitMessageState
			case strings.HasPrefix(body, "rollback"):
				return primitive.RollbackMessageState
			}
			return primitive.UnkonwnState
		},
		check: func(body string) primitive.LocalTransactionState {
			if strings.HasPrefix(body, "unknown") {
				return primitive.CommitMessageState
			}
			return primitive.RollbackMessageState
		},
	}
	p := newTxProducer(t, srv.Namesrv, group, uniq("txi"), l)
	var want []string
	for i := 0; i < 5; i++ {
		for _, kind := range []string{"commit", "rollback", "unknown"} {
			body := kind + "-" + strconv.Itoa(i)
			res := sendTx(t, p, topic, body)
			assert.Len(t, res.OffsetMsgID, 32)
			if kind != "rollback" {
				want = append(want, body)
			}
		}
	}
	d := newDeliveries()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("TxCG")}, d.handle)
	waitFor(t, 60*time.Second, "committed and checked-back messages", func() bool {
		for _, b := range want {
			if d.count(b) == 0 {
				return false
			}
		}
		return true
	})
	// Give stray deliveries (rollbacks, duplicates) time to show up.
	time.Sleep(3 * time.Second)
	got := d.snapshot()
	for _, b := range want {
		assert.Equal(t, 1, got[b], "deliveries of %s", b)
	}
	for b := range got {
		assert.False(t, strings.HasPrefix(b, "rollback"), "rolled back message %s delivered", b)
	}
	assert.Len(t, got, len(want))
	for i := 0; i < 5; i++ {
		assert.GreaterOrEqual(t, l.checked("unknown-"+strconv.Itoa(i)), 1, "unknown-%d checked back", i)
	}
	for _, b := range l.checkedBodies() {
		assert.True(t, strings.HasPrefix(b, "unknown"), "decided message %s checked back", b)
	}
	m := d.get("commit-0")
	require.NotNil(t, m)
	assert.Equal(t, topic, m.Topic)
	assert.Empty(t, m.GetProperty(message.PropertyTransactionPrepared))
	assert.Empty(t, m.GetProperty(message.PropertyRealTopic))
	assert.Equal(t, group, m.GetProperty(message.PropertyProducerGroup))

	// The half topic cannot be consumed.
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": uniq("Snoop"), "topic": protocol.TransHalfTopic, "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil))
	require.NoError(t, err)
	assert.NotEqual(t, remoting.Success, resp.Code, "pull of the half topic refused: %s", resp.Remark)
}

// TestTransactionCheckAnsweredByAnotherInstance leaves a transaction
// unknown and shuts its producer down; a second instance of the same
// producer group answers the check-back and commits it.
func TestTransactionCheckAnsweredByAnotherInstance(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: txSets})
	topic := uniq("TxOrphan")
	group := uniq("TxPG")
	first := &txListener{exec: state(primitive.UnkonwnState), check: state(primitive.UnkonwnState)}
	p1 := newTxProducer(t, srv.Namesrv, group, uniq("txfirst"), first)
	sendTx(t, p1, topic, "orphan")
	require.NoError(t, p1.Shutdown())

	d := newDeliveries()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("TxCG")}, d.handle)

	second := &txListener{exec: state(primitive.CommitMessageState), check: state(primitive.CommitMessageState)}
	p2 := newTxProducer(t, srv.Namesrv, group, uniq("txsecond"), second)
	// A first send teaches the new instance the broker's address, so its
	// heartbeat (1 s after start) registers it there.
	sendTx(t, p2, topic, "warm-up")
	waitFor(t, 60*time.Second, "the orphan committed by the second instance", func() bool { return d.count("orphan") > 0 })
	assert.GreaterOrEqual(t, second.checked("orphan"), 1)
	waitFor(t, 30*time.Second, "the warm-up message", func() bool { return d.count("warm-up") > 0 })
	time.Sleep(2 * time.Second)
	assert.Equal(t, 1, d.count("orphan"))
	assert.Equal(t, 1, d.count("warm-up"))
}

// TestTransactionSurvivesBrokerRestart sends a half message left unknown,
// restarts the broker, and shows the check-back after the restart commits
// it, once.
func TestTransactionSurvivesBrokerRestart(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: txSets})
	topic := uniq("TxRestart")
	var restarted atomic.Bool
	l := &txListener{exec: state(primitive.UnkonwnState), check: func(string) primitive.LocalTransactionState {
		if restarted.Load() {
			return primitive.CommitMessageState
		}
		return primitive.UnkonwnState
	}}
	p := newTxProducer(t, srv.Namesrv, uniq("TxPG"), uniq("txi"), l)
	sendTx(t, p, topic, "survivor")
	waitFor(t, 30*time.Second, "a check-back before the restart", func() bool { return l.checked("survivor") > 0 })
	before := l.checked("survivor")

	srv.Restart()
	restarted.Store(true)

	d := newDeliveries()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("TxCG")}, d.handle)
	// The producer re-registers with its next heartbeat (every 30 s).
	waitFor(t, 90*time.Second, "the half message committed after the restart", func() bool { return d.count("survivor") > 0 })
	assert.Greater(t, l.checked("survivor"), before, "checked back again after the restart")
	time.Sleep(3 * time.Second)
	assert.Equal(t, 1, d.count("survivor"))
}

// rawCreateTopic creates topic on the broker with UPDATE_AND_CREATE_TOPIC
// and waits until the name server routes it.
func rawCreateTopic(t *testing.T, srv *testserver.Proc, topic string, queues int) {
	t.Helper()
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n := strconv.Itoa(queues)
	resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "defaultTopic", "readQueueNums": n, "writeQueueNums": n,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	waitFor(t, 30*time.Second, "route of "+topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, srv.Namesrv, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		if err != nil || resp.Code != remoting.Success {
			return false
		}
		var rd struct {
			QueueDatas []struct {
				WriteQueueNums int `json:"writeQueueNums"`
			} `json:"queueDatas"`
		}
		return json.Unmarshal(resp.Body, &rd) == nil && len(rd.QueueDatas) == 1 && rd.QueueDatas[0].WriteQueueNums == queues
	})
}

// TestDuplicateEndTransactionDeliversOnce sends a half message and several
// END_TRANSACTIONs for it with raw remoting: every one is answered, the
// message is delivered once.
func TestDuplicateEndTransactionDeliversOnce(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("TxDup")
	group := uniq("TxPG")
	rawCreateTopic(t, srv, topic, 4)
	d := newDeliveries()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("TxCG")}, d.handle)

	c := rawClient(t)
	invoke := func(req *remoting.Command) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, srv.Broker, req)
		require.NoError(t, err)
		return resp
	}
	props := message.Properties{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: group,
		message.PropertyUniqKey: "DUP-UNIQ-1",
	}
	resp := invoke(remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": group, "topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": strconv.Itoa(int(message.TransactionPrepared)),
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "false",
	}, []byte("dup-body")))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "1", resp.Ext("queueId"), "the real queue, as Java answers")
	assert.Equal(t, "0", resp.Ext("queueOffset"), "the offset in the half queue")
	_, clo, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	end := func(typ int32, fromCheck bool) *remoting.Command {
		return remoting.NewRequest(remoting.EndTransaction, map[string]string{
			"producerGroup": group, "tranStateTableOffset": resp.Ext("queueOffset"),
			"commitLogOffset": strconv.FormatInt(clo, 10), "commitOrRollback": strconv.Itoa(int(typ)),
			"fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": "DUP-UNIQ-1", "transactionId": "", "bname": "broker-a",
		}, nil)
	}
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, 0, d.count("dup-body"), "a half message is not delivered")

	first := invoke(end(message.TransactionCommit, false))
	require.Equal(t, remoting.Success, first.Code, first.Remark)
	second := invoke(end(message.TransactionCommit, false))
	assert.Equal(t, remoting.Success, second.Code, second.Remark)
	assert.Equal(t, "transaction already decided", second.Remark)
	// Concurrent repeats, a late check answer and a contradicting rollback.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := invoke(end(message.TransactionCommit, i%2 == 0))
			assert.Equal(t, remoting.Success, r.Code, r.Remark)
		}(i)
	}
	wg.Wait()
	assert.Equal(t, remoting.Success, invoke(end(message.TransactionRollback, true)).Code)

	waitFor(t, 30*time.Second, "the committed message", func() bool { return d.count("dup-body") > 0 })
	time.Sleep(3 * time.Second)
	assert.Equal(t, 1, d.count("dup-body"), "one delivery")
	m := d.get("dup-body")
	assert.Equal(t, int32(1), int32(m.Queue.QueueId), "committed to its real queue")
}
