package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
)

// TestAdmin creates, lists, routes and deletes a topic, and reads a
// group's progress and members.
func TestAdmin(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a := e.admin(t)
		topic, group := uniq("Admin"), uniq("CG")
		require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 3, WriteQueueNums: 3}))
		waitFor(t, 10*time.Second, func() bool {
			ts, err := a.Topics(ctx)
			return err == nil && slices.Contains(ts, topic)
		}, "topic in list")
		r, err := a.Route(ctx, topic)
		require.NoError(t, err)
		assert.Len(t, r.Publish, 3)
		assert.Len(t, r.Subscribe, 3)
		ci, err := a.ClusterInfo(ctx)
		require.NoError(t, err)
		assert.NotEmpty(t, ci.Brokers)

		p := e.producer(t)
		for i := 0; i < 9; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("a-%d", i)))
		}
		col := newCollector()
		pc := e.push(t, topic, pushOpts{group: group, opts: []consumer.Option{consumer.WithPersistInterval(100 * time.Millisecond)}}, col.handle)
		col.wait(t, 9, 30*time.Second)
		waitFor(t, 10*time.Second, func() bool {
			prog, err := a.ConsumerProgress(ctx, group, topic)
			if err != nil || len(prog) != 3 {
				return false
			}
			var lag, total int64
			for _, q := range prog {
				lag += q.Lag
				total += q.BrokerOffset
			}
			return lag == 0 && total == 9
		}, "lag 0 over 9 messages")
		ids, err := a.ConsumerIDs(ctx, group)
		require.NoError(t, err)
		assert.Len(t, ids, 1)
		_ = pc

		require.NoError(t, a.DeleteTopic(ctx, topic))
		waitFor(t, 10*time.Second, func() bool {
			ts, err := a.Topics(ctx)
			return err == nil && !slices.Contains(ts, topic)
		}, "topic gone from list")
		_, err = a.Route(ctx, topic)
		assert.ErrorIs(t, err, client.ErrNoRoute)
	})
}

// TestPullConsumer reads queues at offsets the caller chooses, commits
// them, and polls a subscription.
func TestPullConsumer(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, group := uniq("Pull"), uniq("CG")
	e.createTopic(t, topic, 1)
	p := e.producer(t)
	for i := 0; i < 10; i++ {
		sendSync(t, p, msg(topic, fmt.Sprintf("p-%d", i)).SetTag([]string{"x", "y"}[i%2]))
	}
	pc, err := consumer.NewPull(e.client(t), group)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(context.Background())
	qs, err := pc.Queues(ctx, topic)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	mq := qs[0]
	maxOff, err := pc.MaxOffset(ctx, mq)
	require.NoError(t, err)
	assert.Equal(t, int64(10), maxOff)

	res, err := pc.Pull(context.Background(), mq, consumer.All(), 3, 4)
	require.NoError(t, err)
	require.Equal(t, consumer.Found, res.Status)
	require.Len(t, res.Messages, 4)
	assert.Equal(t, "p-3", string(res.Messages[0].Body))
	assert.Equal(t, int64(7), res.NextBeginOffset)

	res, err = pc.Pull(context.Background(), mq, consumer.Tags("x"), 0, 32)
	require.NoError(t, err)
	for _, m := range res.Messages {
		assert.Equal(t, "x", m.Tag())
	}
	assert.Len(t, res.Messages, 5)

	res, err = pc.Pull(context.Background(), mq, consumer.All(), 10, 32)
	require.NoError(t, err)
	assert.Equal(t, consumer.NoNewMsg, res.Status)
	res, err = pc.Pull(context.Background(), mq, consumer.All(), 50, 32)
	require.NoError(t, err)
	assert.Equal(t, consumer.OffsetIllegal, res.Status)
	assert.Equal(t, int64(10), res.NextBeginOffset)

	// Long poll: a message sent while the pull waits wakes it.
	go func() {
		time.Sleep(300 * time.Millisecond)
		p.SendSync(context.Background(), msg(topic, "late"))
	}()
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	start := time.Now()
	res, err = pc.Pull(lctx, mq, consumer.All(), 10, 32)
	lcancel()
	require.NoError(t, err)
	require.Equal(t, consumer.Found, res.Status)
	assert.Equal(t, "late", string(res.Messages[0].Body))
	assert.Less(t, time.Since(start), 8*time.Second)

	require.NoError(t, pc.CommitOffset(ctx, mq, 6))
	off, err := pc.CommittedOffset(ctx, mq)
	require.NoError(t, err)
	assert.Equal(t, int64(6), off)

	// Poll continues from the committed offset (pc leaves the group so
	// the poller is allocated the queue).
	require.NoError(t, pc.Shutdown(ctx))
	pl, err := consumer.NewPull(e.client(t), group)
	require.NoError(t, err)
	require.NoError(t, pl.Subscribe(topic, consumer.All()))
	require.NoError(t, pl.Start(ctx))
	var got []string
	for len(got) < 5 {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := pl.Poll(pctx)
		pcancel()
		require.NoError(t, err)
		require.NotEmpty(t, msgs, "poll returned nothing; have %v", got)
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
	}
	assert.Equal(t, []string{"p-6", "p-7", "p-8", "p-9", "late"}, got)
	pl.Commit(ctx)
	off, err = pl.CommittedOffset(ctx, mq)
	require.NoError(t, err)
	assert.Equal(t, int64(11), off)
	require.NoError(t, pl.Shutdown(context.Background()))
}

