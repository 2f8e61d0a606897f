package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
)

// BatchOptions tune automatic batching of SendAsync (see WithAutoBatch).
type BatchOptions struct {
	// MaxMessages bounds the messages of one batch request (default 256).
	MaxMessages int
	// MaxBytes bounds the encoded messages of one batch request (default
	// 256 KiB).
	MaxBytes int
	// MaxInFlight is how many requests of one topic may be in flight
	// before further messages gather into the next batch (default 2).
	// Below it a message is sent at once, so batching adds no delay when
	// the producer is not busy.
	MaxInFlight int
}

func (b BatchOptions) norm() BatchOptions {
	if b.MaxMessages <= 0 {
		b.MaxMessages = 256
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = 256 << 10
	}
	if b.MaxInFlight <= 0 {
		b.MaxInFlight = 2
	}
	return b
}

// WithAutoBatch turns automatic batching of SendAsync on or off (default
// on). With it, async sends of one topic that arrive while MaxInFlight
// requests of that topic are already in flight are gathered into one
// SEND_BATCH_MESSAGE (as RocketMQ 5's autoBatch producer does): the
// broker stores them as separate messages, one after the other in one
// queue, and each SendAsync still gets its own callback with its own
// MsgID, OffsetMsgID and QueueOffset. Messages that cannot share a batch
// go alone as before: delayed, timed and transactional ones, those with a
// SHARDING_KEY (their queue is chosen by key), bodies large enough to be
// compressed, and every message when the producer has a queue selector
// other than the default. A batch is retried as a whole. A message's ctx
// and deadline are checked until its batch is written, not after.
func WithAutoBatch(on bool) Option { return func(o *options) { o.autoBatch = on } }

// WithAutoBatchOptions turns automatic batching on with these limits;
// zero fields keep their defaults.
func WithAutoBatchOptions(b BatchOptions) Option {
	return func(o *options) { o.autoBatch, o.batch = true, b.norm() }
}

// batchEntry is one SendAsync waiting in, or sent with, a batch.
type batchEntry struct {
	ctx      context.Context
	cb       func(context.Context, *client.SendResult, error)
	msg      *client.Message
	uniq     string // set when its batch is encoded
	deadline time.Time
	size     int // encoded size, estimated
}

// topicBatches gathers one topic's batchable async sends.
type topicBatches struct {
	topic    string
	inflight int
	waiting  []*batchEntry // FIFO; waiting[head:] are pending
	head     int
	pumping  bool // a goroutine is sending for this topic
	due      bool // in batcher.due
}

// batcher is a producer's automatic batching.
type batcher struct {
	p      *Producer
	o      BatchOptions
	mu     sync.Mutex
	topics map[string]*topicBatches
	// due lists topics whose next batch flushDue sends (flushing: it runs)
	due      []*topicBatches
	flushing bool
}

func newBatcher(p *Producer, o BatchOptions) *batcher {
	return &batcher{p: p, o: o.norm(), topics: map[string]*topicBatches{}}
}

// batchable reports whether m may share a batch with other messages of
// its topic. The caller has validated m.
func (p *Producer) batchable(m *client.Message) bool {
	if p.batcher == nil || !p.defaultSelector {
		return false
	}
	if p.o.compressOver > 0 && len(m.Body) >= p.o.compressOver {
		return false
	}
	for k, v := range m.Properties {
		switch k {
		case message.PropertyDelayTimeLevel:
			if v != "" && v != "0" {
				return false
			}
		case message.PropertyShardingKey, message.PropertyStartDeliverTime, message.PropertyTimerDeliverMS,
			message.PropertyTimerDelayMS:
			if v != "" {
				return false
			}
		case message.PropertyTransactionPrepared:
			if strings.EqualFold(v, "true") {
				return false
			}
		case client.PropertyMessageType:
			if v == client.ReplyMessageFlag {
				return false // a reply goes alone, as SEND_REPLY_MESSAGE_V2
			}
		}
	}
	return true
}

// add queues e and sends what may be sent now.
func (b *batcher) add(e *batchEntry) {
	b.mu.Lock()
	tb := b.topics[e.msg.Topic]
	if tb == nil {
		tb = &topicBatches{topic: e.msg.Topic}
		b.topics[e.msg.Topic] = tb
	}
	tb.waiting = append(tb.waiting, e)
	if tb.inflight == 0 || tb.pumping {
		// Idle topic: the message goes at once, on the caller's goroutine.
		b.pumpLocked(tb)
		return
	}
	if tb.inflight < b.o.MaxInFlight && !tb.due {
		// A request is in flight but another may start: leave it to a
		// goroutine of its own, which runs once the caller yields, so the
		// sends the caller makes meanwhile (a burst) go in one batch.
		tb.due = true
		b.due = append(b.due, tb)
		if !b.flushing {
			b.flushing = true
			go b.flushDue()
		}
	}
	b.mu.Unlock()
}

