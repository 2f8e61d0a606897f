package consumer

import (
	"strconv"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
)

// Concurrent consumption: pull loops queue batches of pulled messages as
// tasks; the workers (o.goroutines of them) run the handler on each and
// commit the batch or send it back to the broker.

type consumeTask struct {
	pq   *processQueue
	msgs []*client.MessageExt
}

// dispatch queues msgs for the workers in batches without blocking: the
// pull loop keeps pulling ahead, bounded by the flow-control thresholds,
// as the official clients do. It returns false when stopping.
func (pc *PushConsumer) dispatch(pq *processQueue, msgs []*client.MessageExt) bool {
	if pq.dropped.Load() || pc.ctx.Err() != nil {
		return false
	}
	for i := 0; i < len(msgs); i += pc.o.batchSize {
		pc.tasks.push(consumeTask{pq: pq, msgs: msgs[i:min(i+pc.o.batchSize, len(msgs))]})
	}
	return true
}

func (pc *PushConsumer) worker() {
	defer pc.wg.Done()
	for {
		t, ok := pc.tasks.pop()
		if !ok {
			return
		}
		pc.consumeConcurrently(t)
	}
}

// taskQueue is the FIFO between pull loops and consume workers; its size
// is bounded by the per-queue thresholds, not by the queue itself.
type taskQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []consumeTask
	closed bool
}

func newTaskQueue() *taskQueue {
	q := &taskQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *taskQueue) push(t consumeTask) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, t)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

func (q *taskQueue) pop() (consumeTask, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return consumeTask{}, false
	}
	t := q.items[0]
	q.items[0] = consumeTask{}
	q.items = q.items[1:]
	return t, true
}

func (q *taskQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.items = nil
	q.cond.Broadcast()
	q.mu.Unlock()
}

// call runs the handler on msgs, stamping their consume start time; a
// panicking handler counts as ConsumeRetryLater.
func (pc *PushConsumer) call(msgs []*client.MessageExt) (r Result) {
	tr := pc.traceBefore(msgs) // trace.go
	defer func() {
		p := recover()
		if p != nil {
			pc.log.Error("consume handler panicked", "panic", p)
			r = ConsumeRetryLater
		}
		pc.traceAfter(tr, r, p != nil)
	}()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, m := range msgs {
		m.Properties[message.PropertyConsumeStartTime] = now
	}
	return pc.handler(pc.ctx, msgs)
}

// consumeConcurrently runs the handler on one task and commits the
// batch's offset; a failed batch is sent back first (clustering) or
// dropped with a warning (broadcasting).
func (pc *PushConsumer) consumeConcurrently(t consumeTask) {
	if t.pq.dropped.Load() {
		return
	}
	res := pc.call(t.msgs)
	if t.pq.dropped.Load() {
		return
	}
	switch {
	case res == ConsumeSuccess:
	case pc.o.model == Clustering:
		t.msgs = pc.sendBackBatch(t)
	default:
		pc.log.Warn("broadcasting consumer dropped messages it failed to consume", "count", len(t.msgs))
	}
	if off := t.pq.remove(t.msgs); off >= 0 && !t.pq.dropped.Load() {
		pc.offsets.update(t.pq.mq, off, true)
	}
}
