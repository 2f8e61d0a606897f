package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// PullConsumer pulls from queues chosen by the caller, at offsets the
// caller controls (Pull), or polls its share of subscribed topics with
// offsets tracked for it (Subscribe + Poll, like RocketMQ's lite pull
// consumer).
type PullConsumer struct {
	c       *client.Client
	group   string
	o       options
	log     *slog.Logger
	offsets *remoteOffsets

	mu        sync.Mutex
	subs      map[string]Selector
	assigned  []client.MessageQueue
	next      map[client.MessageQueue]int64
	cursor    int
	assignAt  time.Time
	persisted time.Time
	started   bool
	closed    bool
}

// NewPull returns a pull consumer of group.
func NewPull(c *client.Client, group string, opts ...Option) (*PullConsumer, error) {
	if err := protocol.ValidateGroup(group); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	return &PullConsumer{c: c, group: group, o: o, log: c.Logger().With("consumerGroup", group), persisted: time.Now(),
		offsets: newRemoteOffsets(c, group), subs: map[string]Selector{}, next: map[client.MessageQueue]int64{}}, nil
}

// Subscribe adds a topic for Poll; call before Start.
func (p *PullConsumer) Subscribe(topic string, sel Selector) error {
	if err := protocol.ValidateTopic(topic); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	p.mu.Lock()
	p.subs[topic] = sel.norm()
	p.mu.Unlock()
	return nil
}

// Start registers the group with the brokers (heartbeat).
func (p *PullConsumer) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started || p.closed {
		p.mu.Unlock()
		return errors.New("consumer: already started or shut down")
	}
	p.started = true
	topics := make([]string, 0, len(p.subs))
	for t := range p.subs {
		topics = append(topics, t)
	}
	p.mu.Unlock()
	for _, t := range topics {
		if _, err := p.c.FetchRoute(ctx, t); err != nil {
			return fmt.Errorf("consumer: the topic %s route info not found, it may not exist: %w", t, err)
		}
	}
	if err := p.c.RegisterConsumer(p.group, p); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	if err := p.c.SendHeartbeat(ctx); err != nil {
		p.log.Warn("first heartbeat", "err", err)
	}
	return nil
}

// Shutdown commits polled offsets and unregisters the group.
func (p *PullConsumer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closed || !p.started {
		p.closed = true
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	assigned := append([]client.MessageQueue(nil), p.assigned...)
	p.mu.Unlock()
	p.offsets.persist(ctx, assigned, true)
	p.c.UnregisterConsumer(ctx, p.group)
	return nil
}

// ConsumerData implements client.ConsumerHandler.
func (p *PullConsumer) ConsumerData() client.HeartbeatConsumer {
	cd := client.HeartbeatConsumer{GroupName: p.group, ConsumeType: "CONSUME_ACTIVELY", MessageModel: p.o.model.String(),
		ConsumeFromWhere: p.o.from.String(), SubscriptionDataSet: []client.HeartbeatSubscription{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, s := range p.subs {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, client.NewSubscription(t, string(s.Type), s.Expression))
	}
	return cd
}

// SubscribedTopics implements client.ConsumerHandler.
func (p *PullConsumer) SubscribedTopics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.subs))
	for t := range p.subs {
		out = append(out, t)
	}
	return out
}

// IDsChanged implements client.ConsumerHandler: the next Poll reassigns.
func (p *PullConsumer) IDsChanged() {
	p.mu.Lock()
	p.assignAt = time.Time{}
	p.mu.Unlock()
}

// ResetOffset implements client.ConsumerHandler.
func (p *PullConsumer) ResetOffset(topic string, table map[client.MessageQueue]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for mq, off := range table {
		if mq.Topic == topic {
			p.offsets.update(mq, off, false)
			if _, ok := p.next[mq]; ok {
				p.next[mq] = off
			}
		}
	}
}