// TestResetOffset rewinds a running consumer's group with admin
// ResetOffset: the broker sends RESET_CONSUMER_CLIENT_OFFSET and the
// consumer receives everything again.
func TestResetOffset(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic, group := uniq("Reset"), uniq("CG")
		e.createTopic(t, topic, 2)
		p := e.producer(t)
		for i := 0; i < 10; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("x-%d", i)))
		}
		var n atomic.Int64
		e.push(t, topic, pushOpts{group: group}, func(context.Context, []*client.MessageExt) consumer.Result {
			n.Add(1)
			return consumer.ConsumeSuccess
		})
		waitFor(t, 30*time.Second, func() bool { return n.Load() >= 10 }, "first pass")
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tbl, err := e.admin(t).ResetOffset(ctx, group, topic, time.UnixMilli(0), true)
		require.NoError(t, err)
		for mq, off := range tbl {
			assert.Equal(t, int64(0), off, mq.String())
		}
		waitFor(t, 30*time.Second, func() bool { return n.Load() >= 20 }, "second pass after reset (have %d)", n.Load())
	})
}

type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) producer.LocalTransactionState {
	switch {
	case strings.HasPrefix(string(m.Body), "commit"):
		return producer.Commit
	case strings.HasPrefix(string(m.Body), "rollback"):
		return producer.Rollback
	}
	return producer.Unknown
}

func (l *txListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) producer.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	if strings.HasPrefix(string(m.Body), "unknown-commit") {
		return producer.Commit
	}
	return producer.Rollback
}

// TestTransaction commits, rolls back, and leaves two outcomes unknown
// for the broker's check-back to settle.
func TestTransaction(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		sets := []string{"transaction.timeout=500ms", "transaction.check_interval=500ms"}
		if !configAccepts(t, sets...) {
			t.Skip("no transaction module composed into mq dev (transaction.* keys are refused)")
		}
		e := startEnv(t, s, sets...)
		topic := uniq("Tx")
		e.createTopic(t, topic, 2)
		col := newCollector()
		e.push(t, topic, pushOpts{group: uniq("CG")}, col.handle)
		l := &txListener{checked: map[string]int{}}
		tp, err := producer.NewTransactional(e.client(t), uniq("TPG"), l)
		require.NoError(t, err)
		defer tp.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, b := range []string{"commit-1", "rollback-1", "unknown-commit-1", "unknown-rollback-1"} {
			res, err := tp.SendMessageInTransaction(ctx, msg(topic, b))
			require.NoError(t, err)
			assert.Equal(t, client.SendOK, res.Status)
			assert.Len(t, res.OffsetMsgID, 32)
		}
		waitFor(t, 30*time.Second, func() bool { return col.count() >= 2 }, "2 messages (have %v, checks %v)", col.bodies(), l.snapshot())
		waitFor(t, 10*time.Second, func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.checked["unknown-rollback-1"] > 0
		}, "check of the undecided rollback")
		time.Sleep(time.Second)
		assert.Equal(t, []string{"commit-1", "unknown-commit-1"}, col.bodies())
		l.mu.Lock()
		assert.Zero(t, l.checked["commit-1"], "a committed message was checked")
		assert.Positive(t, l.checked["unknown-commit-1"])
		l.mu.Unlock()
	})
}

func (l *txListener) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.checked {
		out[k] = v
	}
	return out
}

// TestPullOffsetMoved: a group whose committed offset lies beyond the
// queue's end gets PULL_OFFSET_MOVED; the consumer drops the queue,
// takes the broker's offset and resumes with the next message.
func TestPullOffsetMoved(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, group := uniq("Moved"), uniq("CG")
	e.createTopic(t, topic, 1)
	p := e.producer(t)
	for i := 0; i < 3; i++ {
		sendSync(t, p, msg(topic, fmt.Sprintf("old-%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pl, err := consumer.NewPull(e.client(t), group)
	require.NoError(t, err)
	require.NoError(t, pl.Start(ctx))
	qs, err := pl.Queues(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, pl.CommitOffset(ctx, qs[0], 1000))
	require.NoError(t, pl.Shutdown(ctx))

	col := newCollector()
	pc := e.push(t, topic, pushOpts{group: group, opts: []consumer.Option{consumer.WithOffsetMovedDelay(200 * time.Millisecond), consumer.WithRebalanceInterval(time.Second)}}, col.handle)
	waitFor(t, 20*time.Second, func() bool {
		st, ok := pc.Stats()[qs[0]]
		return ok && st.Offset == 3
	}, "offset corrected to 3 (stats %v)", pc.Stats())
	sendSync(t, p, msg(topic, "new"))
	col.wait(t, 1, 20*time.Second)
	assert.Equal(t, []string{"new"}, col.bodies())
}
