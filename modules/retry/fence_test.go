package retry

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// TestFenceDropsStaleCommits: after a reset, commits of other offsets are
// dropped until the consumer commits the reset offset or the fence expires.
func TestFenceDropsStaleCommits(t *testing.T) {
	s, b, _ := newService(t, NewConfig())
	_, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	require.NoError(t, err)
	commit := func(off int64) {
		req := remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}, nil)
		resp := b.Router().Handle(context.Background(), nil, req)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	offset := func() int64 { off, _ := b.QueryOffset("G", "T", 0); return off }

	commit(9)
	b.CommitOffset("G", "T", 0, 2)
	s.fences.set(fenceKey{"G", "T", 0}, 2)
	commit(9)
	assert.Equal(t, int64(2), offset(), "stale commit dropped")
	commit(2)
	commit(3)
	assert.Equal(t, int64(3), offset(), "fence lifted once the reset offset is committed")

	s.fences.set(fenceKey{"G", "T", 0}, 1)
	s.fences.now = func() time.Time { return time.Now().Add(time.Minute) }
	commit(5)
	assert.Equal(t, int64(5), offset(), "fence expired")
	assert.Equal(t, int32(0), s.fences.active.Load())
}

// TestResetFencesBeforeCommitting: a stale commit of an online consumer
// that lands right after the reset offset is committed (injected there
// with afterResetCommit) is dropped, not applied over the reset. Before,
// the fences went up only after every queue was committed and flushed,
// and the stale commit undid the reset.
func TestResetFencesBeforeCommitting(t *testing.T) {
	s, b, _ := newService(t, NewConfig())
	require.NoError(t, b.Start(context.Background()))
	_, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	require.NoError(t, err)
	for range 3 {
		put(t, b, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("m")}})
	}

	// An online consumer of G (a heartbeat on a real connection).
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	c := remoting.NewClient(ts.Dial, remoting.HandlerFunc(func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		return nil // RESET_CONSUMER_CLIENT_OFFSET is one-way
	}), nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	hb, err := json.Marshal(protocol.HeartbeatData{ClientID: "10.0.0.1@1", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: "G", ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering, ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "T", SubString: "*", ExpressionType: "TAG"}},
	}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, b.Addrs()[0], remoting.NewRequest(remoting.HeartBeat, nil, hb))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, b.ConsumerPeers("G"), 1)

	b.CommitOffset("G", "T", 0, 3)
	s.afterResetCommit = func(queue int32) {
		req := remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": "G", "topic": "T", "queueId": strconv.Itoa(int(queue)), "commitOffset": "3"}, nil)
		resp := b.Router().Handle(context.Background(), nil, req)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	qs, told, err := s.ResetOffsets(ctx, "T", "G", 0, true)
	require.NoError(t, err)
	assert.Equal(t, 1, told)
	require.Len(t, qs, 1)
	assert.Equal(t, int64(0), qs[0].Offset)
	off, ok := b.QueryOffset("G", "T", 0)
	require.True(t, ok)
	assert.Equal(t, int64(0), off, "the stale commit of 3 did not undo the reset")
}