// Offsets implements client.ConsumerHandler.
func (p *PullConsumer) Offsets(topic string) map[client.MessageQueue]int64 {
	return p.offsets.snapshot(topic)
}

// Queues lists a topic's readable queues.
func (p *PullConsumer) Queues(ctx context.Context, topic string) ([]client.MessageQueue, error) {
	r, err := p.c.FetchRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	qs := append([]client.MessageQueue(nil), r.Subscribe...)
	sortQueues(qs)
	return qs, nil
}

// Pull reads up to max messages of mq from offset. With a deadline on
// ctx the broker may hold the request until a message arrives (long
// polling, at most 20 s and leaving a margin before the deadline);
// without one it answers at once.
func (p *PullConsumer) Pull(ctx context.Context, mq client.MessageQueue, sel Selector, offset int64, max int) (*PullResult, error) {
	return p.pull(ctx, mq, sel, offset, max, nil)
}

// PullEach is Pull handing each message to fn, in order, instead of
// returning them (the result has no Messages): the message, its body and
// its properties are valid only until fn returns, after which their
// memory serves the next message and the next pull. A consumer that
// handles messages as they come and copies what it keeps avoids an
// allocation per message that way.
func (p *PullConsumer) PullEach(ctx context.Context, mq client.MessageQueue, sel Selector, offset int64, max int, fn func(*client.MessageExt)) (*PullResult, error) {
	if fn == nil {
		return nil, errors.New("consumer: PullEach needs a function")
	}
	return p.pull(ctx, mq, sel, offset, max, fn)
}

func (p *PullConsumer) pull(ctx context.Context, mq client.MessageQueue, sel Selector, offset int64, max int, each func(*client.MessageExt)) (*PullResult, error) {
	sel = sel.norm()
	flag := flagSubscription
	var suspend time.Duration
	timeout := p.o.pullTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - 500*time.Millisecond; left > 0 {
			suspend = min(left, p.o.suspendTimeout)
			flag |= flagSuspend
		}
		timeout = time.Until(dl)
	}
	if max <= 0 {
		max = p.o.pullBatchSize
	}
	return pullOnce(ctx, p.c, pullArgs{group: p.group, mq: mq, offset: offset, max: max, sysFlag: flag,
		suspend: suspend, timeout: timeout, sel: sel, each: each})
}

// CommittedOffset returns the group's committed offset of mq, -1 if none.
func (p *PullConsumer) CommittedOffset(ctx context.Context, mq client.MessageQueue) (int64, error) {
	return queryOffset(ctx, p.c, p.group, mq)
}

// CommitOffset stores the group's offset of mq (the next to consume) on
// the broker and waits for the answer.
func (p *PullConsumer) CommitOffset(ctx context.Context, mq client.MessageQueue, offset int64) error {
	p.offsets.update(mq, offset, false)
	return updateOffset(ctx, p.c, p.group, mq, offset, true)
}

// MaxOffset returns mq's next write offset.
func (p *PullConsumer) MaxOffset(ctx context.Context, mq client.MessageQueue) (int64, error) {
	return maxOffset(ctx, p.c, mq)
}

// MinOffset returns mq's lowest offset.
func (p *PullConsumer) MinOffset(ctx context.Context, mq client.MessageQueue) (int64, error) {
	return offsetCall(ctx, p.c, remoting.GetMinOffset, mq, nil)
}

// SearchOffset returns the offset of the first message stored at or
// nearest to t.
func (p *PullConsumer) SearchOffset(ctx context.Context, mq client.MessageQueue, t time.Time) (int64, error) {
	return offsetCall(ctx, p.c, remoting.SearchOffsetByTimestamp, mq, map[string]string{"timestamp": fmt.Sprint(t.UnixMilli())})
}

