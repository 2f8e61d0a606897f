package retry

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
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
