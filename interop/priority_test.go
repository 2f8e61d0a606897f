package interop

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// prioBacklog is the low-priority backlog of the priority tests.
const prioBacklog = 10000

// createPriorityTopic makes topic a PRIORITY topic of queues levels, as
// `mqadmin updateTopic -a +message.type=PRIORITY` does.
func createPriorityTopic(t *testing.T, srv *testserver.Proc, topic string, queues int) {
	t.Helper()
	n := strconv.Itoa(queues)
	resp, err := invoke(rawClient(t), srv.Broker, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": n, "writeQueueNums": n, "perm": "6", "topicFilterType": "SINGLE_TAG",
		"attributes": "+message.type=PRIORITY",
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// prioMsg is a message of priority p, set as RocketMQ 5.4 reads it from
// 4.x clients.
func prioMsg(topic, body string, p int) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body))
	m.WithProperty(message.PropertyPriority, strconv.Itoa(p))
	return m
}

// sendLowBacklog sends prioBacklog messages of priority 0 from 8
// producers' goroutines.
func sendLowBacklog(t *testing.T, srv *testserver.Proc, topic string) {
	t.Helper()
	p := newProducer(t, srv.Namesrv)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < prioBacklog; i += 8 {
				var res *primitive.SendResult
				var err error
				for try := 0; try < 50; try++ { // a fresh producer may not have the route yet
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					res, err = p.SendSync(ctx, prioMsg(topic, fmt.Sprintf("low-%d", i), 0))
					cancel()
					if err == nil || !strings.Contains(err.Error(), "route info not found") {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err == nil && res.MessageQueue.QueueId != 0 {
					err = fmt.Errorf("low-%d stored in queue %d, not 0", i, res.MessageQueue.QueueId)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// prioArrivals records the order in which a push consumer's listener sees
// messages.
type prioArrivals struct {
	mu    sync.Mutex
	order []string
	ch    chan struct{}
	delay time.Duration
}

func newPrioArrivals(delay time.Duration) *prioArrivals {
	return &prioArrivals{ch: make(chan struct{}, 1), delay: delay}
}

func (a *prioArrivals) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	a.mu.Lock()
	for _, m := range msgs {
		a.order = append(a.order, string(m.Body))
	}
	a.mu.Unlock()
	select {
	case a.ch <- struct{}{}:
	default:
	}
	time.Sleep(a.delay) // a consumer slower than the backlog: it piles up
	return consumer.ConsumeSuccess, nil
}

func (a *prioArrivals) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.order...)
}

// waitBody waits until body arrived and returns the arrival order then.
func (a *prioArrivals) waitBody(t *testing.T, body string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		got := a.snapshot()
		for _, b := range got {
			if b == body {
				return got
			}
		}
		select {
		case <-a.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s did not arrive within %s (%d others did)", body, timeout, len(got))
		}
	}
}

func prioIndex(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// TestPriorityGo4xPushConsumer: the official Go 4.x client's push
// consumer on a PRIORITY topic (priority set with the _SYS_MSG_PRIORITY_
// property). A backlog of 10,000 low messages, then one high: a consumer
// started afterwards gets the high one first. While it works through the
// backlog a second high one overtakes every low message but the few the
// client had already pulled into its cache (one pull of one message per
// queue here: the client's cache is not reordered). A high one sent
// while no consumer runs, with the broker then killed (SIGKILL) and
// started again, still comes first.
func TestPriorityGo4xPushConsumer(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic, group := uniq("PrioT"), uniq("PrioG")
	createPriorityTopic(t, srv, topic, 4)
	awaitRoute(t, srv.Namesrv, topic)
	sendLowBacklog(t, srv, topic)
	p := newProducer(t, srv.Namesrv)
	res := sendSync(t, p, prioMsg(topic, "high-1", 3))
	require.Equal(t, 3, res.MessageQueue.QueueId)

	start := func() (*prioArrivals, func()) {
		a := newPrioArrivals(time.Millisecond)
		c := newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, extra: []consumer.Option{
			consumer.WithConsumeGoroutineNums(1), consumer.WithPullBatchSize(1), consumer.WithPullThresholdForQueue(1),
		}}, a.handle)
		return a, func() { _ = c.Shutdown() }
	}
	a, stop := start()
	got := a.waitBody(t, "high-1", time.Minute)
	// As after the restart below: the broker hands no low message before
	// high-1, but the client consumes each queue's answer on its own
	// goroutine, so a low answer written right after high-1's can reach
	// the listener first now and then (make test saw [low-7 high-1] once
	// in two runs): at most that one.
	first := got[:prioIndex(got, "high-1")]
	require.LessOrEqual(t, len(slicesFilter(first, "low-")), 1, "first arrivals: %v", got[:min(len(got), 5)])

	// Live: some backlog consumed, then a second high one.
	for len(a.snapshot()) < 200 {
		select {
		case <-a.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d messages in 30s", len(a.snapshot()))
		}
	}
	sent := len(a.snapshot())
	sendSync(t, p, prioMsg(topic, "high-2", 2))
	got = a.waitBody(t, "high-2", time.Minute)
	overtaken := prioIndex(got, "high-2") - sent
	t.Logf("low messages received after high-2 was stored and before it: %d", overtaken)
	require.LessOrEqual(t, overtaken, 4, "only what the client had pulled already may come first")
	stop()

	// Restart: a high one stored while nobody consumes, the broker killed
	// and started again; a new consumer of the group gets it first.
	sendSync(t, p, prioMsg(topic, "high-3", 1))
	srv.Kill()
	srv.Start()
	a, stop = start()
	defer stop()
	got = a.waitBody(t, "high-3", time.Minute)
	// The kill may lose the last committed offsets of the high queues
	// (they are flushed every few seconds): high-1 and high-2 may come
	// again, first too. The broker hands no low message before high-3;
	// but the client consumes each queue's answers on its own goroutine,
	// so a low answer written right after high-3's can, now and then,
	// reach the listener first: at most that one (one message a pull).
	before := got[:prioIndex(got, "high-3")]
	require.LessOrEqual(t, len(slicesFilter(before, "low-")), 1, "first arrivals after the restart: %v", before)
}

