package producer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, ns string) *client.Client {
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newProducer(t *testing.T, c *client.Client, opts ...producer.Option) *producer.Producer {
	p, err := producer.New(c, "PG", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// TestRetryOnAnotherBrokerWhenBusy: broker-a answers SYSTEM_BUSY; every
// sync and async send still succeeds on broker-b, and latency-fault
// avoidance keeps broker-a out of the rotation after its first refusal.
func TestRetryOnAnotherBrokerWhenBusy(t *testing.T) {
	busy := &fakeBroker{name: "broker-a", code: remoting.SystemBusy}
	ok := &fakeBroker{name: "broker-b", code: remoting.Success}
	fc := newCluster(t, busy, ok)
	p := newProducer(t, newClient(t, fc.ns))
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		res, err := p.SendSync(ctx, client.NewMessage("T", []byte("x")))
		require.NoError(t, err)
		assert.Equal(t, "broker-b", res.Queue.BrokerName)
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		require.NoError(t, p.SendAsync(ctx, func(_ context.Context, r *client.SendResult, err error) {
			defer wg.Done()
			if assert.NoError(t, err) {
				assert.Equal(t, "broker-b", r.Queue.BrokerName)
			}
		}, client.NewMessage("T", []byte("y"))))
	}
	wg.Wait()
	assert.LessOrEqual(t, len(busy.requests(remoting.SendMessageV2))+len(busy.requests(remoting.SendBatchMessage)), 1, "busy broker kept in rotation")
	assert.Equal(t, 30, ok.sentMessages(t))
}

// TestBusyWithoutRetry: with no retries and no fault avoidance the busy
// answer reaches the caller as a BrokerError with code 2.
func TestBusyWithoutRetry(t *testing.T) {
	busy := &fakeBroker{name: "broker-a", code: remoting.SystemBusy}
	fc := newCluster(t, busy)
	p := newProducer(t, newClient(t, fc.ns), producer.WithRetryTimesWhenSendFailed(0), producer.WithLatencyFaultAvoidance(false, 0))
	_, err := p.SendSync(context.Background(), client.NewMessage("T", []byte("x")))
	require.Error(t, err)
	assert.Equal(t, remoting.SystemBusy, client.CodeOf(err))
	var be *client.BrokerError
	assert.True(t, errors.As(err, &be))
	assert.Len(t, busy.requests(remoting.SendMessageV2), 1)
}

// TestRetriesStayWithinBudget: the busy-only cluster gets 1+2 attempts.
func TestRetriesStayWithinBudget(t *testing.T) {
	a := &fakeBroker{name: "broker-a", code: remoting.SystemBusy}
	b := &fakeBroker{name: "broker-b", code: remoting.SystemBusy}
	fc := newCluster(t, a, b)
	p := newProducer(t, newClient(t, fc.ns))
	_, err := p.SendSync(context.Background(), client.NewMessage("T", []byte("x")))
	require.Error(t, err)
	assert.Equal(t, 3, len(a.requests(remoting.SendMessageV2))+len(b.requests(remoting.SendMessageV2)))
	require.NoError(t, p.SendOneway(context.Background(), client.NewMessage("T", []byte("x"))))
	waitUntil(t, func() bool {
		return len(a.requests(remoting.SendMessageV2))+len(b.requests(remoting.SendMessageV2)) == 4
	})
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 4, len(a.requests(remoting.SendMessageV2))+len(b.requests(remoting.SendMessageV2)), "oneway retried")
}

// TestSendTimeout: a broker that never answers fails the send with
// ErrTimeout once the send timeout passes.
func TestSendTimeout(t *testing.T) {
	h := &fakeBroker{name: "broker-a", hang: true}
	fc := newCluster(t, h)
	p := newProducer(t, newClient(t, fc.ns), producer.WithSendTimeout(300*time.Millisecond))
	start := time.Now()
	_, err := p.SendSync(context.Background(), client.NewMessage("T", []byte("x")))
	require.Error(t, err)
	assert.ErrorIs(t, err, client.ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

// TestWireFormat checks the send request: SEND_MESSAGE_V2 short keys, trailing property
// separator, UNIQ_KEY, compression flag, GO language and version 317,
// and batches (short keys too).
func TestWireFormat(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns))
	ctx := context.Background()
	big := make([]byte, 5000)
	_, err := p.SendSync(ctx, client.NewMessage("T", big).SetTag("TagA"))
	require.NoError(t, err)
	_, err = p.SendSync(ctx, client.NewMessage("T", []byte("a")), client.NewMessage("T", []byte("b")))
	require.NoError(t, err)
	// SEND_MESSAGE_V2, with its one-letter keys, as the Java client sends.
	sends := b.requests(remoting.SendMessageV2)
	require.Len(t, sends, 1)
	r := sends[0]
	assert.Equal(t, "PG", r.Ext("a"))
	assert.Equal(t, "T", r.Ext("b"))
	assert.NotEmpty(t, r.Ext("e"))
	assert.NotEmpty(t, r.Ext("n"))
	assert.Empty(t, r.Ext("producerGroup"))
	assert.Equal(t, "GO", r.Language)
	assert.EqualValues(t, 317, r.Version)
	assert.Zero(t, r.Flag)
	assert.Equal(t, "TBW102", r.Ext("c"))
	assert.Equal(t, "4", r.Ext("d"))
	assert.Equal(t, "1", r.Ext("f"))
	assert.Equal(t, "false", r.Ext("m"))
	props := r.Ext("i")
	assert.Equal(t, byte(message.PropertySeparator), props[len(props)-1])
	pm := message.ParseProperties(props)
	assert.Len(t, pm[message.PropertyUniqKey], 32)
	assert.Equal(t, "TagA", pm[message.PropertyTags])
	inflated, err := message.Inflate(r.Body)
	require.NoError(t, err)
	assert.Equal(t, big, inflated)
	batches := b.requests(remoting.SendBatchMessage)
	require.Len(t, batches, 1)
	assert.Equal(t, "true", batches[0].Ext("m"))
	assert.Equal(t, "", batches[0].Ext("i"))
	items, err := message.DecodeBatch(batches[0].Body)
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, []byte("a"), items[0].Body)
}