// flushDue pumps the topics add left to it.
func (b *batcher) flushDue() {
	b.mu.Lock()
	for len(b.due) > 0 {
		tb := b.due[0]
		b.due[0] = nil
		b.due = b.due[1:]
		tb.due = false
		b.pumpLocked(tb) // unlocks
		b.mu.Lock()
	}
	b.due = b.due[:0:0]
	b.flushing = false
	b.mu.Unlock()
}

// pumpLocked sends batches of tb while fewer than MaxInFlight are in
// flight, and unlocks b.mu. One goroutine at a time pumps a topic; others
// leave their work to it, which it finds when it takes the lock again (no
// recursion when sends fail at once).
func (b *batcher) pumpLocked(tb *topicBatches) {
	if tb.pumping {
		b.mu.Unlock()
		return
	}
	tb.pumping = true
	for {
		var groups [][]*batchEntry
		var expired []*batchEntry
		now := time.Now()
		for tb.inflight < b.o.MaxInFlight && tb.head < len(tb.waiting) {
			g, x := b.takeLocked(tb, now)
			expired = append(expired, x...)
			if len(g) > 0 {
				tb.inflight++
				groups = append(groups, g)
			}
		}
		if tb.head == len(tb.waiting) {
			clear(tb.waiting)
			tb.waiting, tb.head = tb.waiting[:0], 0
		}
		if len(groups) == 0 && len(expired) == 0 {
			tb.pumping = false
			if tb.inflight == 0 && len(tb.waiting) == 0 {
				delete(b.topics, tb.topic)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for _, e := range expired {
			b.p.finishEntry(e, nil, b.expiredErr(e))
		}
		for _, g := range groups {
			b.send(tb, g)
		}
		b.mu.Lock()
	}
}

func (b *batcher) expiredErr(e *batchEntry) error {
	if err := e.ctx.Err(); err != nil {
		return fmt.Errorf("producer: send to %s: %w", e.msg.Topic, err)
	}
	return fmt.Errorf("producer: send to %s: %w: waited for a batch past the send timeout", e.msg.Topic, client.ErrTimeout)
}

// takeLocked removes the next batch from tb's waiting entries, within
// the batch limits, and the entries whose ctx or deadline has ended.
func (b *batcher) takeLocked(tb *topicBatches, now time.Time) (group, expired []*batchEntry) {
	bytes := 0
	for tb.head < len(tb.waiting) && len(group) < b.o.MaxMessages {
		e := tb.waiting[tb.head]
		if e.ctx.Err() != nil || !now.Before(e.deadline) {
			expired = append(expired, e)
			tb.waiting[tb.head] = nil
			tb.head++
			continue
		}
		if len(group) > 0 && bytes+e.size > b.o.MaxBytes {
			break
		}
		bytes += e.size
		group = append(group, e)
		tb.waiting[tb.head] = nil
		tb.head++
	}
	return group, expired
}

// done ends one request of tb: the next batch goes out before the
// callbacks of this one run.
func (b *batcher) done(tb *topicBatches) {
	b.mu.Lock()
	tb.inflight--
	b.pumpLocked(tb)
}

// send sends one group: a lone message as an ordinary send, several as a
// SEND_BATCH_MESSAGE whose answer is split among them.
func (b *batcher) send(tb *topicBatches, g []*batchEntry) {
	p := b.p
	p.wg.Add(1) // the request's own count; every entry holds one too
	if len(g) == 1 {
		e := g[0]
		s := &asyncSend{p: p, ctx: e.ctx, sel: p.o.selector, deadline: e.deadline}
		s.cb = func(ctx context.Context, res *client.SendResult, err error) {
			b.done(tb)
			p.finishEntry(e, res, err)
		}
		if err := p.encode(&s.prep, []*client.Message{e.msg}); err != nil {
			// validated in SendAsync; a message changed since fails alone
			b.done(tb)
			p.wg.Done()
			p.finishEntry(e, nil, err)
			return
		}
		s.pr = &s.prep
		s.next()
		return
	}
	s := &asyncSend{p: p, ctx: p.ctx, sel: p.o.selector, deadline: g[0].deadline}
	for _, e := range g[1:] {
		if e.deadline.Before(s.deadline) {
			s.deadline = e.deadline
		}
	}
	p.prepareBatch(&s.prep, g)
	s.pr = &s.prep
	s.cb = func(ctx context.Context, res *client.SendResult, err error) {
		b.done(tb)
		if err != nil {
			for _, e := range g {
				p.finishEntry(e, nil, err)
			}
			return
		}
		ids := res.OffsetMsgID
		for i, e := range g {
			r := *res
			r.MsgID = e.uniq
			r.QueueOffset = res.QueueOffset + int64(i)
			var id string
			id, ids, _ = strings.Cut(ids, ",")
			r.OffsetMsgID = id
			p.finishEntry(e, &r, nil)
		}
	}
	s.next()
}

// finishEntry calls e's callback and releases its count.
func (p *Producer) finishEntry(e *batchEntry, res *client.SendResult, err error) {
	p.callback(e.ctx, e.cb, res, err)
}

// prepareBatch encodes g as one SEND_BATCH_MESSAGE and records each
// message's UNIQ_KEY in its entry.
func (p *Producer) prepareBatch(pr *prepared, g []*batchEntry) {
	msgs := make([]*client.Message, len(g))
	for i, e := range g {
		msgs[i] = e.msg
	}
	uniqs := make([]string, len(g))
	p.encodeBatch(pr, msgs, uniqs)
	for i, e := range g {
		e.uniq = uniqs[i]
	}
}

// encodeBatch encodes msgs as one SEND_BATCH_MESSAGE, each with its
// UNIQ_KEY (generated where the message has none, without touching the
// caller's map), and stores them in uniqs when it is not nil. The body is
// a vector: the messages' fixed fields and properties are encoded into one
// buffer and their bodies referenced where the caller has them, not
// copied.
func (p *Producer) encodeBatch(pr *prepared, msgs []*client.Message, uniqs []string) {
	size := 0
	for _, m := range msgs {
		size += entrySize(m) - len(m.Body)
	}
	meta := make([]byte, 0, size)
	// offsets into meta: where each message's head and tail end
	cuts := make([]int, 0, 2*len(msgs))
	be := binary.BigEndian
	for i, m := range msgs {
		uniq := m.Properties[message.PropertyUniqKey]
		addUniq := uniq == ""
		if addUniq {
			uniq = client.NewUniqID()
		}
		if uniqs != nil {
			uniqs[i] = uniq
		}
		start := len(meta)
		meta = be.AppendUint32(meta, 0) // total size, set below
		meta = be.AppendUint32(meta, 0) // magic
		meta = be.AppendUint32(meta, 0) // body CRC
		meta = be.AppendUint32(meta, uint32(m.Flag))
		meta = be.AppendUint32(meta, uint32(len(m.Body)))
		cuts = append(cuts, len(meta))
		pl := len(meta)
		meta = be.AppendUint16(meta, 0)
		meta = message.Properties(m.Properties).AppendEncoded(meta)
		if addUniq {
			if len(meta) > pl+2 {
				meta = append(meta, message.PropertySeparator)
			}
			meta = append(meta, message.PropertyUniqKey...)
			meta = append(meta, message.NameValueSeparator)
			meta = append(meta, uniq...)
		}
		be.PutUint16(meta[pl:], uint16(len(meta)-pl-2))
		be.PutUint32(meta[start:], uint32(len(meta)-start+len(m.Body)))
		cuts = append(cuts, len(meta))
	}
	parts := make([][]byte, 0, 3*len(msgs))
	at := 0
	for i, m := range msgs {
		head, tail := cuts[2*i], cuts[2*i+1]
		parts = append(parts, meta[at:head:head], m.Body, meta[head:tail:tail])
		at = tail
	}
	*pr = prepared{topic: msgs[0].Topic, first: msgs[0], batch: true, parts: parts}
	pr.ext = map[string]string{
		"a": p.group, "b": pr.topic, "c": p.o.createTopicKey, "d": p.queueNums,
		"f": "0", "g": p.bornTimestamp(), "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true",
	}
}

// entrySize estimates m's encoded batch item: fixed fields, body,
// properties and the UNIQ_KEY.
func entrySize(m *client.Message) int {
	n := 22 + len(m.Body) + len(message.PropertyUniqKey) + 40
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	return n
}

// sendBatched queues one validated, batchable message.
func (p *Producer) sendBatched(ctx context.Context, cb func(context.Context, *client.SendResult, error), m *client.Message) {
	p.batcher.add(&batchEntry{ctx: ctx, cb: cb, msg: m, deadline: p.deadline(ctx), size: entrySize(m)})
}
