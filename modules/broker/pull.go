package broker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// Pull sysFlag bits.
const (
	pullCommitOffset = 1
	pullSuspend      = 2
	pullSubscription = 4
)

type pullRequest struct {
	group, topic   string
	queueID        int32
	offset         int64
	maxMsgs        int
	sysFlag        int32
	commitOffset   int64
	suspend        time.Duration
	subscription   string
	expressionType string
	subVersion     int64
	matcher        filter.Matcher
	req            *remoting.Command
	peer           *remoting.Peer
	deadline       time.Time
	// b answers a held pull (MakeReply).
	b *Broker
	// prioQueues is the queue count of a priority topic, 0 for any
	// other topic (priority.go).
	prioQueues int32
}

func parsePull(req *remoting.Command) (*pullRequest, error) {
	e := remoting.ReadExt(req)
	pr := &pullRequest{
		group:          e.String("consumerGroup"),
		topic:          e.String("topic"),
		queueID:        e.Int32("queueId"),
		offset:         e.Int64("queueOffset"),
		maxMsgs:        int(e.OptInt32("maxMsgNums", 32)),
		sysFlag:        e.OptInt32("sysFlag", 0),
		commitOffset:   e.OptInt64("commitOffset", -1),
		suspend:        time.Duration(e.OptInt64("suspendTimeoutMillis", 0)) * time.Millisecond,
		subscription:   e.OptString("subscription"),
		expressionType: e.OptString("expressionType"),
		subVersion:     e.OptInt64("subVersion", 0),
		req:            req,
	}
	if e.Err != nil {
		return nil, e.Err
	}
	return pr, nil
}

func (b *Broker) handlePull(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	pr, err := parsePull(req)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	pr.peer, pr.b = p, b
	if e2etrace.On {
		e2etrace.Pull(p.ID, req.Opaque, pr.topic, pr.queueID, pr.offset)
	}
	gc, err := b.groups.getOrCreate(pr.group)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if !gc.ConsumeEnable {
		return remoting.Errorf(req, remoting.NoPermission, fmt.Sprintf("subscription group no permission, %s", pr.group))
	}
	if why := b.groupHeldElsewhere(pr.group); why != "" {
		return remoting.Errorf(req, remoting.NoPermission, why)
	}
	tc, ok := b.topics.view(pr.topic)
	if !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", pr.topic))
	}
	if tc.Perm&protocol.PermRead == 0 {
		return remoting.Errorf(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] pulling message is forbidden", pr.topic))
	}
	if pr.queueID < 0 || pr.queueID >= tc.ReadQueueNums {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d]", pr.queueID, pr.topic, tc.ReadQueueNums))
	}
	if tc.IsPriority() {
		pr.prioQueues = tc.ReadQueueNums
	}
	if pr.sysFlag&pullSubscription != 0 {
		m, err := b.filters.compile(pr.expressionType, pr.subscription)
		if err != nil {
			return remoting.Errorf(req, remoting.SubscriptionParseFailed, fmt.Sprintf("parse the consumer's subscription[%s] failed, group: %s: %v", pr.subscription, pr.group, err))
		}
		pr.matcher = m
	} else {
		sub, ok := b.clients.subscriptionOf(pr.group, pr.topic)
		if !ok {
			return remoting.Errorf(req, remoting.SubscriptionNotExist, fmt.Sprintf("the consumer's subscription not exist, group: %s, topic: %s", pr.group, pr.topic))
		}
		if int64(sub.data.SubVersion) < pr.subVersion {
			return remoting.Errorf(req, remoting.SubscriptionNotLatest, "the consumer's subscription not latest")
		}
		pr.matcher = sub.matcher
	}
	if max := b.current().PullBatchMax; pr.maxMsgs <= 0 || pr.maxMsgs > max {
		pr.maxMsgs = max
	}
	allowSuspend := pr.sysFlag&pullSuspend != 0
	return b.pull(ctx, pr, allowSuspend)
}

// readResults recycles pull reads: a result (and the buffer its records
// live in) goes back once the answer carrying them has been written.
var readResults = sync.Pool{New: func() any { return new(store.ReadResult) }}

// maxPooledRead bounds the buffer a pooled result keeps.
const maxPooledRead = 4 << 20

func putReadResult(res *store.ReadResult) {
	if cap(res.Buffer(0)) <= maxPooledRead {
		clear(res.Records[:cap(res.Records)])
		clear(res.Runs[:cap(res.Runs)])
		readResults.Put(res)
	}
}