func waitUntil(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type listener struct {
	state producer.LocalTransactionState
}

func (l listener) ExecuteLocalTransaction(context.Context, *client.Message) producer.LocalTransactionState {
	return l.state
}
func (l listener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) producer.LocalTransactionState {
	if string(m.Body) == "commit-me" {
		return producer.Commit
	}
	return producer.Rollback
}

// TestTransactionWire: the half message carries TRAN_MSG and PGROUP with
// sysFlag 4, END_TRANSACTION follows with the offsets of the answer, and a
// CHECK_TRANSACTION_STATE from the broker is answered with
// END_TRANSACTION fromTransactionCheck=true on the same connection.
func TestTransactionWire(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success}
	fc := newCluster(t, b)
	c := newClient(t, fc.ns)
	tp, err := producer.NewTransactional(c, "TPG", listener{state: producer.Unknown})
	require.NoError(t, err)
	defer tp.Shutdown(context.Background())
	res, err := tp.SendMessageInTransaction(context.Background(), client.NewMessage("T", []byte("half")))
	require.NoError(t, err)
	assert.Equal(t, producer.Unknown, res.State)
	send := b.requests(remoting.SendMessageV2)[0]
	assert.Equal(t, "4", send.Ext("f"))
	pm := message.ParseProperties(send.Ext("i"))
	assert.Equal(t, "true", pm[message.PropertyTransactionPrepared])
	assert.Equal(t, "TPG", pm[message.PropertyProducerGroup])
	waitUntil(t, func() bool { return len(b.requests(remoting.EndTransaction)) == 1 })
	end := b.requests(remoting.EndTransaction)[0]
	_, off, _ := message.ParseOffsetMsgID(res.OffsetMsgID)
	assert.Equal(t, strconv.FormatInt(off, 10), end.Ext("commitLogOffset"))
	assert.Equal(t, strconv.FormatInt(res.QueueOffset, 10), end.Ext("tranStateTableOffset"))
	assert.Equal(t, "0", end.Ext("commitOrRollback"))
	assert.Equal(t, "false", end.Ext("fromTransactionCheck"))
	assert.Equal(t, res.MsgID, end.Ext("msgId"))
	assert.Zero(t, end.Flag, "END_TRANSACTION is sent with flag 0 like the official client")

	// The broker checks back.
	require.NoError(t, c.SendHeartbeat(context.Background()))
	peer := b.peer()
	require.NotNil(t, peer)
	ext := &message.Ext{Message: message.Message{Topic: "T", Body: []byte("commit-me"),
		Properties: message.Properties{message.PropertyProducerGroup: "TPG", message.PropertyUniqKey: "UNIQ1", message.PropertyTransactionPrepared: "true"}},
		StoreHost: parseAddr(b.addr), BornHost: parseAddr(b.addr)}
	body, err := message.EncodeStored(ext)
	require.NoError(t, err)
	check := remoting.NewRequest(remoting.CheckTransactionState, map[string]string{
		"tranStateTableOffset": "7", "commitLogOffset": "1234", "msgId": "UNIQ1", "transactionId": "UNIQ1", "offsetMsgId": "X"}, body)
	require.NoError(t, peer.InvokeOneway(context.Background(), check))
	waitUntil(t, func() bool { return len(b.requests(remoting.EndTransaction)) == 2 })
	end = b.requests(remoting.EndTransaction)[1]
	assert.Equal(t, "true", end.Ext("fromTransactionCheck"))
	assert.Equal(t, "8", end.Ext("commitOrRollback"))
	assert.Equal(t, "1234", end.Ext("commitLogOffset"))
	assert.Equal(t, "7", end.Ext("tranStateTableOffset"))
	assert.Equal(t, "UNIQ1", end.Ext("msgId"))
	assert.Equal(t, "TPG", end.Ext("producerGroup"))
}
