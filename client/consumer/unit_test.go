package consumer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func queues(n int) []client.MessageQueue {
	out := make([]client.MessageQueue, n)
	for i := range out {
		out[i] = client.MessageQueue{Topic: "T", BrokerName: "b", QueueID: i}
	}
	return out
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		queues, consumers int
		want              [][]int
	}{
		{4, 2, [][]int{{0, 1}, {2, 3}}},
		{5, 2, [][]int{{0, 1, 2}, {3, 4}}},
		{2, 3, [][]int{{0}, {1}, nil}},
		{8, 3, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dq%dc", tt.queues, tt.consumers), func(t *testing.T) {
			for i, w := range tt.want {
				var got []int
				for _, q := range Allocate(queues(tt.queues), ids(tt.consumers), fmt.Sprintf("c%d", i)) {
					got = append(got, q.QueueID)
				}
				assert.Equal(t, w, got, "consumer %d", i)
			}
		})
	}
	assert.Nil(t, Allocate(queues(4), ids(2), "stranger"))
}

func TestProcessQueue(t *testing.T) {
	pq := newProcessQueue(client.MessageQueue{Topic: "T"})
	mk := func(off int64) *client.MessageExt {
		return &client.MessageExt{Message: client.Message{Body: []byte("xx")}, QueueOffset: off}
	}
	ms := []*client.MessageExt{mk(10), mk(11), mk(12)}
	assert.Equal(t, 3, pq.put(ms))
	assert.Equal(t, 0, pq.put(ms[:1]), "duplicates ignored")
	c, size, span := pq.stats()
	assert.Equal(t, 3, c)
	assert.Equal(t, int64(6), size)
	assert.Equal(t, int64(2), span)
	assert.Equal(t, int64(10), pq.remove(ms[1:2]), "lowest cached offset")
	assert.Equal(t, int64(12), pq.remove(ms[:1]))
	assert.Equal(t, int64(13), pq.remove(ms[2:]), "one past the highest when empty")
	assert.Equal(t, int64(-1), newProcessQueue(client.MessageQueue{}).remove(nil))
}
