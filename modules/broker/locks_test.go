package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestLocks() (*lockTable, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	t := newLockTable(60 * time.Second)
	t.now = clk.now
	return t, clk
}

func mq(topic string, id int32) lockQueue {
	return lockQueue{Topic: topic, BrokerName: "broker-a", QueueID: id}
}

// lockStep is one tryLock call after advancing the clock.
type lockStep struct {
	client string
	give   []lockQueue
	after  time.Duration
	want   []lockQueue
}

func TestLockTableGrants(t *testing.T) {
	q0, q1, q2 := mq("T", 0), mq("T", 1), mq("T", 2)
	tests := []struct {
		name string
		// steps run in order on one table; each locks give for client.
		steps []lockStep
	}{
		{"free queues are granted, held ones refused", []lockStep{
			{"c1", []lockQueue{q0, q1}, 0, []lockQueue{q0, q1}},
			{"c2", []lockQueue{q1, q2}, time.Second, []lockQueue{q2}},
			{"c1", []lockQueue{q0, q1, q2}, time.Second, []lockQueue{q0, q1}},
		}},
		{"expiry after 60s without renewal", []lockStep{
			{"c1", []lockQueue{q0}, 0, []lockQueue{q0}},
			{"c2", []lockQueue{q0}, 60 * time.Second, nil},
			{"c2", []lockQueue{q0}, time.Millisecond, []lockQueue{q0}},
			{"c1", []lockQueue{q0}, time.Second, nil},
		}},
		{"renewal keeps the lock", []lockStep{
			{"c1", []lockQueue{q0}, 0, []lockQueue{q0}},
			{"c1", []lockQueue{q0}, 40 * time.Second, []lockQueue{q0}},
			{"c1", []lockQueue{q0}, 40 * time.Second, []lockQueue{q0}},
			{"c2", []lockQueue{q0}, 40 * time.Second, nil},
			{"c2", []lockQueue{q0}, 21 * time.Second, []lockQueue{q0}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lt, clk := newTestLocks()
			for i, s := range tt.steps {
				clk.add(s.after)
				got := lt.tryLock("G", s.client, s.give)
				if len(s.want) == 0 {
					assert.Empty(t, got, "step %d", i)
				} else {
					assert.Equal(t, s.want, got, "step %d", i)
				}
			}
		})
	}
}

func TestLockTableGroupsAreSeparate(t *testing.T) {
	lt, _ := newTestLocks()
	assert.Len(t, lt.tryLock("G1", "c1", []lockQueue{mq("T", 0)}), 1)
	assert.Len(t, lt.tryLock("G2", "c2", []lockQueue{mq("T", 0)}), 1, "another group locks the same queue independently")
	assert.Empty(t, lt.tryLock("G1", "c2", []lockQueue{mq("T", 0)}))
	// Brokers are part of the queue's identity.
	assert.Len(t, lt.tryLock("G1", "c2", []lockQueue{{Topic: "T", BrokerName: "broker-b", QueueID: 0}}), 1)
}

func TestUnlockByNonOwnerIsIgnored(t *testing.T) {
	lt, _ := newTestLocks()
	q := mq("T", 0)
	require.Len(t, lt.tryLock("G", "c1", []lockQueue{q}), 1)
	lt.unlock("G", "c2", []lockQueue{q})
	lt.unlock("OTHER", "c1", []lockQueue{q})
	owner, ok := lt.owner("G", q)
	require.True(t, ok)
	assert.Equal(t, "c1", owner)
	assert.Empty(t, lt.tryLock("G", "c2", []lockQueue{q}))

	lt.unlock("G", "c1", []lockQueue{q})
	_, ok = lt.owner("G", q)
	assert.False(t, ok)
	assert.Len(t, lt.tryLock("G", "c2", []lockQueue{q}), 1, "released at once by its owner")
}

// TestConcurrentLockers races many clients for the same queues: each queue
// ends up with exactly one owner, who is the only one ever granted it.
func TestConcurrentLockers(t *testing.T) {
	lt, clk := newTestLocks()
	queues := make([]lockQueue, 8)
	for i := range queues {
		queues[i] = mq("T", int32(i))
	}
	var mu sync.Mutex
	granted := map[lockQueue]map[string]bool{}
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			id := fmt.Sprintf("c%d", c)
			for round := 0; round < 200; round++ {
				got := lt.tryLock("G", id, queues)
				mu.Lock()
				for _, q := range got {
					if granted[q] == nil {
						granted[q] = map[string]bool{}
					}
					granted[q][id] = true
				}
				mu.Unlock()
				if round%50 == 0 {
					clk.add(time.Millisecond)
				}
			}
		}(c)
	}
	wg.Wait()
	for _, q := range queues {
		assert.Len(t, granted[q], 1, "queue %v granted to %v", q, granted[q])
	}
	// Once every lock expires, a newcomer takes all of them.
	clk.add(61 * time.Second)
	assert.Len(t, lt.tryLock("G", "late", queues), len(queues))
}

func TestLockHandlers(t *testing.T) {
	lt, _ := newTestLocks()
	body := func(client string, qs ...lockQueue) []byte {
		b, err := json.Marshal(lockBatchBody{ConsumerGroup: "G", ClientID: client, MQSet: qs})
		require.NoError(t, err)
		return b
	}
	resp := lt.handleLock(context.Background(), nil, remoting.NewRequest(remoting.LockBatchMQ, nil, body("c1", mq("T", 0), mq("T", 1))))
	require.Equal(t, remoting.Success, resp.Code)
	assert.JSONEq(t, `{"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":1}]}`, string(resp.Body))

	resp = lt.handleLock(context.Background(), nil, remoting.NewRequest(remoting.LockBatchMQ, nil, body("c2", mq("T", 1))))
	require.Equal(t, remoting.Success, resp.Code)
	assert.JSONEq(t, `{"lockOKMQSet":[]}`, string(resp.Body))

	resp = lt.handleUnlock(context.Background(), nil, remoting.NewRequest(remoting.UnlockBatchMQ, nil, body("c1", mq("T", 1))))
	require.Equal(t, remoting.Success, resp.Code)
	resp = lt.handleLock(context.Background(), nil, remoting.NewRequest(remoting.LockBatchMQ, nil, body("c2", mq("T", 1))))
	assert.JSONEq(t, `{"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":1}]}`, string(resp.Body))

	resp = lt.handleLock(context.Background(), nil, remoting.NewRequest(remoting.LockBatchMQ, nil, []byte("{bad")))
	assert.Equal(t, remoting.SystemError, resp.Code)
}

func TestLockBatchOverTheWire(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	b, _ := json.Marshal(lockBatchBody{ConsumerGroup: "G", ClientID: "c1", MQSet: []lockQueue{mq("T", 0)}})
	resp := h.invoke(remoting.LockBatchMQ, nil, b)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":0}]`)
	resp = h.invoke(remoting.UnlockBatchMQ, nil, b)
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
}
