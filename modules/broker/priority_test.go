package broker

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func (h *harness) priorityTopic(name string, queues int32) {
	h.t.Helper()
	_, err := h.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypePriority}})
	require.NoError(h.t, err)
}

func (h *harness) prioPull(group, topic string, queue int, offset int64) (*remoting.Command, []string) {
	h.t.Helper()
	resp := h.invoke(remoting.PullMessage, pullExt(group, topic, queue, offset, pullSubscription, 0), nil)
	var out []string
	if resp.Code == remoting.Success {
		msgs, err := message.DecodeAll(resp.Body)
		require.NoError(h.t, err)
		for _, m := range msgs {
			out = append(out, string(m.Body))
		}
	}
	return resp, out
}

// TestPrioritySendPlacesByLevel: a 4.x message with _SYS_MSG_PRIORITY_ is
// stored in the queue of its level on a priority topic, whatever queue
// the producer picked; a bad value, or a priority on a delayed message,
// is dropped; other topics keep the producer's queue and the property.
func TestPrioritySendPlacesByLevel(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	h.priorityTopic("PT", 4)
	for _, tt := range []struct {
		props     message.Properties
		wantQueue string
		keeps     bool
	}{
		{message.Properties{message.PropertyPriority: "2"}, "2", true},
		{message.Properties{message.PropertyPriority: "9"}, "3", true},
		{message.Properties{message.PropertyPriority: "0"}, "0", true},
		{message.Properties{message.PropertyPriority: "-1"}, "1", false},
		{message.Properties{message.PropertyPriority: "x"}, "1", false},
		{message.Properties{message.PropertyPriority: "3", message.PropertyDelayTimeLevel: "2"}, "1", false},
	} {
		resp := h.send("PT", 1, "b", tt.props)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		assert.Equal(t, tt.wantQueue, resp.Ext("queueId"), "%v", tt.props)
	}
	_, err := h.b.EnsureTopic(&protocol.TopicConfig{TopicName: "Plain", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
	resp := h.send("Plain", 1, "plain", message.Properties{message.PropertyPriority: "3"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "1", resp.Ext("queueId"))
	pr := h.invoke(remoting.PullMessage, pullExt("G", "Plain", 1, 0, pullSubscription, 0), nil)
	msgs, err := message.DecodeAll(pr.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "3", msgs[0].Properties[message.PropertyPriority])
}

// TestPriorityPullHoldsLowerQueues: with a low backlog being consumed, a
// high message stored afterwards holds back the group's pulls of lower
// queues until the group has been handed the high queue; other groups
// are not held back by it once they are past it, a higher queue nobody
// consumes stops nothing past the grace, and a restart (committed offsets
// only) keeps the order.
func TestPriorityPullHoldsLowerQueues(t *testing.T) {
	dir := t.TempDir()
	h := startBroker(t, dir, nil)
	h.priorityTopic("PT", 3)
	for i := range 100 {
		require.Equal(t, remoting.Success, h.send("PT", 0, fmt.Sprintf("low-%d", i), message.Properties{message.PropertyPriority: "0"}).Code)
	}
	// The group consumes queues 2 and 0 (queue 1 too: all empty so far).
	for q := 2; q >= 1; q-- {
		resp, _ := h.prioPull("G", "PT", q, 0)
		require.Equal(t, remoting.PullNotFound, resp.Code, resp.Remark)
	}
	resp, got := h.prioPull("G", "PT", 0, 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, got, 32)
	require.Equal(t, remoting.Success, h.send("PT", 0, "high", message.Properties{message.PropertyPriority: "2"}).Code)

	// The next low pull gets nothing, at its own offset.
	resp, got = h.prioPull("G", "PT", 0, 32)
	assert.Equal(t, remoting.PullNotFound, resp.Code, resp.Remark)
	assert.Equal(t, "32", resp.Ext("nextBeginOffset"))
	assert.Empty(t, got)
	// Queue 1 is held back too; queue 2 hands the high message.
	resp, _ = h.prioPull("G", "PT", 1, 0)
	assert.Equal(t, remoting.PullNotFound, resp.Code)
	resp, got = h.prioPull("G", "PT", 2, 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []string{"high"}, got)
	// Then low goes on.
	resp, got = h.prioPull("G", "PT", 0, 32)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "low-32", got[0])

	// A held (long-polling) low pull is woken by the high queue draining.
	require.Equal(t, remoting.Success, h.send("PT", 1, "mid", message.Properties{message.PropertyPriority: "1"}).Code)
	woken := make(chan *remoting.Command, 1)
	req := remoting.NewRequest(remoting.PullMessage, pullExt("G", "PT", 0, 64, pullSuspend|pullSubscription, 20*time.Second), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	require.NoError(t, h.client.InvokeAsync(ctx, h.addr, req, func(c *remoting.Command, err error) {
		assert.NoError(t, err)
		woken <- c
	}))
	require.Eventually(t, func() bool { return h.b.holds.held() == 1 }, 5*time.Second, 5*time.Millisecond)
	resp, got = h.prioPull("G", "PT", 1, 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []string{"mid"}, got)
	c := <-woken // read again once queue 1 is handed: the low messages
	require.Equal(t, remoting.Success, c.Code, c.Remark)
	msgs, err := message.DecodeAll(c.Body)
	require.NoError(t, err)
	assert.Equal(t, "low-64", string(msgs[0].Body))
	assert.Equal(t, "96", c.Ext("nextBeginOffset"))

	// Restart: only committed offsets are known. Commit the group's
	// positions, store a new high message, restart: low is held back
	// until queue 2 is pulled again.
	h.b.offsets.commit("G", "PT", 2, 1)
	h.b.offsets.commit("G", "PT", 1, 1)
	require.Equal(t, remoting.Success, h.send("PT", 2, "high-2", message.Properties{message.PropertyPriority: "5"}).Code)
	h.stop()
	h = startBroker(t, dir, nil)
	resp, _ = h.prioPull("G", "PT", 0, 96)
	assert.Equal(t, remoting.PullNotFound, resp.Code, "held back after the restart")
	resp, got = h.prioPull("G", "PT", 2, 1)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []string{"high-2"}, got)
	resp, got = h.prioPull("G", "PT", 0, 96)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "low-96", got[0])
}

// TestPriorityHeldPullWokenEarlyStaysHeld: a held low pull woken while a
// higher queue still holds it back stays held until that queue is handed,
// instead of ending its long poll with "no new message". The wake-up of a
// drained queue runs once that queue's answer is written, so it may come
// after the client has pulled on and parked a pull that another higher
// queue holds back (TestPriorityPullHoldsLowerQueues failed so under
// load: its held pull was answered at once, never seen held).
func TestPriorityHeldPullWokenEarlyStaysHeld(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	h.priorityTopic("PT", 3)
	require.Equal(t, remoting.Success, h.send("PT", 0, "low", message.Properties{message.PropertyPriority: "0"}).Code)
	require.Equal(t, remoting.Success, h.send("PT", 1, "mid", message.Properties{message.PropertyPriority: "1"}).Code)
	resp, _ := h.prioPull("G", "PT", 2, 0)
	require.Equal(t, remoting.PullNotFound, resp.Code, resp.Remark)

	woken := make(chan *remoting.Command, 1)
	req := remoting.NewRequest(remoting.PullMessage, pullExt("G", "PT", 0, 0, pullSuspend|pullSubscription, 20*time.Second), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	require.NoError(t, h.client.InvokeAsync(ctx, h.addr, req, func(c *remoting.Command, err error) {
		assert.NoError(t, err)
		woken <- c
	}))
	require.Eventually(t, func() bool { return h.b.holds.held() == 1 }, 5*time.Second, 5*time.Millisecond)
	// The late wake-up of a drained higher queue: queue 1 still holds
	// "mid" back from the group, so the pull is parked again.
	h.b.holds.notify("PT", prioBlockedQueue, math.MaxInt64)
	require.Eventually(t, func() bool { return h.b.holds.held() == 1 }, 5*time.Second, 5*time.Millisecond, "parked again")
	select {
	case c := <-woken:
		require.Failf(t, "the held pull was answered while queue 1 holds it back", "code %d: %s", c.Code, c.Remark)
	default:
	}

	resp, got := h.prioPull("G", "PT", 1, 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []string{"mid"}, got)
	c := <-woken // queue 1 handed: the low message
	require.Equal(t, remoting.Success, c.Code, c.Remark)
	msgs, err := message.DecodeAll(c.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "low", string(msgs[0].Body))
}

// TestPriorityUnconsumedQueueStopsNothing: a higher queue the group does
// not consume holds lower ones back only for the grace after its first
// pull, and one it stopped consuming only for the live window.
func TestPriorityUnconsumedQueueStopsNothing(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	h.priorityTopic("PT", 2)
	require.Equal(t, remoting.Success, h.send("PT", 0, "low", message.Properties{message.PropertyPriority: "0"}).Code)
	require.Equal(t, remoting.Success, h.send("PT", 1, "high", message.Properties{message.PropertyPriority: "1"}).Code)
	pr := func(q int32, off int64) *pullRequest {
		return &pullRequest{group: "G", topic: "PT", queueID: q, offset: off, prioQueues: 2}
	}
	t0 := time.Now()
	tab := &h.b.holds.prio
	assert.True(t, tab.pulled(h.b, pr(0, 0), t0), "in the grace: queue 1 may yet be pulled")
	assert.False(t, tab.pulled(h.b, pr(0, 0), t0.Add(priorityGrace+time.Second)), "nobody pulls queue 1")
	// Queue 1 pulled (not handed yet): it holds queue 0 back while live.
	assert.False(t, tab.pulled(h.b, pr(1, 0), t0.Add(priorityGrace+time.Second)))
	assert.True(t, tab.pulled(h.b, pr(0, 0), t0.Add(priorityGrace+2*time.Second)))
	stale := t0.Add(priorityGrace + time.Second + h.b.current().MaxSuspend + priorityLive + time.Second)
	assert.False(t, tab.pulled(h.b, pr(0, 0), stale), "its consumer went away")
	tab.mu.Lock()
	n := len(tab.seen)
	tab.mu.Unlock()
	assert.Equal(t, 2, n, "one entry per (group, topic, queue)")
}