// pull runs one read; with allowSuspend an empty answer parks the request.
func (b *Broker) pull(ctx context.Context, pr *pullRequest, allowSuspend bool) *remoting.Command {
	if pr.prioQueues > 0 && b.holds.prio.pulled(b, pr, time.Now()) {
		return b.priorityHeld(pr, allowSuspend) // priority.go
	}
	res := readResults.Get().(*store.ReadResult)
	opts := store.ReadOptions{MaxMessages: pr.maxMsgs, MaxBytes: int(b.current().PullBytesMax)}
	var m filter.Matcher
	if pr.matcher != nil && !matchesAll(pr.matcher) {
		if tm, ok := pr.matcher.(filter.TagsCodeMatcher); ok {
			opts.Filter = tm.MatchTagsCode
		}
		m = pr.matcher
	}
	if protocol.IsRetryTopic(pr.topic) {
		m = &retryMatcher{b: b, group: pr.group, retry: m}
	}
	if m != nil {
		opts.Match = func(rec []byte) bool {
			ext, _, err := message.DecodeStored(rec)
			if err != nil {
				return false
			}
			return m.Match(ext.Properties)
		}
	}
	q := store.Queue{Topic: pr.topic, ID: pr.queueID}
	if err := b.store.Read(ctx, q, pr.offset, opts, res); err != nil {
		putReadResult(res)
		return remoting.Errorf(pr.req, remoting.SystemError, fmt.Sprintf("read %s: %v", q, err))
	}
	// A priority queue handed to its end lets the group's lower queues go
	// on, once this answer is out (woken before, theirs could be written
	// first on a shared connection).
	drained := pr.prioQueues > 0 && res.Status == store.Found &&
		b.holds.prio.handed(pr, res.NextOffset, res.MaxOffset) && pr.queueID > 0
	code := remoting.Success
	switch res.Status {
	case store.Found:
	case store.NoMatchedMessage, store.OffsetFoundNull:
		code = remoting.PullRetryImmediately
	case store.NoMessageInQueue:
		code = remoting.PullNotFound
		if pr.offset != 0 {
			code = remoting.PullOffsetMoved
		}
	case store.OffsetTooSmall, store.OffsetOverflowBadly:
		code = remoting.PullOffsetMoved
	case store.OffsetOverflowOne:
		code = remoting.PullNotFound
	}
	if code == remoting.PullNotFound && allowSuspend {
		wait, cfg := pr.suspend, b.current()
		if !cfg.LongPolling {
			wait = cfg.ShortPolling
		}
		if wait > cfg.MaxSuspend {
			wait = cfg.MaxSuspend
		}
		if wait > 0 {
			putReadResult(res)
			pr.deadline = time.Now().Add(wait)
			if e2etrace.On && pr.peer != nil {
				e2etrace.Held(pr.peer.ID, pr.req.Opaque, pr.topic, pr.queueID, pr.offset)
			}
			b.holds.hold(pr)
			b.commitAfterPull(pr)
			return nil
		}
	}
	resp := remoting.NewResponse(pr.req, code, res.Status.String())
	resp.SetExtInt("nextBeginOffset", res.NextOffset)
	resp.SetExtInt("minOffset", res.MinOffset)
	resp.SetExtInt("maxOffset", res.MaxOffset)
	resp.SetExt("suggestWhichBrokerId", b.suggestBroker(res))
	if code == remoting.Success {
		// Written as a vector, contiguous records as one part: they are
		// not copied again. The buffer is reused once the answer is out.
		resp.BodyParts = res.Records
		if !b.recordsForClient(res.Records) && len(res.Runs) > 0 {
			resp.BodyParts = res.Runs
		}
		b.observePulled(pr.topic, pr.group, res.Records)
		b.observeGroupGet(pr.topic, pr.group, len(res.Records), res.Bytes) // admin_stats.go
		resp.Sent = func() { putReadResult(res) }
		if drained {
			resp.Sent = func() {
				putReadResult(res)
				b.holds.notify(pr.topic, prioBlockedQueue, math.MaxInt64) // priority.go
			}
		}
		if e2etrace.On && pr.peer != nil {
			resp.Sent = e2etrace.Written(resp.Sent, pr.peer.ID, pr.req.Opaque, pr.topic, pr.queueID, pr.offset, res.NextOffset, len(res.Records))
		}
	} else {
		putReadResult(res)
	}
	if allowSuspend || pr.sysFlag&pullSuspend == 0 {
		b.commitAfterPull(pr)
	}
	return resp
}

// retryMatcher filters %RETRY%<group> as RocketMQ's
// ExpressionForRetryMessageFilter does: a message must match the retry
// subscription (retry, nil for all) and the group's subscription of the
// message's original topic (RETRY_TOPIC). When the group has no
// subscription of that topic (or the message names none) the message is
// delivered: no false negatives. One pull uses it from one goroutine.
type retryMatcher struct {
	b     *Broker
	group string
	retry filter.Matcher
	// last original topic looked up, and its matcher (nil: deliver).
	topic string
	m     filter.Matcher
	known bool
}

func (r *retryMatcher) Match(props message.Properties) bool {
	if r.retry != nil && !r.retry.Match(props) {
		return false
	}
	topic := props[message.PropertyRetryTopic]
	if topic == "" {
		return true
	}
	if !r.known || topic != r.topic {
		r.topic, r.m, r.known = topic, nil, true
		if sub, ok := r.b.clients.subscriptionOf(r.group, topic); ok && !matchesAll(sub.matcher) {
			r.m = sub.matcher
		}
	}
	return r.m == nil || r.m.Match(props)
}

