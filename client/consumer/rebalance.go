package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// The rebalance: which queues of each subscribed topic this consumer
// holds (all of them when broadcasting, its average share of the group
// otherwise), redone every rebalance interval and when the group's
// members change. A queue gained gets a process queue and a pull loop
// (orderly: once the broker locked it to us); a queue lost is dropped,
// its offset persisted and, orderly, unlocked.

// Allocate is the average allocation of RocketMQ: queues and consumer ids
// sorted, each consumer a contiguous share, the first ones one more.
func Allocate(queues []client.MessageQueue, ids []string, self string) []client.MessageQueue {
	idx := sort.SearchStrings(ids, self)
	if idx >= len(ids) || ids[idx] != self || len(queues) == 0 {
		return nil
	}
	n, m := len(queues), len(ids)
	mod := n % m
	size := n / m
	if n <= m {
		size = 1
	} else if mod > 0 && idx < mod {
		size++
	}
	start := idx*size + mod
	if mod > 0 && idx < mod {
		start = idx * size
	}
	var out []client.MessageQueue
	for i := 0; i < min(size, n-start); i++ {
		out = append(out, queues[(start+i)%n])
	}
	return out
}

func sortQueues(qs []client.MessageQueue) {
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].BrokerName != qs[j].BrokerName {
			return qs[i].BrokerName < qs[j].BrokerName
		}
		return qs[i].QueueID < qs[j].QueueID
	})
}

// consumerIDs asks a broker of the topic for the group's members.
func consumerIDs(ctx context.Context, c *client.Client, group string, route *client.TopicRoute) ([]string, error) {
	brokers := route.Brokers()
	if len(brokers) == 0 {
		return nil, client.ErrNoRoute
	}
	start := rand.IntN(len(brokers))
	var last error
	for i := range brokers {
		addr, ok := c.BrokerAddr(brokers[(start+i)%len(brokers)])
		if !ok {
			continue
		}
		resp, err := c.Invoke(ctx, addr, client.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil))
		if err != nil {
			last = err
			continue
		}
		if resp.Code != remoting.Success {
			last = client.NewBrokerError(addr, resp)
			continue
		}
		ids, err := parseIDs(resp.Body)
		if err != nil {
			return nil, err
		}
		sort.Strings(ids)
		return ids, nil
	}
	if last == nil {
		last = client.ErrBrokerNotFound
	}
	return nil, fmt.Errorf("consumer: consumer list of %s: %w", group, last)
}

// doRebalance runs a rebalance (Start, then every rebalance interval and
// on triggerRebalance).
func (pc *PushConsumer) doRebalance(ctx context.Context) {
	missing := false
	defer func() {
		// The retry topic appears in the name server only after the
		// broker processed our heartbeat: look again soon.
		if missing && pc.o.routeRetry > 0 && pc.ctx.Err() == nil {
			pc.rebalanceAfter(pc.o.routeRetry)
		}
	}()
	for _, s := range pc.subscriptions() {
		route, err := pc.c.Route(ctx, s.topic)
		if err != nil {
			pc.log.Debug("rebalance: no route", "topic", s.topic, "err", err)
			missing = true
			continue
		}
		qs := append([]client.MessageQueue(nil), route.Subscribe...)
		sortQueues(qs)
		var alloc []client.MessageQueue
		if pc.o.model == Broadcasting {
			alloc = qs
		} else {
			ids, err := consumerIDs(ctx, pc.c, pc.group, route)
			if err != nil {
				pc.log.Debug("rebalance: consumer ids", "topic", s.topic, "err", err)
				continue
			}
			alloc = Allocate(qs, ids, pc.c.ID())
			pc.log.Debug("rebalance", "topic", s.topic, "consumers", ids, "allocated", fmtQueues(alloc))
		}
		pc.updateQueues(ctx, s, alloc)
	}
}

// rebalanceAfter triggers a rebalance after d, unless the consumer stops
// first.
func (pc *PushConsumer) rebalanceAfter(d time.Duration) {
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		if pc.sleep(d, nil) {
			pc.triggerRebalance()
		}
	}()
}

// updateQueues makes the held queues of s's topic the allocated ones:
// the others are dropped, the new ones started.
func (pc *PushConsumer) updateQueues(ctx context.Context, s *subscription, alloc []client.MessageQueue) {
	removed, added := pc.diffQueues(s.topic, alloc)
	if len(removed) > 0 {
		pc.releaseQueues(ctx, s.topic, removed)
	}
	if len(added) > 0 {
		pc.startQueues(ctx, s, added)
	}
}

