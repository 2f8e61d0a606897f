package mirror_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/mirror"
)

// startMirror runs links in this process until the test ends.
func startMirror(t testing.TB, links ...mirror.Link) *mirror.Service {
	t.Helper()
	s, err := mirror.New(&mirror.Config{Links: links}, mirror.Deps{Dial: transports.Dialer(transports.WithInsecureQUIC())})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx)
		}
	})
	return s
}

func stopMirror(t testing.TB, s *mirror.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Stop(ctx)
}

func fastLink(name string, src, dst *cluster, topics ...string) mirror.Link {
	return mirror.Link{Name: name, Source: mirror.Cluster{Namesrv: []string{src.Namesrv}}, Target: mirror.Cluster{Namesrv: []string{dst.Namesrv}},
		Topics: topics, CheckpointInterval: 100 * time.Millisecond, RefreshInterval: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		CreateTopics: true}
}

type txListener struct{}

func (txListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) producer.LocalTransactionState {
	if m.Property("outcome") == "commit" {
		return producer.Commit
	}
	return producer.Rollback
}

func (txListener) CheckLocalTransaction(context.Context, *client.MessageExt) producer.LocalTransactionState {
	return producer.Rollback
}

// TestMirrorFidelity: what the target stores is the source's message: id,
// keys, tags, properties, born host and time, body, per-queue order; a
// delayed message keeps its due time (not delayed again); only the
// committed transactional message arrives; the origin is recorded.
func TestMirrorFidelity(t *testing.T) {
	src := startCluster(t, "east", false)
	dst := startCluster(t, "west", false)
	src.createTopic("orders", 4)
	_, p := src.producer("fid")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var sent []string
	for i := 0; i < 40; i++ {
		m := client.NewMessage("orders", []byte(fmt.Sprintf("body-%d", i)))
		m.SetKeys(fmt.Sprintf("key-%d", i), "shared")
		m.SetTag(fmt.Sprintf("tag%d", i%3))
		m.SetProperty("user", strconv.Itoa(i))
		// Everything on queue 2: the target queue keeps the order.
		r, err := p.SendWithSelector(ctx, producer.SelectorFunc(func(_ *client.Message, qs []client.MessageQueue) client.MessageQueue {
			return qs[2]
		}), m)
		require.NoError(t, err)
		sent = append(sent, r.MsgID)
	}
	delayed := client.NewMessage("orders", []byte("delayed"))
	delayed.SetDelayLevel(1) // 1s
	dr, err := p.SendSync(ctx, delayed)
	require.NoError(t, err)
	timed := client.NewMessage("orders", []byte("timed"))
	due := time.Now().Add(1500 * time.Millisecond)
	timed.SetDeliverTime(due)
	tr, err := p.SendSync(ctx, timed)
	require.NoError(t, err)

	tcl := newClient(t, src.Namesrv)
	defer tcl.Close()
	tp, err := producer.NewTransactional(tcl, "fid-tx", txListener{})
	require.NoError(t, err)
	defer tp.Shutdown(context.Background())
	commit := client.NewMessage("orders", []byte("committed"))
	commit.SetProperty("outcome", "commit")
	cr, err := tp.SendMessageInTransaction(ctx, commit)
	require.NoError(t, err)
	rollback := client.NewMessage("orders", []byte("rolled back"))
	rollback.SetProperty("outcome", "rollback")
	rr, err := tp.SendMessageInTransaction(ctx, rollback)
	require.NoError(t, err)

	// The delayed and timed messages reach their topic when due.
	waitFor(t, 20*time.Second, "the delayed messages in the source", func() bool { return len(src.readAll("orders")) == 43 })
	srcMsgs := map[string]*client.MessageExt{}
	for _, m := range src.readAll("orders") {
		srcMsgs[m.MsgID] = m
	}
	startMirror(t, fastLink("fid", src, dst, "orders"))
	var got []*client.MessageExt
	waitFor(t, 30*time.Second, "43 messages in the target", func() bool { got = dst.readAll("orders"); return len(got) >= 43 })
	require.Len(t, got, 43)

	byID := map[string]*client.MessageExt{}
	ordered := map[string]bool{}
	for _, id := range sent {
		ordered[id] = true
	}
	var q2 []string
	for _, m := range got {
		byID[m.MsgID] = m
		if m.Queue.QueueID == 2 && ordered[m.MsgID] {
			q2 = append(q2, m.MsgID)
		}
	}
	assert.Equal(t, sent, q2, "source queue 2's order in target queue 2")
	for id, s := range srcMsgs {
		m, ok := byID[id]
		if !assert.True(t, ok, "message %s mirrored", id) {
			continue
		}
		assert.Equal(t, s.Body, m.Body, id)
		assert.Equal(t, s.Tag(), m.Tag(), id)
		assert.Equal(t, s.Keys(), m.Keys(), id)
		assert.Equal(t, s.Property("user"), m.Property("user"), id)
		assert.Equal(t, s.BornHost, m.BornHost, "born host of %s", id)
		assert.Equal(t, s.BornTimestamp.UnixMilli(), m.BornTimestamp.UnixMilli(), "born time of %s", id)
		assert.Equal(t, "east", m.Property(broker.PropertyMirrorOrigin), id)
		for _, k := range []string{broker.PropertyMirrorDedup, broker.PropertyMirrorBornHost, broker.PropertyMirrorBornTS, broker.PropertyMirrorDelay} {
			assert.Empty(t, m.Property(k), "%s of %s", k, id)
		}
	}
	_, ok := byID[cr.MsgID]
	assert.True(t, ok, "the committed transactional message is mirrored")
	_, ok = byID[rr.MsgID]
	assert.False(t, ok, "the rolled-back transactional message is not")
	// Due times: the target stored them at once (the mirror ran after
	// they were due), with their level and due time kept.
	d := byID[dr.MsgID]
	require.NotNil(t, d)
	assert.Equal(t, "1", d.Property(message.PropertyDelayTimeLevel))
	assert.NotEmpty(t, d.Property(message.PropertyTimerDeliverMS))
	tm := byID[tr.MsgID]
	require.NotNil(t, tm)
	assert.Equal(t, strconv.FormatInt(due.UnixMilli(), 10), tm.Property(message.PropertyTimerDeliverMS))
}
