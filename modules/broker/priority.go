package broker

import (
	"math"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// Priority topics for 4.x clients (RocketMQ 5.4, RIP-80; see
// core/protocol/priority.go). A 4.x producer sets a message's priority
// with the _SYS_MSG_PRIORITY_ property, and the broker stores it in the
// queue of its level, as RocketMQ's broker does. A 4.x consumer pulls
// each of its queues on its own, so strict priority within the broker is
// kept here, in the pull path: a pull of a lower queue of a priority
// topic gets nothing (it is parked, as on an empty queue) while a higher
// queue still holds messages the group has not been handed.
//
// What the group has been handed is known from its pulls: the offset its
// last pull of a queue asked from, or answered up to, kept in memory,
// with the group's committed offset as the floor (after a restart only
// the committed offset is known until the consumers pull again, which
// they do at once). Only a higher queue someone is consuming holds a
// lower one back: one the group pulled within the last priorityLive, or,
// in the first priorityGrace after the group's first pull of the topic,
// one it has not pulled yet (its consumers are still starting). A queue
// no consumer of the group pulls (a pull consumer assigned only some
// queues, a consumer gone without unregistering) does not stop the rest
// for longer than that.
//
// Nothing of this is stored: it is derived from pulls and committed
// offsets, and the order itself from the queues. Topics without the
// PRIORITY type skip all of it (one bool test per pull).

const (
	// priorityGrace is how long after a group's first pull of a priority
	// topic a higher queue it has not pulled yet holds lower ones back.
	priorityGrace = 5 * time.Second
	// priorityLive is how long after its last pull a higher queue still
	// counts as consumed, past the longest a pull is held (MaxSuspend).
	priorityLive = 10 * time.Second
	// prioBlockedQueue is the hold table key of the pulls parked behind a
	// higher queue: no store wakes it, a drained higher queue does.
	prioBlockedQueue = -1
)

type prioKey struct {
	group, topic string
	queue        int32
}

type prioSeen struct {
	pos int64     // the group has been handed every message below pos
	at  time.Time // its last pull of the queue
}

// prioTable tracks, for priority topics only, how far each group has
// been handed each queue.
type prioTable struct {
	mu    sync.Mutex
	seen  map[prioKey]prioSeen
	first map[prioKey]time.Time // queue -1: the group's first pull of the topic
}

// pulled records a pull of pr's queue at pr.offset and reports whether a
// higher queue holds the pull back.
func (t *prioTable) pulled(b *Broker, pr *pullRequest, now time.Time) bool {
	k := prioKey{pr.group, pr.topic, pr.queueID}
	fk := prioKey{pr.group, pr.topic, -1}
	t.mu.Lock()
	if t.seen == nil {
		t.seen, t.first = map[prioKey]prioSeen{}, map[prioKey]time.Time{}
	}
	// The offset a pull asks from is where its consumer is: taken as
	// is, not as a maximum, so a reset offset or a topic made again
	// counts from where the consumer is now.
	t.seen[k] = prioSeen{pos: pr.offset, at: now}
	first, ok := t.first[fk]
	if !ok {
		first = now
		t.first[fk] = now
	}
	type higher struct {
		q    int32
		seen prioSeen
		ok   bool
	}
	var hs []higher
	for q := pr.queueID + 1; q < pr.prioQueues; q++ {
		s, ok := t.seen[prioKey{pr.group, pr.topic, q}]
		hs = append(hs, higher{q, s, ok})
	}
	t.mu.Unlock()
	live := b.current().MaxSuspend + priorityLive
	for _, h := range hs {
		if h.ok && now.Sub(h.seen.at) > live {
			continue // nobody consumes it now
		}
		if !h.ok && now.Sub(first) > priorityGrace {
			continue // nobody has consumed it since the start
		}
		_, hi, err := b.store.Offsets(store.Queue{Topic: pr.topic, ID: h.q})
		if err != nil {
			continue
		}
		pos := h.seen.pos
		if off, ok := b.offsets.query(pr.group, pr.topic, h.q); ok {
			pos = max(pos, off)
		}
		if pos < hi {
			return true
		}
	}
	return false
}

// handed records that a pull handed the group pr's queue up to next, and
// reports whether that reached the queue's end.
func (t *prioTable) handed(pr *pullRequest, next, maxOffset int64) bool {
	k := prioKey{pr.group, pr.topic, pr.queueID}
	t.mu.Lock()
	if s, ok := t.seen[k]; ok && next > s.pos {
		s.pos = next
		t.seen[k] = s
	}
	t.mu.Unlock()
	return next >= maxOffset
}

// priorityHeld answers a pull held back by a higher queue: parked until a
// higher queue is drained or its deadline passes, or, when it may not be
// parked, "no new message" at its own offset, so the client asks again.
//
// A held pull woken before its deadline (MakeReply) that a higher queue
// still holds back is parked again until the same deadline, not answered:
// a wake-up says only that something may have changed — a drained queue's
// wake-up runs once its answer is written, so it may come after the
// client has pulled on and parked a pull that another higher queue holds
// back, and a message stored in its own queue wakes a pull a higher
// queue holds back too — and a long poll ends with a message or at its
// deadline, as Java's PullRequestHoldService wakes a pull only for what
// it can take.
func (b *Broker) priorityHeld(pr *pullRequest, allowSuspend bool) *remoting.Command {
	if allowSuspend {
		wait, cfg := pr.suspend, b.current()
		if !cfg.LongPolling {
			wait = cfg.ShortPolling
		}
		wait = min(wait, cfg.MaxSuspend)
		if wait > 0 {
			pr.deadline = time.Now().Add(wait)
			b.parkBlocked(pr)
			b.commitAfterPull(pr)
			return nil
		}
	} else if time.Now().Before(pr.deadline) {
		// Woken early (a pull that was never held has no deadline).
		b.parkBlocked(pr)
		return nil
	}
	lo, hi, _ := b.store.Offsets(store.Queue{Topic: pr.topic, ID: pr.queueID})
	resp := remoting.NewResponse(pr.req, remoting.PullNotFound, "held back by a higher priority queue")
	resp.SetExtInt("nextBeginOffset", pr.offset)
	resp.SetExtInt("minOffset", lo)
	resp.SetExtInt("maxOffset", hi)
	resp.SetExt("suggestWhichBrokerId", "0")
	if allowSuspend || pr.sysFlag&pullSuspend == 0 {
		b.commitAfterPull(pr)
	}
	return resp
}

// parkBlocked parks pr, held back by a higher queue, until its deadline.
func (b *Broker) parkBlocked(pr *pullRequest) {
	b.holds.holdBlocked(pr)
	// A higher queue drained between the check and the park would have
	// woken nobody: check again.
	if !b.holds.prio.pulled(b, pr, time.Now()) {
		b.holds.notify(pr.topic, prioBlockedQueue, math.MaxInt64)
	}
}

// holdBlocked parks a pull held back by a higher queue. Unlike hold, a
// message stored in its own queue does not wake it.
func (h *holdTable) holdBlocked(pr *pullRequest) {
	h.mu.Lock()
	k := holdKey{pr.topic, prioBlockedQueue}
	h.q[k] = append(h.q[k], pr)
	h.mu.Unlock()
}

// placePriority puts a 4.x message carrying a priority in the queue of its
// level when topic is a priority topic, as RocketMQ's broker does. A
// priority that does not parse, or on a transactional, delayed or FIFO
// message, is dropped (RocketMQ's broker drops it too); on other topics
// the message keeps the producer's queue and its property.
func (b *Broker) placePriority(topic string, queue, sysFlag int32, props message.Properties) int32 {
	p, ok := props.Priority()
	if !ok || sysFlag&message.TransactionMask == message.TransactionPrepared ||
		props[message.PropertyTransactionPrepared] == "true" || props[propShardingKeyV5] != "" ||
		(props[message.PropertyDelayTimeLevel] != "" && props[message.PropertyDelayTimeLevel] != "0") ||
		props[message.PropertyTimerDeliverMS] != "" || props[message.PropertyTimerDelayMS] != "" ||
		props[message.PropertyStartDeliverTime] != "" || props[propTimerDelaySec] != "" {
		delete(props, message.PropertyPriority)
		return queue
	}
	tc, found := b.topics.get(topic)
	if !found || !tc.IsPriority() {
		return queue
	}
	return protocol.PriorityQueue(p, tc.WriteQueueNums)
}

// Java MessageConst names core/message lacks.
const (
	propShardingKeyV5 = "__SHARDINGKEY" // a 5.x FIFO message's group
	propTimerDelaySec = "TIMER_DELAY_SEC"
)
