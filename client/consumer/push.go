// Package consumer receives messages: a push consumer (clustering with
// rebalance or broadcasting, concurrent or orderly, long-polling pulls,
// flow control, retries through the broker) and a pull consumer with
// offsets under the caller's control.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Result is a handler's verdict on a batch.
type Result int

// Handler results.
const (
	// ConsumeSuccess commits the batch.
	ConsumeSuccess Result = iota
	// ConsumeRetryLater redelivers it: concurrent consumers send it back
	// to the broker (retry topic, delayed); orderly consumers suspend the
	// queue and retry locally.
	ConsumeRetryLater
)

// Handler processes a batch of messages of one queue.
type Handler func(ctx context.Context, msgs []*client.MessageExt) Result

type subscription struct {
	topic string
	sel   Selector
	data  client.HeartbeatSubscription
}

// PushConsumer delivers messages to a handler.
type PushConsumer struct {
	c       *client.Client
	group   string
	o       options
	log     *slog.Logger
	handler Handler
	offsets offsetStore

	subMu sync.RWMutex
	subs  map[string]*subscription

	pqMu sync.Mutex
	pqs  map[client.MessageQueue]*processQueue

	lockUnsupported sync.Once
	noLocks         atomic.Bool

	tasks     *taskQueue
	rebalance chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stateMu   sync.Mutex
	started   bool
	closed    bool
}

type consumeTask struct {
	pq   *processQueue
	msgs []*client.MessageExt
}

// NewPush returns a push consumer of group; Subscribe, then Start.
func NewPush(c *client.Client, group string, h Handler, opts ...Option) (*PushConsumer, error) {
	if err := protocol.ValidateGroup(group); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if group == "DEFAULT_CONSUMER" {
		return nil, errors.New("consumer: choose a group name other than DEFAULT_CONSUMER")
	}
	if h == nil {
		return nil, errors.New("consumer: nil handler")
	}
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	if o.goroutines < 1 {
		o.goroutines = 1
	}
	if o.batchSize < 1 {
		o.batchSize = 1
	}
	if o.pullBatchSize < 1 {
		o.pullBatchSize = 32
	}
	pc := &PushConsumer{c: c, group: group, o: o, handler: h, subs: map[string]*subscription{},
		pqs: map[client.MessageQueue]*processQueue{}, rebalance: make(chan struct{}, 1)}
	pc.log = c.Logger().With("consumerGroup", group)
	if o.model == Broadcasting {
		dir := o.offsetDir
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				home = os.TempDir()
			}
			dir = filepath.Join(home, ".quiver_offsets", strings.ReplaceAll(c.ID(), ":", "_"), group)
		}
		ls, err := newLocalOffsets(filepath.Join(dir, "offsets.json"), pc.log)
		if err != nil {
			return nil, err
		}
		pc.offsets = ls
	} else {
		pc.offsets = newRemoteOffsets(c, group)
	}
	return pc, nil
}

// Subscribe adds a topic subscription; call it before Start.
func (pc *PushConsumer) Subscribe(topic string, sel Selector) error {
	if err := protocol.ValidateTopic(topic); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	sel = sel.norm()
	pc.subMu.Lock()
	defer pc.subMu.Unlock()
	pc.subs[topic] = &subscription{topic: topic, sel: sel, data: client.NewSubscription(topic, string(sel.Type), sel.Expression)}
	return nil
}

func (pc *PushConsumer) subscriptions() []*subscription {
	pc.subMu.RLock()
	defer pc.subMu.RUnlock()
	out := make([]*subscription, 0, len(pc.subs))
	for _, s := range pc.subs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].topic < out[j].topic })
	return out
}

// ConsumerData implements client.ConsumerHandler.
func (pc *PushConsumer) ConsumerData() client.HeartbeatConsumer {
	cd := client.HeartbeatConsumer{GroupName: pc.group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: pc.o.model.String(),
		ConsumeFromWhere: pc.o.from.String(), SubscriptionDataSet: []client.HeartbeatSubscription{}}
	for _, s := range pc.subscriptions() {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, s.data)
	}
	return cd
}

