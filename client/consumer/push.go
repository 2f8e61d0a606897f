// Package consumer receives messages: a push consumer (clustering with
// rebalance or broadcasting, concurrent or orderly, long-polling pulls,
// flow control, retries through the broker) and a pull consumer with
// offsets under the caller's control.
//
// The push consumer's files: push.go (the type, its lifecycle and what it
// reports), rebalance.go (which queues it holds), pullloop.go (one
// long-polling loop per held queue), processqueue.go (a held queue's
// cache), taskqueue.go (concurrent consumption by workers), orderly.go
// (orderly consumption and queue locks), sendback.go (failed messages
// back to the broker) and offsets.go (where consume offsets live).
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
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
	offsets, err := newOffsetStore(c, group, o, pc.log)
	if err != nil {
		return nil, err
	}
	pc.offsets = offsets
	return pc, nil
}

// newOffsetStore is where the consume offsets of group live: the broker
// when clustering, a local file (o.offsetDir, by default under the home
// directory, per client id and group) when broadcasting.
func newOffsetStore(c *client.Client, group string, o options, log *slog.Logger) (offsetStore, error) {
	if o.model != Broadcasting {
		return newRemoteOffsets(c, group), nil
	}
	dir := o.offsetDir
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".quiver_offsets", strings.ReplaceAll(c.ID(), ":", "_"), group)
	}
	ls, err := newLocalOffsets(filepath.Join(dir, "offsets.json"), log)
	if err != nil {
		return nil, err
	}
	return ls, nil
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
	go pc.every(pc.o.rebalanceInterval, pc.rebalance, func() { pc.doRebalance(pc.ctx) })
	go pc.every(pc.o.persistInterval, nil, pc.persistOffsets)
	if pc.o.orderly && pc.o.model == Clustering {
		pc.wg.Add(1)
		go pc.every(pc.o.lockInterval, nil, pc.renewLocks)
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

// every runs f every d, and at once when kick fires (nil: never), until
// the consumer stops; run it as a goroutine counted in pc.wg.
func (pc *PushConsumer) every(d time.Duration, kick <-chan struct{}, f func()) {
	defer pc.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-pc.ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		f()
	}
}

// persistOffsets commits the held queues' offsets (without waiting for
// the broker's answers).
func (pc *PushConsumer) persistOffsets() {
	pc.offsets.persist(pc.ctx, pc.heldQueues(), false)
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
