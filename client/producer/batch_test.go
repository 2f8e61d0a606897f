package producer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// asyncResults collects SendAsync outcomes by body.
type asyncResults struct {
	mu   sync.Mutex
	wg   sync.WaitGroup
	res  map[string]*client.SendResult
	errs map[string]error
}

func newAsyncResults() *asyncResults {
	return &asyncResults{res: map[string]*client.SendResult{}, errs: map[string]error{}}
}

func (a *asyncResults) send(t *testing.T, p *producer.Producer, m *client.Message) {
	t.Helper()
	a.sendCtx(t, context.Background(), p, m)
}

func (a *asyncResults) sendCtx(t *testing.T, ctx context.Context, p *producer.Producer, m *client.Message) {
	t.Helper()
	body := string(m.Body)
	a.wg.Add(1)
	require.NoError(t, p.SendAsync(ctx, func(_ context.Context, r *client.SendResult, err error) {
		a.mu.Lock()
		a.res[body], a.errs[body] = r, err
		a.mu.Unlock()
		a.wg.Done()
	}, m))
}

func (a *asyncResults) wait(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("callbacks not called within 10s")
	}
}

// TestAutoBatchGathersWhileInFlight: with one request in flight, the
// sends that follow wait and go out together as one SEND_BATCH_MESSAGE
// when it is answered; every message keeps its own UNIQ_KEY, and each
// callback gets its own MsgID, offset message id and queue offset.
func TestAutoBatchGathersWhileInFlight(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success, gate: make(chan struct{})}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns), producer.WithAutoBatchOptions(producer.BatchOptions{MaxInFlight: 1}))
	ar := newAsyncResults()
	ar.send(t, p, client.NewMessage("T", []byte("m0")))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 1 })
	for i := 1; i <= 50; i++ {
		m := client.NewMessage("T", []byte(fmt.Sprint("m", i))).SetTag("TagB").SetKeys(fmt.Sprint("k", i))
		if i == 7 {
			m.SetProperty(message.PropertyUniqKey, "OWN-UNIQ-KEY-7")
		}
		ar.send(t, p, m)
	}
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, b.requests(remoting.SendBatchMessage), "nothing more goes out while one request is in flight")
	b.gate <- struct{}{} // answer m0
	waitUntil(t, func() bool { return len(b.requests(remoting.SendBatchMessage)) == 1 })
	b.gate <- struct{}{} // answer the batch
	ar.wait(t)

	batch := b.requests(remoting.SendBatchMessage)[0]
	assert.Equal(t, "true", batch.Ext("m"))
	items, err := message.DecodeBatch(batch.Body)
	require.NoError(t, err)
	require.Len(t, items, 50)
	first := ar.res["m1"]
	require.NotNil(t, first)
	ids := strings.Split(first.OffsetMsgID, ",")
	require.Len(t, ids, 1, "each message gets its own offset message id")
	seen := map[string]bool{}
	for i, it := range items {
		body := string(it.Body)
		assert.Equal(t, fmt.Sprint("m", i+1), body, "batch keeps the send order")
		require.NoError(t, ar.errs[body])
		r := ar.res[body]
		uniq := it.Properties[message.PropertyUniqKey]
		assert.Equal(t, uniq, r.MsgID, "%s: the callback's MsgID is the stored UNIQ_KEY", body)
		assert.False(t, seen[uniq], "UNIQ_KEY %s twice", uniq)
		seen[uniq] = true
		assert.Equal(t, "TagB", it.Properties[message.PropertyTags])
		assert.Equal(t, fmt.Sprint("k", i+1), it.Properties[message.PropertyKeys])
		assert.Equal(t, first.QueueOffset+int64(i), r.QueueOffset)
		assert.Equal(t, first.Queue, r.Queue)
		assert.NotContains(t, r.OffsetMsgID, ",")
		assert.Equal(t, message.OffsetMsgID(parseAddr(b.addr), (first.QueueOffset+int64(i))*100), r.OffsetMsgID)
	}
	assert.Equal(t, "OWN-UNIQ-KEY-7", ar.res["m7"].MsgID, "a UNIQ_KEY the caller set is kept")
	assert.Len(t, ar.res["m0"].MsgID, 32)
}