// SubscribedTopics implements client.ConsumerHandler.
func (pc *PushConsumer) SubscribedTopics() []string {
	var out []string
	for _, s := range pc.subscriptions() {
		out = append(out, s.topic)
	}
	return out
}

// IDsChanged implements client.ConsumerHandler.
func (pc *PushConsumer) IDsChanged() { pc.triggerRebalance() }

func (pc *PushConsumer) triggerRebalance() {
	select {
	case pc.rebalance <- struct{}{}:
	default:
	}
}

// Offsets implements client.ConsumerHandler.
func (pc *PushConsumer) Offsets(topic string) map[client.MessageQueue]int64 {
	return pc.offsets.snapshot(topic)
}

// ResetOffset implements client.ConsumerHandler: the queues of topic are
// dropped, their offsets set and persisted, and a rebalance re-adds them.
func (pc *PushConsumer) ResetOffset(topic string, table map[client.MessageQueue]int64) {
	pc.pqMu.Lock()
	var dropped []client.MessageQueue
	for mq, pq := range pc.pqs {
		if mq.Topic == topic {
			pq.drop()
			delete(pc.pqs, mq)
			dropped = append(dropped, mq)
		}
	}
	pc.pqMu.Unlock()
	var mqs []client.MessageQueue
	for mq, off := range table {
		if mq.Topic == topic {
			pc.offsets.update(mq, off, false)
			mqs = append(mqs, mq)
		}
	}
	ctx, cancel := context.WithTimeout(pc.ctx, 3*time.Second)
	pc.offsets.persist(ctx, mqs, true)
	cancel()
	pc.log.Info("offsets reset by broker", "topic", topic, "queues", len(mqs), "dropped", len(dropped))
	pc.triggerRebalance()
}

// Start registers the group, checks the subscribed topics' routes,
// heartbeats and rebalances once, and starts pulling.
func (pc *PushConsumer) Start(ctx context.Context) error {
	pc.stateMu.Lock()
	defer pc.stateMu.Unlock()
	if pc.started || pc.closed {
		return errors.New("consumer: already started or shut down")
	}
	subs := pc.subscriptions()
	if len(subs) == 0 {
		return errors.New("consumer: no subscription")
	}
	if pc.o.model == Clustering {
		rt := protocol.RetryTopic(pc.group)
		pc.subMu.Lock()
		pc.subs[rt] = &subscription{topic: rt, sel: All(), data: client.NewSubscription(rt, "TAG", "*")}
		pc.subMu.Unlock()
	}
	for _, s := range subs {
		if err := fetchRouteSoon(ctx, pc.c, s.topic); err != nil {
			return fmt.Errorf("consumer: the topic %s route info not found, it may not exist: %w", s.topic, err)
		}
	}
	if err := pc.c.RegisterConsumer(pc.group, pc); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	pc.ctx, pc.cancel = context.WithCancel(context.Background())
	pc.tasks = newTaskQueue()
	if err := pc.c.SendHeartbeat(ctx); err != nil {
		pc.log.Warn("first heartbeat", "err", err)
	}
	pc.started = true
	if !pc.o.orderly {
		for i := 0; i < pc.o.goroutines; i++ {
			pc.wg.Add(1)
			go pc.worker()
		}
	}
	pc.doRebalance(ctx)
	pc.wg.Add(2)
	go pc.rebalanceLoop()
	go pc.persistLoop()
	if pc.o.orderly && pc.o.model == Clustering {
		pc.wg.Add(1)
		go pc.lockLoop()
	}
	return nil
}

// Shutdown stops pulling, cancels the handlers' context and waits for
// the handlers in flight (their results still count), commits offsets,
// releases orderly locks and unregisters the group. It returns ctx's error
// when the wait outlasted ctx.
func (pc *PushConsumer) Shutdown(ctx context.Context) error {
	pc.stateMu.Lock()
	if pc.closed || !pc.started {
		pc.closed = true
		pc.stateMu.Unlock()
		return nil
	}
	pc.closed = true
	pc.stateMu.Unlock()
	pc.cancel()
	pc.tasks.close()
	defer func() {
		pc.pqMu.Lock()
		for _, pq := range pc.pqs {
			pq.drop()
		}
		pc.pqMu.Unlock()
	}()
	done := make(chan struct{})
	go func() { pc.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("consumer: shutdown: %w", ctx.Err())
		<-done
	}
	mqs := pc.heldQueues()
	pctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pc.offsets.persist(pctx, mqs, true)
	if pc.o.orderly && pc.o.model == Clustering {
		pc.unlock(pctx, mqs)
	}
	pc.c.UnregisterConsumer(pctx, pc.group)
	return err
}

