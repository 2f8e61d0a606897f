package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// lockQueue names a queue in LOCK_BATCH_MQ bodies (Java MessageQueue).
type lockQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// lockBatchBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
type lockBatchBody struct {
	ConsumerGroup string      `json:"consumerGroup"`
	ClientID      string      `json:"clientId"`
	MQSet         []lockQueue `json:"mqSet"`
}

type lockEntry struct {
	clientID   string
	lastUpdate time.Time
}

// lockTable is the rebalance lock table of orderly consumers (Java
// RebalanceLockManager): group → queue → owner. A lock not renewed for
// maxLive expires and may be taken by another client of the group.
type lockTable struct {
	mu      sync.Mutex
	groups  map[string]map[lockQueue]*lockEntry
	maxLive time.Duration
	now     func() time.Time
}

func newLockTable(maxLive time.Duration) *lockTable {
	if maxLive <= 0 {
		maxLive = 60 * time.Second
	}
	return &lockTable{groups: map[string]map[lockQueue]*lockEntry{}, maxLive: maxLive, now: time.Now}
}

// tryLock locks every queue of mqs that is free, expired or already the
// caller's, renewing the caller's locks; it returns the queues now held
// by clientID, in request order.
func (t *lockTable) tryLock(group, clientID string, mqs []lockQueue) []lockQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	g, ok := t.groups[group]
	if !ok {
		g = map[lockQueue]*lockEntry{}
		t.groups[group] = g
	}
	out := make([]lockQueue, 0, len(mqs))
	for _, mq := range mqs {
		e, ok := g[mq]
		switch {
		case !ok:
			g[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
		case e.clientID == clientID:
			e.lastUpdate = now
		case now.Sub(e.lastUpdate) > t.maxLive:
			e.clientID, e.lastUpdate = clientID, now
		default:
			continue
		}
		out = append(out, mq)
	}
	return out
}

// unlock releases the queues of mqs that clientID holds; locks of other
// clients are left alone.
func (t *lockTable) unlock(group, clientID string, mqs []lockQueue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.groups[group]
	if !ok {
		return
	}
	for _, mq := range mqs {
		if e, ok := g[mq]; ok && e.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(t.groups, group)
	}
}

// owner returns the live holder of a queue's lock (tests, admin).
func (t *lockTable) owner(group string, mq lockQueue) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.groups[group][mq]
	if !ok || t.now().Sub(e.lastUpdate) > t.maxLive {
		return "", false
	}
	return e.clientID, true
}

func parseLockBody(req *remoting.Command) (*lockBatchBody, error) {
	var body lockBatchBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return nil, fmt.Errorf("bad lock batch body: %v", err)
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return nil, fmt.Errorf("lock batch body without consumerGroup or clientId")
	}
	return &body, nil
}

// handleLock serves LOCK_BATCH_MQ (41): the answer lists the queues the
// caller holds now.
func (t *lockTable) handleLock(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	body, err := parseLockBody(req)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	locked := t.tryLock(body.ConsumerGroup, body.ClientID, body.MQSet)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(struct {
		LockOKMQSet []lockQueue `json:"lockOKMQSet"`
	}{locked})
	return resp
}

// handleUnlock serves UNLOCK_BATCH_MQ (42).
func (t *lockTable) handleUnlock(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	body, err := parseLockBody(req)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	t.unlock(body.ConsumerGroup, body.ClientID, body.MQSet)
	return remoting.NewResponse(req, remoting.Success, "")
}