// TestAutoBatchLimits: waiting sends are cut into batches of at most
// MaxMessages and MaxBytes.
func TestAutoBatchLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    producer.BatchOptions
		body int
		want []int
	}{
		{"messages", producer.BatchOptions{MaxInFlight: 1, MaxMessages: 8}, 10, []int{8, 8, 8, 6}},
		// each item is about 22 + 500 + UNIQ_KEY bytes: two fit in 1,200
		{"bytes", producer.BatchOptions{MaxInFlight: 1, MaxBytes: 1200}, 500, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBroker{name: "broker-a", code: remoting.Success, gate: make(chan struct{}, 100)}
			fc := newCluster(t, b)
			p := newProducer(t, newClient(t, fc.ns), producer.WithAutoBatchOptions(tc.o))
			ar := newAsyncResults()
			ar.send(t, p, client.NewMessage("T", []byte("first")))
			waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 1 })
			total := 0
			for _, n := range tc.want {
				total += n
			}
			for i := 0; i < total; i++ {
				body := fmt.Sprintf("%0*d", tc.body, i)
				ar.send(t, p, client.NewMessage("T", []byte(body)))
			}
			for i := 0; i <= len(tc.want); i++ {
				b.gate <- struct{}{}
			}
			ar.wait(t)
			var got []int
			for _, r := range b.requests(remoting.SendBatchMessage) {
				items, err := message.DecodeBatch(r.Body)
				require.NoError(t, err)
				got = append(got, len(items))
			}
			assert.Equal(t, tc.want, got)
			for body, err := range ar.errs {
				assert.NoError(t, err, body)
			}
		})
	}
}

// TestAutoBatchLeavesSomeAlone: delayed, keyed, transactional-sized
// (compressed) messages and sends with another selector are never held
// for a batch: they go out at once even while the topic's request is in
// flight, as single SEND_MESSAGE_V2 requests.
func TestAutoBatchLeavesSomeAlone(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success, gate: make(chan struct{}, 100)}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns), producer.WithAutoBatchOptions(producer.BatchOptions{MaxInFlight: 1}))
	ar := newAsyncResults()
	ar.send(t, p, client.NewMessage("T", []byte("first")))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 1 })
	ar.send(t, p, client.NewMessage("T", []byte("delayed")).SetDelayLevel(2))
	ar.send(t, p, client.NewMessage("T", []byte("keyed")).SetShardingKey("order-1"))
	ar.send(t, p, client.NewMessage("T", []byte("timed")).SetDeliverTime(time.Now().Add(time.Minute)))
	ar.send(t, p, client.NewMessage("T", []byte(strings.Repeat("z", 5000))))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 5 })

	other := newProducer(t, newClient(t, fc.ns), producer.WithQueueSelector(producer.SelectorFunc(
		func(_ *client.Message, qs []client.MessageQueue) client.MessageQueue { return qs[len(qs)-1] })))
	ar.send(t, other, client.NewMessage("T", []byte("selected-1")))
	ar.send(t, other, client.NewMessage("T", []byte("selected-2")))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 7 })
	for i := 0; i < 7; i++ {
		b.gate <- struct{}{}
	}
	ar.wait(t)
	assert.Empty(t, b.requests(remoting.SendBatchMessage))
	for body, err := range ar.errs {
		assert.NoError(t, err, body)
	}
}

// TestAutoBatchErrorsReachEveryMessage: a batch the broker refuses fails
// every message of it with the broker's error.
func TestAutoBatchErrorsReachEveryMessage(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.MessageIllegal, gate: make(chan struct{}, 100)}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns), producer.WithAutoBatchOptions(producer.BatchOptions{MaxInFlight: 1}))
	ar := newAsyncResults()
	for i := 0; i < 20; i++ {
		ar.send(t, p, client.NewMessage("T", []byte(fmt.Sprint("e", i))))
	}
	b.gate <- struct{}{}
	b.gate <- struct{}{}
	ar.wait(t)
	require.Len(t, b.requests(remoting.SendBatchMessage), 1)
	for i := 0; i < 20; i++ {
		err := ar.errs[fmt.Sprint("e", i)]
		require.Error(t, err)
		assert.Equal(t, remoting.MessageIllegal, client.CodeOf(err))
		assert.Nil(t, ar.res[fmt.Sprint("e", i)])
	}
}