func (pc *PushConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-pc.ctx.Done():
		return false
	}
}

func (pc *PushConsumer) rebalanceLoop() {
	defer pc.wg.Done()
	t := time.NewTicker(pc.o.rebalanceInterval)
	defer t.Stop()
	for {
		select {
		case <-pc.ctx.Done():
			return
		case <-t.C:
		case <-pc.rebalance:
		}
		pc.doRebalance(pc.ctx)
	}
}

func (pc *PushConsumer) persistLoop() {
	defer pc.wg.Done()
	t := time.NewTicker(pc.o.persistInterval)
	defer t.Stop()
	for {
		select {
		case <-pc.ctx.Done():
			return
		case <-t.C:
		}
		pc.offsets.persist(pc.ctx, pc.heldQueues(), false)
	}
}

func (pc *PushConsumer) heldQueues() []client.MessageQueue {
	pc.pqMu.Lock()
	defer pc.pqMu.Unlock()
	out := make([]client.MessageQueue, 0, len(pc.pqs))
	for mq := range pc.pqs {
		out = append(out, mq)
	}
	return out
}

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

func (pc *PushConsumer) doRebalance(ctx context.Context) {
	missing := false
	defer func() {
		// The retry topic appears in the name server only after the
		// broker processed our heartbeat: look again soon.
		if missing && pc.o.routeRetry > 0 && pc.ctx.Err() == nil {
			pc.wg.Add(1)
			go func() {
				defer pc.wg.Done()
				if pc.sleep(pc.o.routeRetry, nil) {
					pc.triggerRebalance()
				}
			}()
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

func (pc *PushConsumer) updateQueues(ctx context.Context, s *subscription, alloc []client.MessageQueue) {
	want := map[client.MessageQueue]bool{}
	for _, q := range alloc {
		want[q] = true
	}
	var removed []client.MessageQueue
	pc.pqMu.Lock()
	for mq, pq := range pc.pqs {
		if mq.Topic == s.topic && !want[mq] {
			pq.drop()
			delete(pc.pqs, mq)
			removed = append(removed, mq)
		}
	}
	var added []client.MessageQueue
	for _, mq := range alloc {
		if _, ok := pc.pqs[mq]; !ok {
			added = append(added, mq)
		}
	}
	pc.pqMu.Unlock()
	if len(removed) > 0 {
		pc.offsets.persist(ctx, removed, false)
		for _, mq := range removed {
			pc.offsets.remove(mq)
		}
		if pc.o.orderly && pc.o.model == Clustering {
			pc.unlock(ctx, removed)
		}
		pc.log.Info("rebalance: queues removed", "topic", s.topic, "queues", fmtQueues(removed))
	}
	if len(added) == 0 {
		return
	}
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
		pq := newProcessQueue(mq)
		if pc.o.orderly {
			pq.locked.Store(true)
			pq.lockAt.Store(time.Now().UnixNano())
		}
		pc.pqMu.Lock()
		if pc.ctx.Err() != nil {
			pc.pqMu.Unlock()
			return
		}
		if _, dup := pc.pqs[mq]; dup {
			pc.pqMu.Unlock()
			continue
		}
		pc.pqs[mq] = pq
		pc.pqMu.Unlock()
		pc.offsets.update(mq, off, false)
		started = append(started, mq)
		pc.wg.Add(1)
		go pc.pullLoop(pq, s, off)
		if pc.o.orderly {
			pc.wg.Add(1)
			go pc.orderlyLoop(pq)
		}
	}
	if len(started) > 0 {
		pc.log.Info("rebalance: queues added", "topic", s.topic, "queues", fmtQueues(started))
	}
	if retryLock {
		pc.wg.Add(1)
		go func() {
			defer pc.wg.Done()
			if pc.sleep(pc.o.lockRetry, nil) {
				pc.triggerRebalance()
			}
		}()
	}
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

func (pc *PushConsumer) pullLoop(pq *processQueue, s *subscription, next int64) {
	defer pc.wg.Done()
	var brokerID int64
	flowLogged := 0
	for !pq.dropped.Load() && pc.ctx.Err() == nil {
		count, size, span := pq.stats()
		if count > pc.o.thresholdCount || size > pc.o.thresholdSize || (pc.o.orderly && span > pc.o.maxSpan) {
			if flowLogged%1000 == 0 {
				pc.log.Debug("flow control: pull paused", "queue", pq.mq.String(), "cached", count, "bytes", size, "span", span)
			}
			flowLogged++
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
		res, err := pullOnce(pc.ctx, pc.c, pullArgs{group: pc.group, mq: pq.mq, offset: next, max: pc.o.pullBatchSize,
			sysFlag: sysFlag, commitOffset: commit, suspend: pc.o.suspendTimeout, timeout: pc.o.pullTimeout, sel: s.sel, brokerID: brokerID})
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
			pq.drop()
			moved := res.NextBeginOffset
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
			return
		}
	}
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

func (pc *PushConsumer) call(msgs []*client.MessageExt) (r Result) {
	defer func() {
		if p := recover(); p != nil {
			pc.log.Error("consume handler panicked", "panic", p)
			r = ConsumeRetryLater
		}
	}()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, m := range msgs {
		m.Properties[message.PropertyConsumeStartTime] = now
	}
	return pc.handler(pc.ctx, msgs)
}

func (pc *PushConsumer) consumeConcurrently(t consumeTask) {
	if t.pq.dropped.Load() {
		return
	}
	res := pc.call(t.msgs)
	if t.pq.dropped.Load() {
		return
	}
	if res != ConsumeSuccess && pc.o.model == Clustering {
		var failed []*client.MessageExt
		for _, m := range t.msgs {
			if err := pc.sendBack(pc.ctx, m, pc.o.retryDelayLevel); err != nil {
				pc.log.Warn("send back failed; retrying locally", "msgId", m.MsgID, "err", err)
				failed = append(failed, m)
			}
		}
		if len(failed) > 0 {
			done := t.msgs[:0:0]
			for _, m := range t.msgs {
				if !contains(failed, m) {
					done = append(done, m)
				}
			}
			t.msgs = done
			pc.wg.Add(1)
			go func() {
				defer pc.wg.Done()
				if !pc.sleep(pc.o.localRetryInterval, t.pq.stop) {
					return
				}
				for _, m := range failed {
					m.ReconsumeTimes++
				}
				pc.dispatch(t.pq, failed)
			}()
		}
	} else if res != ConsumeSuccess {
		pc.log.Warn("broadcasting consumer dropped messages it failed to consume", "count", len(t.msgs))
	}
	if off := t.pq.remove(t.msgs); off >= 0 && !t.pq.dropped.Load() {
		pc.offsets.update(t.pq.mq, off, true)
	}
}

func contains(ms []*client.MessageExt, m *client.MessageExt) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func (pc *PushConsumer) maxReconsume() int {
	if pc.o.maxReconsume < 0 {
		return 16
	}
	return pc.o.maxReconsume
}

// sendBack returns a message to the broker for redelivery through the
// group's retry topic (CONSUMER_SEND_MSG_BACK), falling back to sending it
// to %RETRY%<group> as a normal message, as the official client does.
func (pc *PushConsumer) sendBack(ctx context.Context, m *client.MessageExt, delayLevel int) error {
	// Also during shutdown: a handler that just said "retry later" still
	// gets its message sent back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	addr, err := brokerOf(ctx, pc.c, m.Queue)
	if err == nil {
		req := client.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
			"group": pc.group, "offset": strconv.FormatInt(m.CommitLogOffset, 10),
			"delayLevel": strconv.Itoa(delayLevel), "originMsgId": m.MsgID, "originTopic": m.Topic,
			"unitMode": "false", "maxReconsumeTimes": strconv.Itoa(pc.maxReconsume()), "bname": m.Queue.BrokerName,
		}, nil)
		var resp *remoting.Command
		resp, err = pc.c.Invoke(ctx, addr, req)
		if err == nil && resp.Code == remoting.Success {
			return nil
		}
		if err == nil {
			err = client.NewBrokerError(addr, resp)
		}
	}
	pc.log.Debug("send back failed; sending to the retry topic", "msgId", m.MsgID, "err", err)
	if err2 := pc.sendToRetryTopic(ctx, m); err2 != nil {
		return fmt.Errorf("consumer: send back %s: %w (retry topic: %w)", m.MsgID, err, err2)
	}
	return nil
}

func (pc *PushConsumer) sendToRetryTopic(ctx context.Context, m *client.MessageExt) error {
	topic := protocol.RetryTopic(pc.group)
	route, err := pc.c.PublishRoute(ctx, topic, 1)
	if err != nil {
		return err
	}
	q := route.Publish[rand.IntN(len(route.Publish))]
	addr, ok := pc.c.BrokerAddr(q.BrokerName)
	if !ok {
		return client.ErrBrokerNotFound
	}
	props := message.Properties(m.Properties).Clone()
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = m.MsgID
	}
	props[message.PropertyRetryTopic] = m.Topic
	props[message.PropertyDelayTimeLevel] = strconv.Itoa(3 + int(m.ReconsumeTimes))
	delete(props, message.PropertyTransactionPrepared)
	delete(props, message.PropertyMinOffset)
	delete(props, message.PropertyMaxOffset)
	delete(props, message.PropertyConsumeStartTime)
	b := props.AppendEncoded(nil)
	if len(b) > 0 {
		b = append(b, message.PropertySeparator)
	}
	req := client.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "CLIENT_INNER_PRODUCER", "topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"defaultTopicQueueNums": "4", "queueId": strconv.Itoa(q.QueueID), "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": strconv.Itoa(int(m.Flag)),
		"properties": string(b), "reconsumeTimes": strconv.Itoa(int(m.ReconsumeTimes) + 1), "unitMode": "false",
		"maxReconsumeTimes": strconv.Itoa(pc.maxReconsume()), "batch": "false", "bname": q.BrokerName,
	}, m.Body)
	resp, err := pc.c.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return client.NewBrokerError(addr, resp)
	}
	return nil
}

