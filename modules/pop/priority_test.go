package pop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
)

// priorityTopic makes a PRIORITY topic of queues levels.
func (n *node) priorityTopic(name string, queues int32) {
	n.t.Helper()
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6,
		Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypePriority}})
	require.NoError(n.t, err)
}

// TestPriorityHighestQueueFirst: on a priority topic a receive takes the
// highest level with messages first, whatever queue the round robin would
// start at, and a high message stored after a low backlog comes before
// any further low one, also after a restart.
func TestPriorityHighestQueueFirst(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.priorityTopic("P", 10)
		for i := range 100 {
			n.put("P", 0, "", fmt.Sprintf("low-%d", i))
		}
		n.put("P", 5, "", "mid")
		require.Equal(t, []string{"mid", "low-0", "low-1", "low-2"}, bodies(n.receive("g", "P", nil, 4, time.Minute)))
		for i := 3; i < 8; i++ { // every round robin start
			require.Equal(t, []string{fmt.Sprintf("low-%d", i)}, bodies(n.receive("g", "P", nil, 1, time.Minute)))
		}
		n.put("P", 9, "", "high")
		n.put("P", 7, "", "seven")
		require.Equal(t, []string{"high", "seven", "low-8"}, bodies(n.receive("g", "P", nil, 3, time.Minute)))

		// Restart: the order comes from the queues, nothing to rebuild.
		n.put("P", 9, "", "high-2")
		n = n.restart()
		require.Equal(t, []string{"high-2", "low-9"}, bodies(n.receive("g", "P", nil, 2, time.Minute)))
	})
}

// TestPriorityRetryKeepsLevel: a high message that was not acked comes
// back, once its invisible time passes, before any further low message:
// it is redelivered from its own level, not from a retry queue behind
// the low backlog (RocketMQ's priority inversion in retry queues).
func TestPriorityRetryKeepsLevel(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		n := newNode(t, e)
		n.priorityTopic("P", 10)
		for i := range 50 {
			n.put("P", 1, "", fmt.Sprintf("low-%d", i))
		}
		n.put("P", 8, "", "high")
		got := n.receive("g", "P", nil, 1, 10*time.Second)
		require.Equal(t, []string{"high"}, bodies(got))
		// A low message taken and not acked either: both come back, the
		// high one first.
		low := n.receive("g", "P", nil, 1, 10*time.Second)
		require.Equal(t, []string{"low-0"}, bodies(low))
		n.clock.add(11 * time.Second)
		again := n.receive("g", "P", nil, 3, time.Minute)
		require.Equal(t, []string{"high", "low-0", "low-1"}, bodies(again))
		require.Equal(t, int32(2), again[0].Attempt)
		require.NoError(t, n.s.Ack(context.Background(), "g", "P", again[0].Handle))
	})
}

// TestNonPriorityTopicRotates: a topic without the type keeps the round
// robin over queues (no level order), so priority costs it nothing.
func TestNonPriorityTopicRotates(t *testing.T) {
	n := newNode(t, engines[0])
	n.topic("N", 4)
	for q := range int32(4) {
		n.put("N", q, "", fmt.Sprintf("q%d", q))
	}
	seen := map[string]bool{}
	for range 4 {
		got := n.receive("g", "N", nil, 1, time.Minute)
		require.Len(t, got, 1)
		seen[string(got[0].Message.Body)] = true
	}
	require.Len(t, seen, 4)
	firsts := map[int32]bool{}
	for i := range 8 {
		n.put("N", int32(i%4), "", fmt.Sprintf("r%d", i))
	}
	for range 4 {
		firsts[n.receive("g2", "N", nil, 1, time.Minute)[0].Queue] = true
	}
	require.Greater(t, len(firsts), 1, "a plain topic is not served highest queue first")
}
