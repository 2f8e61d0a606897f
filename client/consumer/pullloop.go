package consumer

import (
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// pullLoop long-polls one held queue from next until the queue is dropped
// or the consumer stops: it pauses while the queue's cache is over the
// flow-control thresholds (or, orderly, while the queue is not locked),
// commits the consume offset with each pull, and hands what it pulled to
// the workers (concurrent) or to the queue's orderly loop.
func (pc *PushConsumer) pullLoop(pq *processQueue, s *subscription, next int64) {
	defer pc.wg.Done()
	var brokerID int64
	flowLogged := 0
	for !pq.dropped.Load() && pc.ctx.Err() == nil {
		if pc.flowControlled(pq, &flowLogged) {
			if !pc.sleep(pc.o.flowControlDelay, pq.stop) {
				return
			}
			continue
		}
		if pc.o.orderly && !pc.noLocks.Load() && !pq.locked.Load() {
			if !pc.sleep(time.Second, pq.stop) {
				return
			}
			continue
		}
		res, err := pullOnce(pc.ctx, pc.c, pc.nextPull(pq, s, next, brokerID))
		if err != nil {
			if pc.ctx.Err() != nil {
				return
			}
			pc.log.Debug("pull failed", "queue", pq.mq.String(), "err", err)
			if code := client.CodeOf(err); code == remoting.SubscriptionNotExist || code == remoting.SubscriptionNotLatest {
				// The broker lost or lags our subscription (it restarted):
				// heartbeat now instead of at the next period.
				pc.c.TriggerHeartbeat()
			}
			if !pc.sleep(pc.o.pullDelayOnError, pq.stop) {
				return
			}
			continue
		}
		brokerID = res.SuggestBrokerID
		switch res.Status {
		case Found:
			next = res.NextBeginOffset
			if len(res.Messages) == 0 {
				if c, _, _ := pq.stats(); c == 0 {
					pc.offsets.update(pq.mq, next, true)
				}
				continue
			}
			pq.put(res.Messages)
			if pc.o.orderly {
				pq.signal()
				continue
			}
			if !pc.dispatch(pq, res.Messages) {
				return
			}
		case NoNewMsg, NoMatchedMsg:
			next = res.NextBeginOffset
			if c, _, _ := pq.stats(); c == 0 {
				pc.offsets.update(pq.mq, next, false)
			}
		case OffsetIllegal:
			pc.log.Warn("pull offset illegal", "queue", pq.mq.String(), "offset", next, "nextBegin", res.NextBeginOffset)
			pc.offsetMoved(pq, res.NextBeginOffset)
			return
		}
	}
}

// flowControlled reports whether pq's cache is over the flow-control
// thresholds (count, bytes or, orderly, offset span), logging one pause in
// a thousand.
func (pc *PushConsumer) flowControlled(pq *processQueue, logged *int) bool {
	count, size, span := pq.stats()
	if count > pc.o.thresholdCount || size > pc.o.thresholdSize || (pc.o.orderly && span > pc.o.maxSpan) {
		if *logged%1000 == 0 {
			pc.log.Debug("flow control: pull paused", "queue", pq.mq.String(), "cached", count, "bytes", size, "span", span)
		}
		*logged++
		return true
	}
	return false
}

// nextPull is the next pull of pq from next: it commits the in-memory
// consume offset when clustering and carries the subscription when
// configured to.
func (pc *PushConsumer) nextPull(pq *processQueue, s *subscription, next, brokerID int64) pullArgs {
	sysFlag := flagSuspend
	var commit int64
	if pc.o.model == Clustering {
		if v, ok := pc.offsets.get(pq.mq); ok && v > 0 {
			commit = v
			sysFlag |= flagCommitOffset
		}
	}
	if pc.o.postSubscription {
		sysFlag |= flagSubscription
	}
	return pullArgs{group: pc.group, mq: pq.mq, offset: next, max: pc.o.pullBatchSize,
		sysFlag: sysFlag, commitOffset: commit, suspend: pc.o.suspendTimeout, timeout: pc.o.pullTimeout, sel: s.sel, brokerID: brokerID}
}

// offsetMoved handles OFFSET_ILLEGAL: pq is dropped and, after
// offsetMovedDelay, its offset set to moved (the broker's next begin
// offset) and persisted; a rebalance then holds the queue afresh.
func (pc *PushConsumer) offsetMoved(pq *processQueue, moved int64) {
	pq.drop()
	if !pc.sleep(pc.o.offsetMovedDelay, pc.ctx.Done()) {
		return
	}
	pc.offsets.update(pq.mq, moved, false)
	pc.offsets.persist(pc.ctx, []client.MessageQueue{pq.mq}, true)
	pc.pqMu.Lock()
	if pc.pqs[pq.mq] == pq {
		delete(pc.pqs, pq.mq)
	}
	pc.pqMu.Unlock()
	pc.triggerRebalance()
}