// QueueStats describes one held queue's cache.
type QueueStats struct {
	// Cached is the number of pulled messages not yet consumed; Bytes
	// their body size; Span the distance of their lowest and highest
	// offsets.
	Cached int
	Bytes  int64
	Span   int64
	// Offset is the in-memory consume offset.
	Offset int64
}

// Queues lists the queues this consumer currently holds.
func (pc *PushConsumer) Queues() []client.MessageQueue {
	qs := pc.heldQueues()
	sortQueues(qs)
	return qs
}

// Stats reports each held queue's cache, which flow control bounds.
func (pc *PushConsumer) Stats() map[client.MessageQueue]QueueStats {
	pc.pqMu.Lock()
	defer pc.pqMu.Unlock()
	out := make(map[client.MessageQueue]QueueStats, len(pc.pqs))
	for mq, pq := range pc.pqs {
		c, b, s := pq.stats()
		off, _ := pc.offsets.get(mq)
		out[mq] = QueueStats{Cached: c, Bytes: b, Span: s, Offset: off}
	}
	return out
}

// routeGrace is how long Start waits for a topic's route to appear: a
// topic a producer has just created by sending reaches the name servers
// a moment after the send is answered (the broker registers it then, as
// Java's does).
const routeGrace = 3 * time.Second

// fetchRouteSoon fetches topic's route, asking again for up to routeGrace
// while the name servers do not know it yet.
func fetchRouteSoon(ctx context.Context, c *client.Client, topic string) error {
	deadline := time.Now().Add(routeGrace)
	for {
		_, err := c.FetchRoute(ctx, topic)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