// diffQueues drops the held queues of topic not in alloc, returning them,
// and returns the queues of alloc not held yet.
func (pc *PushConsumer) diffQueues(topic string, alloc []client.MessageQueue) (removed, added []client.MessageQueue) {
	want := map[client.MessageQueue]bool{}
	for _, q := range alloc {
		want[q] = true
	}
	pc.pqMu.Lock()
	defer pc.pqMu.Unlock()
	for mq, pq := range pc.pqs {
		if mq.Topic == topic && !want[mq] {
			pq.drop()
			delete(pc.pqs, mq)
			removed = append(removed, mq)
		}
	}
	for _, mq := range alloc {
		if _, ok := pc.pqs[mq]; !ok {
			added = append(added, mq)
		}
	}
	return removed, added
}

// releaseQueues persists and forgets the offsets of queues dropped by a
// rebalance and, orderly, unlocks them at the broker.
func (pc *PushConsumer) releaseQueues(ctx context.Context, topic string, removed []client.MessageQueue) {
	pc.offsets.persist(ctx, removed, false)
	for _, mq := range removed {
		pc.offsets.remove(mq)
	}
	if pc.o.orderly && pc.o.model == Clustering {
		pc.unlock(ctx, removed)
	}
	pc.log.Info("rebalance: queues removed", "topic", topic, "queues", fmtQueues(removed))
}

// startQueues starts pulling the queues a rebalance added, from their
// start offsets; an orderly clustering consumer first locks them at the
// broker and retries those it could not lock soon.
func (pc *PushConsumer) startQueues(ctx context.Context, s *subscription, added []client.MessageQueue) {
	locked := map[client.MessageQueue]bool{}
	if pc.o.orderly && pc.o.model == Clustering {
		for _, mq := range pc.lock(ctx, added) {
			locked[mq] = true
		}
	}
	var started []client.MessageQueue
	retryLock := false
	for _, mq := range added {
		if pc.o.orderly && pc.o.model == Clustering && !locked[mq] {
			// Its previous holder may not have unlocked it yet: try again
			// soon rather than at the next periodic rebalance.
			retryLock = true
			continue
		}
		off, err := pc.startOffset(ctx, mq)
		if err != nil {
			pc.log.Warn("rebalance: start offset", "queue", mq.String(), "err", err)
			continue
		}
		ok, stopping := pc.startQueue(s, mq, off)
		if stopping {
			return
		}
		if ok {
			started = append(started, mq)
		}
	}
	if len(started) > 0 {
		pc.log.Info("rebalance: queues added", "topic", s.topic, "queues", fmtQueues(started))
	}
	if retryLock {
		pc.rebalanceAfter(pc.o.lockRetry)
	}
}

// startQueue holds mq from off: a process queue, its pull loop and,
// orderly, its consume loop. It reports false when mq is already held,
// and stopping when the consumer is shutting down.
func (pc *PushConsumer) startQueue(s *subscription, mq client.MessageQueue, off int64) (ok, stopping bool) {
	pq := newProcessQueue(mq)
	if pc.o.orderly {
		pq.locked.Store(true)
		pq.lockAt.Store(time.Now().UnixNano())
	}
	pc.pqMu.Lock()
	if pc.ctx.Err() != nil {
		pc.pqMu.Unlock()
		return false, true
	}
	if _, dup := pc.pqs[mq]; dup {
		pc.pqMu.Unlock()
		return false, false
	}
	pc.pqs[mq] = pq
	pc.pqMu.Unlock()
	pc.offsets.update(mq, off, false)
	pc.wg.Add(1)
	go pc.pullLoop(pq, s, off)
	if pc.o.orderly {
		pc.wg.Add(1)
		go pc.orderlyLoop(pq)
	}
	return true, false
}

func fmtQueues(qs []client.MessageQueue) string {
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = q.String()
	}
	return strings.Join(parts, ",")
}

// startOffset computes where a newly assigned queue starts.
func (pc *PushConsumer) startOffset(ctx context.Context, mq client.MessageQueue) (int64, error) {
	off, err := pc.offsets.read(ctx, mq, true)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		return off, nil
	}
	retry := protocol.IsRetryTopic(mq.Topic)
	switch pc.o.from {
	case FromFirstOffset:
		return 0, nil
	case FromTimestamp:
		if !retry {
			return offsetCall(ctx, pc.c, remoting.SearchOffsetByTimestamp, mq, map[string]string{"timestamp": strconv.FormatInt(pc.o.fromTime.UnixMilli(), 10)})
		}
	}
	if retry {
		return 0, nil
	}
	return maxOffset(ctx, pc.c, mq)
}