func (b *Broker) commitAfterPull(pr *pullRequest) {
	// Broadcasting consumers keep their offsets themselves.
	if pr.sysFlag&pullCommitOffset != 0 && pr.commitOffset >= 0 && b.cfg.ID == 0 && b.clients.messageModel(pr.group) != protocol.Broadcasting {
		b.offsets.commit(pr.group, pr.topic, pr.queueID, pr.commitOffset)
		pr.sysFlag &^= pullCommitOffset
	}
}

// holdTable parks pulls on empty queues until a message arrives or their
// deadline passes.
//
// A stored message wakes the pulls parked on its queue, but they are not
// answered inside the send that stored it: notify queues each on its
// consumer's connection (Peer.ReplyLater), whose writer goroutine reads
// the store (MakeReply) and writes the answer when its turn comes. The
// producer's request costs a map lookup and an append, not a store read
// and a write to another connection (that was 21 % of handleSend at 5,000
// msg/s end to end, issue 24); and a consumer whose socket does not drain
// holds up only its own answers, not every held pull of the broker (issue
// 37): each connection's writer absorbs its own slowness.
type holdTable struct {
	b  *Broker
	mu sync.Mutex
	q  map[holdKey][]*pullRequest
	// prio holds back pulls of priority topics' lower queues (priority.go).
	prio prioTable
}

func newHoldTable(b *Broker) *holdTable {
	return &holdTable{b: b, q: map[holdKey][]*pullRequest{}}
}

// holdKey names a queue; a struct, so notify (once per stored batch)
// looks it up without building a string.
type holdKey struct {
	topic string
	queue int32
}

func (h *holdTable) hold(pr *pullRequest) {
	h.mu.Lock()
	k := holdKey{pr.topic, pr.queueID}
	h.q[k] = append(h.q[k], pr)
	h.mu.Unlock()
	// A message may have landed between the read and the park.
	if _, max, err := h.b.store.Offsets(store.Queue{Topic: pr.topic, ID: pr.queueID}); err == nil && max > pr.offset {
		h.notify(pr.topic, pr.queueID, max)
	}
}

// notify wakes requests on (topic, queue) whose offset is below max. The
// woken ones are queued on their connections under mu (an append each,
// never a wait on a socket), so the list is filtered in place.
func (h *holdTable) notify(topic string, queue int32, max int64) {
	k := holdKey{topic, queue}
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.q[k]
	if len(list) == 0 {
		return
	}
	keep := list[:0]
	for _, pr := range list {
		if pr.offset < max {
			if e2etrace.On && pr.peer != nil {
				e2etrace.Found(pr.peer.ID, pr.req.Opaque, topic, queue, pr.offset, max)
			}
			h.answer(pr)
		} else {
			keep = append(keep, pr)
		}
	}
	clear(list[len(keep):])
	if len(keep) == 0 {
		delete(h.q, k)
	} else {
		h.q[k] = keep
	}
}

// answer queues pr's answer on its connection; the connection's writer
// builds it with MakeReply. It does not wait on the socket.
func (h *holdTable) answer(pr *pullRequest) {
	if err := pr.peer.ReplyLater(pr); err != nil {
		h.b.log.Debug("answer held pull", "remote", pr.peer.RemoteAddr(), "err", err)
	}
}

// MakeReply reads the woken (or expired) held pull's answer, on its
// connection's writer goroutine (remoting.LateReply).
func (pr *pullRequest) MakeReply() *remoting.Command {
	return pr.b.pull(pr.b.ctx, pr, false)
}

var _ remoting.LateReply = (*pullRequest)(nil)

// expire answers requests whose deadline passed.
func (h *holdTable) expire(now time.Time) {
	var due []*pullRequest
	h.mu.Lock()
	for k, list := range h.q {
		keep := list[:0]
		for _, pr := range list {
			if !now.Before(pr.deadline) {
				due = append(due, pr)
			} else {
				keep = append(keep, pr)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(h.q, k)
		} else {
			h.q[k] = keep
		}
	}
	h.mu.Unlock()
	for _, pr := range due {
		h.answer(pr)
	}
}

func (h *holdTable) dropPeer(p *remoting.Peer) {
	h.mu.Lock()
	for k, list := range h.q {
		keep := list[:0]
		for _, pr := range list {
			if pr.peer != p {
				keep = append(keep, pr)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(h.q, k)
		} else {
			h.q[k] = keep
		}
	}
	h.mu.Unlock()
}

// held counts parked requests (tests, metrics).
func (h *holdTable) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.q {
		n += len(l)
	}
	return n
}

// run expires held pulls until ctx ends.
func (h *holdTable) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.expire(now)
		}
	}
}