// TestAutoBatchTimeouts: sends held behind a request that never comes
// back fail with ErrTimeout once the send timeout passes; one whose ctx
// ends while it waits fails with that ctx's error and is never sent.
func TestAutoBatchTimeouts(t *testing.T) {
	b := &fakeBroker{name: "broker-a", hang: true}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns), producer.WithSendTimeout(300*time.Millisecond),
		producer.WithRetryTimesWhenSendAsyncFailed(0), producer.WithAutoBatchOptions(producer.BatchOptions{MaxInFlight: 1}))
	ar := newAsyncResults()
	start := time.Now()
	ar.send(t, p, client.NewMessage("T", []byte("in-flight")))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 1 })
	for i := 0; i < 5; i++ {
		ar.send(t, p, client.NewMessage("T", []byte(fmt.Sprint("held", i))))
	}
	ctx, cancel := context.WithCancel(context.Background())
	ar.sendCtx(t, ctx, p, client.NewMessage("T", []byte("cancelled")))
	cancel()
	ar.wait(t)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.ErrorIs(t, ar.errs["in-flight"], client.ErrTimeout)
	for i := 0; i < 5; i++ {
		assert.ErrorIs(t, ar.errs[fmt.Sprint("held", i)], client.ErrTimeout)
	}
	assert.ErrorIs(t, ar.errs["cancelled"], context.Canceled)
	// The held sends may go out in the moment left before their deadline
	// (it is a little later than the first send's); the cancelled one never.
	for _, r := range b.requests(remoting.SendBatchMessage) {
		items, err := message.DecodeBatch(r.Body)
		require.NoError(t, err)
		for _, it := range items {
			assert.NotEqual(t, "cancelled", string(it.Body))
		}
	}
	for _, r := range b.requests(remoting.SendMessageV2) {
		assert.NotEqual(t, "cancelled", string(r.Body))
	}
}

// TestAutoBatchShutdownWaits: Shutdown returns only once every queued
// send has been answered.
func TestAutoBatchShutdownWaits(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success, gate: make(chan struct{}, 100)}
	fc := newCluster(t, b)
	p, err := producer.New(newClient(t, fc.ns), "PG", producer.WithAutoBatchOptions(producer.BatchOptions{MaxInFlight: 1}))
	require.NoError(t, err)
	ar := newAsyncResults()
	for i := 0; i < 30; i++ {
		ar.send(t, p, client.NewMessage("T", []byte(fmt.Sprint("s", i))))
	}
	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(context.Background()) }()
	select {
	case <-shut:
		t.Fatal("Shutdown returned with sends in flight")
	case <-time.After(100 * time.Millisecond):
	}
	b.gate <- struct{}{}
	b.gate <- struct{}{}
	require.NoError(t, <-shut)
	ar.wait(t)
	assert.Equal(t, 30, b.sentMessages(t))
	_, err = p.SendSync(context.Background(), client.NewMessage("T", []byte("late")))
	assert.ErrorIs(t, err, client.ErrClosed)
}

// TestAutoBatchOff: WithAutoBatch(false) sends every async message on its
// own.
func TestAutoBatchOff(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns), producer.WithAutoBatch(false))
	ar := newAsyncResults()
	for i := 0; i < 200; i++ {
		ar.send(t, p, client.NewMessage("T", []byte(fmt.Sprint("o", i))))
	}
	ar.wait(t)
	assert.Len(t, b.requests(remoting.SendMessageV2), 200)
	assert.Empty(t, b.requests(remoting.SendBatchMessage))
}

// TestAutoBatchBurstBehindOneRequest: with the default two requests in
// flight, sends that follow a first one still in flight are batched by the
// goroutine the caller leaves them to; every one is answered once.
func TestAutoBatchBurstBehindOneRequest(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success, gate: make(chan struct{}, 1000)}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns))
	ar := newAsyncResults()
	ar.send(t, p, client.NewMessage("T", []byte("lead")))
	waitUntil(t, func() bool { return len(b.requests(remoting.SendMessageV2)) == 1 })
	for i := 0; i < 60; i++ {
		ar.send(t, p, client.NewMessage("T", []byte(fmt.Sprint("burst", i))))
	}
	for i := 0; i < 1000; i++ {
		b.gate <- struct{}{}
	}
	ar.wait(t)
	assert.Equal(t, 61, b.sentMessages(t), "each message sent once")
	assert.NotEmpty(t, b.requests(remoting.SendBatchMessage), "the burst went in batches")
	for body, err := range ar.errs {
		assert.NoError(t, err, body)
	}
}

// TestMessageWithoutProperties: a Message literal with no properties map
// is sent alone and in batches, with a UNIQ_KEY.
func TestMessageWithoutProperties(t *testing.T) {
	b := &fakeBroker{name: "broker-a", code: remoting.Success}
	fc := newCluster(t, b)
	p := newProducer(t, newClient(t, fc.ns))
	res, err := p.SendSync(context.Background(), &client.Message{Topic: "T", Body: []byte("plain")})
	require.NoError(t, err)
	assert.Len(t, res.MsgID, 32)
	ar := newAsyncResults()
	for i := 0; i < 100; i++ {
		ar.send(t, p, &client.Message{Topic: "T", Body: []byte(fmt.Sprint("p", i))})
	}
	ar.wait(t)
	for body, err := range ar.errs {
		require.NoError(t, err, body)
		assert.Len(t, ar.res[body].MsgID, 32)
	}
	assert.Equal(t, 101, b.sentMessages(t))
}
