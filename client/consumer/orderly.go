package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func parseIDs(body []byte) ([]string, error) {
	var l protocol.ConsumerIDList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("consumer: decode consumer list: %w", err)
	}
	return l.ConsumerIDList, nil
}

// lockMaxAge is how long a lock is trusted without renewal (the broker
// keeps it 60 s; the official client trusts it 30 s).
const lockMaxAge = 30 * time.Second

// lock asks each broker to lock mqs for this client (LOCK_BATCH_MQ) and
// returns the queues it now holds. A broker without the request code is
// treated as granting every lock (with a warning once), so orderly
// consumption still works, relying on rebalance alone for exclusivity.
func (pc *PushConsumer) lock(ctx context.Context, mqs []client.MessageQueue) []client.MessageQueue {
	byBroker := map[string][]client.MessageQueue{}
	for _, mq := range mqs {
		byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
	}
	var out []client.MessageQueue
	for broker, qs := range byBroker {
		addr, ok := pc.c.BrokerAddr(broker)
		if !ok {
			continue
		}
		body := lockBody(pc.group, pc.c.ID(), qs)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := pc.c.Invoke(cctx, addr, client.NewRequest(remoting.LockBatchMQ, nil, body))
		cancel()
		if err != nil {
			pc.log.Debug("lock queues", "broker", broker, "err", err)
			continue
		}
		if resp.Code == remoting.RequestCodeNotSupported {
			pc.lockUnsupported.Do(func() {
				pc.log.Warn("broker does not support LOCK_BATCH_MQ; orderly consumption relies on rebalance alone", "broker", broker)
			})
			pc.noLocks.Store(true)
			out = append(out, qs...)
			continue
		}
		if resp.Code != remoting.Success {
			pc.log.Debug("lock queues", "broker", broker, "err", client.NewBrokerError(addr, resp))
			continue
		}
		var r protocol.LockBatchResponse
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			pc.log.Warn("bad lock answer", "broker", broker, "err", err)
			continue
		}
		for _, q := range r.LockOKMQSet {
			out = append(out, client.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int(q.QueueID)})
		}
	}
	return out
}

func lockBody(group, id string, qs []client.MessageQueue) []byte {
	req := protocol.LockBatchRequest{ConsumerGroup: group, ClientID: id}
	for _, q := range qs {
		req.MQSet = append(req.MQSet, q.Proto())
	}
	b, _ := json.Marshal(&req)
	return b
}

func (pc *PushConsumer) unlock(ctx context.Context, mqs []client.MessageQueue) {
	if pc.noLocks.Load() {
		return
	}
	byBroker := map[string][]client.MessageQueue{}
	for _, mq := range mqs {
		byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
	}
	for broker, qs := range byBroker {
		addr, ok := pc.c.BrokerAddr(broker)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pc.c.Invoke(cctx, addr, client.NewRequest(remoting.UnlockBatchMQ, nil, lockBody(pc.group, pc.c.ID(), qs)))
		cancel()
		if err != nil {
			pc.log.Debug("unlock queues", "broker", broker, "err", err)
		}
	}
}

// renewLocks renews the locks of held orderly queues (every lock
// interval).
func (pc *PushConsumer) renewLocks() {
	held := pc.heldQueues()
	got := map[client.MessageQueue]bool{}
	for _, mq := range pc.lock(pc.ctx, held) {
		got[mq] = true
	}
	pc.pqMu.Lock()
	for mq, pq := range pc.pqs {
		if got[mq] {
			pq.locked.Store(true)
			pq.lockAt.Store(time.Now().UnixNano())
			pq.signal()
		} else if pq.lockExpired(lockMaxAge) {
			pq.locked.Store(false)
		}
	}
	pc.pqMu.Unlock()
}

// orderlyLoop consumes one queue in offset order.
func (pc *PushConsumer) orderlyLoop(pq *processQueue) {
	defer pc.wg.Done()
	for {
		select {
		case <-pc.ctx.Done():
			return
		case <-pq.stop:
			return
		case <-pq.wake:
		}
		for !pq.dropped.Load() && pc.ctx.Err() == nil {
			if !pc.noLocks.Load() && pc.o.model == Clustering && (!pq.locked.Load() || pq.lockExpired(lockMaxAge)) {
				break
			}
			msgs := pq.first(pc.o.batchSize)
			if len(msgs) == 0 {
				break
			}
			res := pc.call(msgs)
			if pq.dropped.Load() {
				return
			}
			if res != ConsumeSuccess {
				if pc.o.maxReconsume >= 0 && int(msgs[0].ReconsumeTimes) >= pc.o.maxReconsume {
					// Out of local attempts: to the DLQ, as the official
					// client does (delay level -1).
					for _, m := range msgs {
						if err := pc.sendBack(pc.ctx, m, -1); err != nil {
							pc.log.Warn("orderly send to DLQ", "msgId", m.MsgID, "err", err)
						}
					}
				} else {
					for _, m := range msgs {
						m.ReconsumeTimes++
					}
					if !pc.sleep(pc.o.suspendOrderly, pq.stop) {
						return
					}
					continue
				}
			}
			if off := pq.remove(msgs); off >= 0 {
				pc.offsets.update(pq.mq, off, true)
			}
		}
	}
}