// TestPriorityGo4xHoldsOtherConsumers: strict priority is the broker's,
// not one client's. Consumer B of a group owns the high queue, consumer A
// the low ones. B pauses (its client's Suspend: it stops pulling) and
// five high messages arrive: while they wait for B, the broker hands A no
// further low message (only what A had pulled already arrives), instead
// of A working through its backlog past them. Once B pulls again and has
// the high ones, A goes on.
func TestPriorityGo4xHoldsOtherConsumers(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic, group := uniq("PrioT"), uniq("PrioG")
	createPriorityTopic(t, srv, topic, 4)
	awaitRoute(t, srv.Namesrv, topic)
	sendLowBacklog(t, srv, topic)

	// B gets queue 3, A the rest, whoever is online.
	split := func(_, cid string, mqs []*primitive.MessageQueue, _ []string) []*primitive.MessageQueue {
		var out []*primitive.MessageQueue
		for _, q := range mqs {
			if (q.QueueId == 3) == strings.HasSuffix(cid, "B") {
				out = append(out, q)
			}
		}
		return out
	}
	small := []consumer.Option{consumer.WithStrategy(split), consumer.WithConsumeGoroutineNums(1),
		consumer.WithPullBatchSize(1), consumer.WithPullThresholdForQueue(1)}
	b := newPrioArrivals(0)
	cb := newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, instance: uniq("prio") + "B", extra: small}, b.handle)
	a := newPrioArrivals(time.Millisecond)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group, instance: uniq("prio") + "A", extra: small}, a.handle)
	for len(a.snapshot()) < 300 {
		select {
		case <-a.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("A received only %d messages in 30s", len(a.snapshot()))
		}
	}
	cb.Suspend()
	p := newProducer(t, srv.Namesrv)
	for i := range 5 {
		sendSync(t, p, prioMsg(topic, fmt.Sprintf("high-%d", i), 3))
	}
	atSend := len(a.snapshot())
	// What A had pulled before the high ones were stored still arrives
	// (its client's cache); after that, nothing: A, fast, would take
	// about 750 low messages in the 1.5 s measured.
	time.Sleep(500 * time.Millisecond)
	settled := len(a.snapshot())
	time.Sleep(1500 * time.Millisecond)
	during := len(a.snapshot()) - settled
	t.Logf("low messages A received while high ones waited for B: %d in the first 0.5 s (its cache), %d in the next 1.5 s (B had %d)",
		settled-atSend, during, len(b.snapshot()))
	require.LessOrEqual(t, during, 2, "A is held back while the high queue waits for B")

	cb.Resume()
	b.waitBody(t, "high-4", time.Minute)
	require.Empty(t, slicesFilter(b.snapshot(), "low-"), "B owns the high queue only")
	deadline := time.Now().Add(30 * time.Second)
	for len(a.snapshot()) < settled+during+50 && time.Now().Before(deadline) {
		select {
		case <-a.ch:
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.GreaterOrEqual(t, len(a.snapshot()), settled+during+50, "A goes on once the high queue is handed out")
}

// slicesFilter returns the items of list with prefix.
func slicesFilter(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			out = append(out, s)
		}
	}
	return out
}