func (p *PullConsumer) reassign(ctx context.Context) error {
	p.mu.Lock()
	fresh := time.Since(p.assignAt) < p.o.rebalanceInterval
	subs := make(map[string]Selector, len(p.subs))
	for t, s := range p.subs {
		subs[t] = s
	}
	p.mu.Unlock()
	if fresh {
		return nil
	}
	var all []client.MessageQueue
	for t := range subs {
		r, err := p.c.Route(ctx, t)
		if err != nil {
			return err
		}
		qs := append([]client.MessageQueue(nil), r.Subscribe...)
		sortQueues(qs)
		if p.o.model == Broadcasting {
			all = append(all, qs...)
			continue
		}
		ids, err := consumerIDs(ctx, p.c, p.group, r)
		if err != nil {
			return err
		}
		all = append(all, Allocate(qs, ids, p.c.ID())...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := map[client.MessageQueue]bool{}
	for _, q := range all {
		keep[q] = true
	}
	var gone []client.MessageQueue
	for q := range p.next {
		if !keep[q] {
			gone = append(gone, q)
			delete(p.next, q)
		}
	}
	p.assigned, p.assignAt = all, time.Now()
	if len(gone) > 0 {
		p.offsets.persist(ctx, gone, false)
		for _, q := range gone {
			p.offsets.remove(q)
		}
	}
	return nil
}

func (p *PullConsumer) startOffset(ctx context.Context, mq client.MessageQueue) (int64, error) {
	off, err := p.offsets.read(ctx, mq, true)
	if err != nil || off >= 0 {
		return off, err
	}
	switch p.o.from {
	case FromFirstOffset:
		return 0, nil
	case FromTimestamp:
		return p.SearchOffset(ctx, mq, p.o.fromTime)
	}
	return maxOffset(ctx, p.c, mq)
}

// Poll returns the next messages of this consumer's share of the
// subscribed topics (allocated among the group like a push consumer),
// advancing its offsets; they are committed by Commit, periodically by
// later Polls and at Shutdown. It waits until messages arrive or ctx
// ends; at the deadline it returns no messages and no error.
func (p *PullConsumer) Poll(ctx context.Context) ([]*client.MessageExt, error) {
	for {
		if err := p.reassign(ctx); err != nil && ctx.Err() == nil {
			p.log.Debug("poll: assign queues", "err", err)
		}
		p.mu.Lock()
		qs := append([]client.MessageQueue(nil), p.assigned...)
		start := p.cursor
		p.cursor++
		p.mu.Unlock()
		for i := range qs {
			mq := qs[(start+i)%len(qs)]
			p.mu.Lock()
			off, ok := p.next[mq]
			sel := p.subs[mq.Topic]
			p.mu.Unlock()
			if !ok {
				var err error
				if off, err = p.startOffset(ctx, mq); err != nil {
					p.log.Debug("poll: start offset", "queue", mq.String(), "err", err)
					continue
				}
			}
			cctx, cancel := context.WithTimeout(ctx, p.o.pullTimeout)
			res, err := pullOnce(cctx, p.c, pullArgs{group: p.group, mq: mq, offset: off, max: p.o.pullBatchSize,
				sysFlag: flagSubscription, timeout: p.o.pullTimeout, sel: sel})
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				p.log.Debug("poll: pull", "queue", mq.String(), "err", err)
				continue
			}
			p.mu.Lock()
			p.next[mq] = res.NextBeginOffset
			p.mu.Unlock()
			p.offsets.update(mq, res.NextBeginOffset, false)
			if len(res.Messages) > 0 {
				p.mu.Lock()
				due := time.Since(p.persisted) > p.o.persistInterval
				if due {
					p.persisted = time.Now()
				}
				p.mu.Unlock()
				if due {
					p.offsets.persist(ctx, qs, false)
				}
				return res.Messages, nil
			}
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, nil
			}
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Commit stores the offsets Poll has reached.
func (p *PullConsumer) Commit(ctx context.Context) {
	p.mu.Lock()
	qs := append([]client.MessageQueue(nil), p.assigned...)
	p.mu.Unlock()
	p.offsets.persist(ctx, qs, true)
}
