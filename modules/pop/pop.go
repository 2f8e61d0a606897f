// Package pop keeps RocketMQ 5-style "pop" consumption state: the state
// behind SimpleConsumer/PushConsumer's ReceiveMessage, AckMessage,
// ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue. It is a
// module next to retry and schedule, used by the gRPC endpoint; the
// remoting handlers do not see it.
//
// # State
//
// Per (group, topic, queue) the service keeps a consume position, next
// (every offset below it was delivered at least once or skipped by the
// filter), and the in-flight set: offsets delivered and not acked, each
// with its invisible-until time, its delivery attempt (1 for the first
// delivery) and the nonce of the receipt handle last issued for it.
//
// Receive first redelivers in-flight messages whose invisible time has
// passed (attempt+1, new nonce, so the old handle is dead), then reads new
// messages from next through the caller's filter. Ack removes an in-flight
// entry; ChangeInvisible sets a new invisible-until and a new nonce;
// ForwardToDLQ stores the message in %DLQ%<group> and then removes it. The
// caller applies the client's retry policy: it sees each delivery's
// attempt and backs off with ChangeInvisible, and forwards to the DLQ once
// attempts run out.
//
// ReceiveFIFO serves FIFO groups: a queue hands out one batch at a time,
// in queue order, and nothing newer until that batch is acked (or
// redelivered whole, in order, once its invisible time passes); as the
// producer side keeps a message group in one queue, each message group is
// consumed in order.
//
// A priority topic (message.type=PRIORITY, one level per queue) is served
// highest queue first, each queue's redeliveries before its new messages:
// a retried message keeps its level. The order comes from the queues, so
// nothing about it is stored.
//
// A receipt handle is an HMAC over group, topic, queue, offset, nonce and
// attempt under a per-data-directory secret (handle.go): it survives a
// restart, cannot be guessed, and is refused for another group or topic.
//
// # Durability
//
// Every change is a record in a journal under <dataDir>/pop, fsynced before
// the call that made it returns (Receive does not hand out a message, Ack
// does not answer, until its record is durable; concurrent calls share
// one fsync, see journal), so after a crash or
// restart an acked message is never redelivered and an unacked one is
// delivered again once its invisible time has passed. The journal is
// independent of the storage engine, so it works on commitlog and pebble
// alike. When it grows past Config.CompactEvery records, a snapshot
// (state.json, written with core/durable) replaces it. The lowest
// unacknowledged offset of each queue is also committed to the broker's
// offset table, so admin tools show the group's progress and a group moved
// from 4.x clients starts where they left off.
package pop

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// Errors callers map to client answers.
var (
	ErrTopicNotFound = errors.New("pop: topic not found")
	ErrBadArgument   = errors.New("pop: bad argument")
	ErrClosed        = errors.New("pop: closed")
)

// MaxInvisible bounds an invisible duration.
const MaxInvisible = 24 * time.Hour

// Config tunes the service.
type Config struct {
	// CompactEvery is how many journal records trigger a snapshot.
	CompactEvery int
	// MaxBatch bounds the messages one Receive returns.
	MaxBatch int
}

// NewConfig returns the defaults.
func NewConfig() *Config { return &Config{CompactEvery: 50000, MaxBatch: 32} }

// Validate checks c.
func (c *Config) Validate() error {
	if c.CompactEvery < 1 || c.MaxBatch < 1 {
		return fmt.Errorf("pop: compact_every and max_batch must be positive")
	}
	return nil
}

// Received is one delivered message.
type Received struct {
	Message *message.Ext
	// Handle acks it, changes its invisibility or forwards it to the DLQ.
	Handle string
	Queue  int32
	Offset int64
	// Attempt is 1 on the first delivery, +1 at each redelivery.
	Attempt        int32
	InvisibleUntil time.Time
}

type qkey struct {
	group, topic string
	queue        int32
}

type entry struct {
	attempt int32
	until   int64 // unix ms
	nonce   uint64
}

type queueState struct {
	next     int64
	inflight map[int64]*entry
}

func (q *queueState) low() int64 {
	low := q.next
	for off := range q.inflight {
		low = min(low, off)
	}
	return low
}

// Service is the pop state of one broker.
type Service struct {
	cfg *Config
	b   *broker.Broker
	log *slog.Logger
	key []byte
	now func() time.Time

	mu     sync.Mutex
	j      *journal
	queues map[qkey]*queueState
	rr     uint32 // rotates the first queue Receive looks at
	closed bool

	sigMu sync.Mutex
	// sigs holds, for each topic a ReceiveWait is waiting on, a channel
	// closed (and dropped) when a message of that topic is stored: a store
	// wakes only the receives of its own topic, not every waiting one.
	sigs map[string]chan struct{}
}

// New opens the pop state under b's data directory.
func New(cfg *Config, b *broker.Broker) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b.DataDir() == "" {
		return nil, errors.New("pop: the broker has no data directory")
	}
	return open(cfg, b, filepath.Join(b.DataDir(), "pop"), nil)
}

// open opens the state in dir; wrap, when set, wraps the journal's file
// (tests inject failures).
func open(cfg *Config, b *broker.Broker, dir string, wrap func(syncFile) syncFile) (*Service, error) {
	s := newService(cfg, b)
	if err := s.openAt(dir, wrap); err != nil {
		return nil, err
	}
	return s, nil
}

// newService is the state before its files are open (openAt).
func newService(cfg *Config, b *broker.Broker) *Service {
	return &Service{cfg: cfg, b: b, log: b.Logger().With("component", "pop"), now: time.Now,
		queues: map[qkey]*queueState{}, sigs: map[string]chan struct{}{}}
}

// openAt opens the secret and the journal (whose goroutine Close stops)
// in dir and starts following the broker's stored messages.
func (s *Service) openAt(dir string, wrap func(syncFile) syncFile) error {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pop: %w", err)
	}
	key, err := loadSecret(dir)
	if err != nil {
		return err
	}
	s.key = key
	j, err := openJournal(dir, s.log, wrap, s.apply, s.load)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.j = j
	s.mu.Unlock()
	s.b.AddStoredListener(s.stored)
	return nil
}

// Close closes the journal; later calls answer ErrClosed.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.j == nil { // never opened (its app did not start)
		return nil
	}
	return s.j.close()
}

func (s *Service) stored(msgs []*message.Ext, _ []store.Position) {
	s.sigMu.Lock()
	defer s.sigMu.Unlock()
	if len(s.sigs) == 0 {
		return
	}
	for _, m := range msgs {
		s.wakeLocked(m.Topic)
	}
}

// wake wakes the receives waiting on topic (ReceiveWait).
func (s *Service) wake(topic string) {
	s.sigMu.Lock()
	s.wakeLocked(topic)
	s.sigMu.Unlock()
}

func (s *Service) wakeLocked(topic string) {
	if c, ok := s.sigs[topic]; ok {
		close(c)
		delete(s.sigs, topic)
	}
}

// signal returns the channel closed when a message of topic is stored.
func (s *Service) signal(topic string) <-chan struct{} {
	s.sigMu.Lock()
	defer s.sigMu.Unlock()
	c, ok := s.sigs[topic]
	if !ok {
		c = make(chan struct{})
		s.sigs[topic] = c
	}
	return c
}

func (s *Service) load(snap *snapshot) {
	for _, q := range snap.Queues {
		qs := &queueState{next: q.Next, inflight: map[int64]*entry{}}
		for _, e := range q.InFlight {
			qs.inflight[e.Offset] = &entry{attempt: e.Attempt, until: e.Until, nonce: e.Nonce}
		}
		s.queues[qkey{q.Group, q.Topic, q.Queue}] = qs
	}
}

// apply changes the in-memory state by one record (journal replay and
// after each durable write).
func (s *Service) apply(r record) {
	k := qkey{r.Group, r.Topic, r.Queue}
	qs := s.queues[k]
	if qs == nil {
		qs = &queueState{inflight: map[int64]*entry{}}
		s.queues[k] = qs
	}
	switch r.Kind {
	case kindPop:
		qs.inflight[r.Offset] = &entry{attempt: r.Attempt, until: r.Until, nonce: r.Nonce}
		qs.next = max(qs.next, r.Next)
	case kindAdv:
		qs.next = max(qs.next, r.Next)
	case kindRst:
		qs.next = r.Next
		for off := range qs.inflight {
			if off >= r.Next {
				delete(qs.inflight, off)
			}
		}
	case kindAck:
		delete(qs.inflight, r.Offset)
	case kindInv:
		if e := qs.inflight[r.Offset]; e != nil {
			e.until, e.nonce = r.Until, r.Nonce
		}
	}
}

func (s *Service) snapshotLocked() *snapshot {
	snap := &snapshot{}
	for k, qs := range s.queues {
		sq := snapQueue{Group: k.group, Topic: k.topic, Queue: k.queue, Next: qs.next}
		for off, e := range qs.inflight {
			sq.InFlight = append(sq.InFlight, snapEntry{Offset: off, Attempt: e.attempt, Until: e.until, Nonce: e.nonce})
		}
		snap.Queues = append(snap.Queues, sq)
	}
	return snap
}

// commitLocked appends recs to the journal and applies them, in the same
// order, and returns the batch the caller waits for, after releasing
// s.mu, before it answers. When the journal has grown it hands the
// flusher a snapshot to replace it with.
//
// The state changes before the records are durable, so later calls see
// them at once; they cannot answer before these records are durable
// either (their own records come later in the same file, and a call that
// appends nothing waits on journal.barrier). If the write fails, every
// later write fails too, until a restart replays what is durable.
func (s *Service) commitLocked(recs []record) (*batch, error) {
	b, err := s.j.append(recs)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		s.apply(r)
	}
	if s.j.n >= s.cfg.CompactEvery {
		s.j.compactLater(s.snapshotLocked())
	}
	return b, nil
}

func nonce() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return binary.LittleEndian.Uint64(b[:])
}

func checkNames(group, topic string) error {
	if group == "" || topic == "" || len(group) > 255 || len(topic) > 255 {
		return fmt.Errorf("%w: group and topic must be 1-255 characters (group %q, topic %q)", ErrBadArgument, group, topic)
	}
	// NUL separates the names in a handle's MAC input.
	if strings.IndexByte(group, 0) >= 0 || strings.IndexByte(topic, 0) >= 0 {
		return fmt.Errorf("%w: NUL in group %q or topic %q", ErrBadArgument, group, topic)
	}
	return nil
}

// queueLocked returns the state of (group, topic, queue), starting a new
// one at the broker's committed offset for the group, else at the queue's
// first message.
func (s *Service) queueLocked(k qkey) *queueState {
	if qs := s.queues[k]; qs != nil {
		return qs
	}
	qs := &queueState{inflight: map[int64]*entry{}}
	if off, ok := s.b.QueryOffset(k.group, k.topic, k.queue); ok && off >= 0 {
		qs.next = off
	} else if lo, _, err := s.b.Store().Offsets(store.Queue{Topic: k.topic, ID: k.queue}); err == nil {
		qs.next = lo
	}
	s.queues[k] = qs
	return qs
}

// Receive delivers up to max messages of topic visible to group now:
// in-flight messages whose invisible time passed first (redelivered with
// attempt+1), then new ones matching m (nil matches all). Each becomes
// invisible for the invisible duration. It returns an empty slice, not an
// error, when nothing is visible; ReceiveWait waits.
func (s *Service) Receive(ctx context.Context, group, topic string, m filter.Matcher, maxMsgs int, invisible time.Duration) ([]Received, error) {
	return s.receive(ctx, group, topic, m, maxMsgs, invisible, false)
}

// ReceiveFIFO is Receive for a FIFO consumer group: a queue delivers
// nothing new while messages it delivered are in flight, and when their
// invisible time passes they are redelivered together, in queue order, so
// the messages of one message group (kept in one queue by the producer
// side) are consumed in order. A message acked, or forwarded to the DLQ,
// lets the next one through once the rest of its batch is done.
func (s *Service) ReceiveFIFO(ctx context.Context, group, topic string, m filter.Matcher, maxMsgs int, invisible time.Duration) ([]Received, error) {
	return s.receive(ctx, group, topic, m, maxMsgs, invisible, true)
}

func (s *Service) receive(ctx context.Context, group, topic string, m filter.Matcher, maxMsgs int, invisible time.Duration, fifo bool) ([]Received, error) {
	if err := checkNames(group, topic); err != nil {
		return nil, err
	}
	if maxMsgs < 1 {
		return nil, fmt.Errorf("%w: max messages %d", ErrBadArgument, maxMsgs)
	}
	maxMsgs = min(maxMsgs, s.cfg.MaxBatch)
	if invisible <= 0 || invisible > MaxInvisible {
		return nil, fmt.Errorf("%w: invisible duration %v (want (0, %v])", ErrBadArgument, invisible, MaxInvisible)
	}
	tc, found := s.b.TopicConfig(topic)
	if !found || tc.ReadQueueNums <= 0 {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	n := tc.ReadQueueNums
	// A priority topic is served highest queue first; a FIFO group keeps
	// its queue order instead.
	prio := tc.IsPriority() && !fifo
	s.mu.Lock()
	out, b, err := s.receiveLocked(ctx, group, topic, m, n, maxMsgs, invisible, fifo, prio)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.j.wait(ctx, b); err != nil {
		return nil, err
	}
	return out, nil
}

// receiveLocked collects a receive round and commits its records; the
// caller waits for the batch it returns. Called with s.mu held.
func (s *Service) receiveLocked(ctx context.Context, group, topic string, m filter.Matcher, n int32, maxMsgs int, invisible time.Duration, fifo, prio bool) ([]Received, *batch, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	now := s.now()
	rd := &popRound{
		group: group, topic: topic, n: n, start: s.rr, fifo: fifo, max: maxMsgs,
		now: now.UnixMilli(), until: now.Add(invisible).UnixMilli(),
		redelivered: map[int32]bool{}, maxAttempts: s.maxAttempts(group),
	}
	s.rr++
	var res store.ReadResult
	opts := broker.FilterReadOptions(m)
	if prio {
		// A priority topic: one queue per level, the highest first, and
		// in each its redeliveries before its new messages, so a retried
		// message keeps its level (it is redelivered from its own queue,
		// not from a shared retry queue behind every lower level).
		for q := n - 1; q >= 0 && !rd.full(); q-- {
			if err := s.redeliverQueueLocked(ctx, rd, q); err != nil {
				return nil, nil, err
			}
			if err := s.receiveQueueLocked(ctx, rd, q, &res, opts); err != nil {
				return nil, nil, err
			}
		}
	} else {
		// Redeliveries first, across queues; then new messages.
		for i := int32(0); i < rd.n && !rd.full(); i++ {
			if err := s.redeliverQueueLocked(ctx, rd, rd.queue(i)); err != nil {
				return nil, nil, err
			}
		}
		for i := int32(0); i < rd.n && !rd.full(); i++ {
			if err := s.receiveQueueLocked(ctx, rd, rd.queue(i), &res, opts); err != nil {
				return nil, nil, err
			}
		}
	}
	b, err := s.commitLocked(rd.recs)
	if err != nil {
		return nil, nil, err
	}
	s.commitOffsets(rd.recs)
	return rd.out, b, nil
}

// popRound is one receive call: its arguments, and the journal records
// and messages it has collected so far.
type popRound struct {
	group, topic string
	n            int32  // the topic's queue count
	start        uint32 // the first queue visited (round robin over calls)
	fifo         bool
	max          int   // messages to receive at most
	now, until   int64 // epoch ms: now, and the end of the invisible time
	recs         []record
	out          []Received
	redelivered  map[int32]bool // queues with a redelivery in this round
	maxAttempts  int32          // the group's delivery attempts
}

// queue is the i-th queue the round visits.
func (rd *popRound) queue(i int32) int32 { return int32((uint32(i) + rd.start) % uint32(rd.n)) }

func (rd *popRound) full() bool { return len(rd.out) >= rd.max }

// redeliverQueueLocked collects queue q's in-flight messages whose
// invisible time has passed (in FIFO mode only the queue's whole batch,
// in queue order); those out of attempts go to the dead-letter queue
// instead, and those deleted by retention are acked. Called with s.mu
// held.
func (s *Service) redeliverQueueLocked(ctx context.Context, rd *popRound, q int32) error {
	k := qkey{rd.group, rd.topic, q}
	qs := s.queueLocked(k)
	offs := make([]int64, 0, len(qs.inflight))
	for off, e := range qs.inflight {
		if e.until <= rd.now {
			offs = append(offs, off)
		}
	}
	if rd.fifo && len(offs) < len(qs.inflight) {
		return nil // part of the queue's batch is still invisible
	}
	slices.Sort(offs)
	for _, off := range offs {
		if rd.full() {
			break
		}
		msg, err := s.readOne(ctx, store.Queue{Topic: rd.topic, ID: q}, off)
		if err != nil {
			return err
		}
		if msg == nil { // deleted by retention: nothing to redeliver
			rd.recs = append(rd.recs, record{Kind: kindAck, Group: rd.group, Topic: rd.topic, Queue: q, Offset: off})
			continue
		}
		e := qs.inflight[off]
		if e.attempt >= rd.maxAttempts {
			// Its attempts are used up: the dead-letter queue, not a
			// delivery, as RocketMQ 5 does past retryMaxTimes.
			ack, err := s.deadLetterLocked(ctx, k, off, e.attempt, msg)
			if err != nil {
				return err
			}
			rd.recs = append(rd.recs, ack)
			continue
		}
		rd.redelivered[q] = true
		r := record{Kind: kindPop, Group: rd.group, Topic: rd.topic, Queue: q, Offset: off, Attempt: e.attempt + 1, Until: rd.until, Nonce: nonce()}
		rd.recs = append(rd.recs, r)
		rd.out = append(rd.out, s.received(msg, r))
	}
	return nil
}

// receiveQueueLocked collects messages past queue q's position that the
// filter in opts matches (in FIFO mode only when the queue has nothing in
// flight), and records how far the queue's position moves. res is the
// round's reusable read result. Called with s.mu held.
func (s *Service) receiveQueueLocked(ctx context.Context, rd *popRound, q int32, res *store.ReadResult, opts store.ReadOptions) error {
	if rd.full() {
		return nil
	}
	qs := s.queueLocked(qkey{rd.group, rd.topic, q})
	if rd.fifo && (len(qs.inflight) > 0 || rd.redelivered[q]) {
		return nil
	}
	sq := store.Queue{Topic: rd.topic, ID: q}
	lo, hi, err := s.b.Store().Offsets(sq)
	if err != nil {
		return fmt.Errorf("pop: offsets of %s: %w", sq, err)
	}
	if qs.next > hi {
		// The queue is shorter than the position (topic deleted and
		// made again, or a replica's log truncated): start over at
		// its end, as Java's pop corrects an overflowing offset.
		rd.recs = append(rd.recs, record{Kind: kindRst, Group: rd.group, Topic: rd.topic, Queue: q, Next: hi})
		return nil
	}
	from := max(qs.next, lo)
	if from >= hi {
		return nil
	}
	res.Reset()
	opts.MaxMessages = rd.max - len(rd.out)
	if err := s.b.Store().Read(ctx, sq, from, opts, res); err != nil {
		return fmt.Errorf("pop: read %s at %d: %w", sq, from, err)
	}
	reached := qs.next
	for ri, raw := range res.Records {
		msg, _, err := message.DecodeStored(slices.Clone(raw)) // raw is reused by the next Read
		if err != nil {
			s.log.Warn("skip malformed record", "queue", sq, "err", err)
			continue
		}
		off := msg.QueueOffset
		if ri < len(res.QueueOffsets) {
			off = res.QueueOffsets[ri]
		}
		// Each record raises next only past its own offset, so any
		// prefix of the batch (a torn journal tail) is consistent.
		r := record{Kind: kindPop, Group: rd.group, Topic: rd.topic, Queue: q, Offset: off, Attempt: 1, Until: rd.until, Nonce: nonce(), Next: off + 1}
		rd.recs = append(rd.recs, r)
		rd.out = append(rd.out, s.received(msg, r))
		reached = max(reached, off+1)
	}
	if res.NextOffset > reached {
		rd.recs = append(rd.recs, record{Kind: kindAdv, Group: rd.group, Topic: rd.topic, Queue: q, Next: res.NextOffset})
	}
	return nil
}

func (s *Service) received(msg *message.Ext, r record) Received {
	return Received{
		Message: msg, Queue: r.Queue, Offset: r.Offset, Attempt: r.Attempt,
		InvisibleUntil: time.UnixMilli(r.Until),
		Handle:         encodeHandle(s.key, r.Group, r.Topic, handle{queue: r.Queue, offset: r.Offset, nonce: r.Nonce, attempt: r.Attempt}),
	}
}

// readOne returns the message at off, or nil when the queue no longer
// holds it.
func (s *Service) readOne(ctx context.Context, q store.Queue, off int64) (*message.Ext, error) {
	var res store.ReadResult
	if err := s.b.Store().Read(ctx, q, off, store.ReadOptions{MaxMessages: 1}, &res); err != nil {
		if errors.Is(err, store.ErrOffsetOutOfRange) || errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("pop: read %s at %d: %w", q, off, err)
	}
	if len(res.Records) == 0 || (len(res.QueueOffsets) > 0 && res.QueueOffsets[0] != off) {
		return nil, nil
	}
	msg, _, err := message.DecodeStored(slices.Clone(res.Records[0]))
	if err != nil {
		return nil, fmt.Errorf("pop: decode %s at %d: %w", q, off, err)
	}
	return msg, nil
}

// commitOffsets publishes the lowest unacknowledged offset of each queue
// recs touched to the broker's offset table. Called with s.mu held.
func (s *Service) commitOffsets(recs []record) {
	seen := map[qkey]bool{}
	for _, r := range recs {
		k := qkey{r.Group, r.Topic, r.Queue}
		if seen[k] {
			continue
		}
		seen[k] = true
		if qs := s.queues[k]; qs != nil {
			s.b.CommitOffset(k.group, k.topic, k.queue, qs.low())
		}
	}
}

// ReceiveWait is Receive that, when nothing is visible, waits until a
// message is stored, an in-flight message's invisible time passes, wait
// elapses or ctx ends, and tries again (long polling).
func (s *Service) ReceiveWait(ctx context.Context, group, topic string, m filter.Matcher, maxMsgs int, invisible, wait time.Duration) ([]Received, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		sig := s.signal(topic)
		out, err := s.Receive(ctx, group, topic, m, maxMsgs, invisible)
		if err != nil || len(out) > 0 {
			return out, err
		}
		var expiry <-chan time.Time
		var t *time.Timer
		if d, ok := s.nextExpiry(group, topic); ok {
			t = time.NewTimer(d)
			expiry = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-sig:
		case <-expiry:
		case <-deadline.C:
			stop()
			return []Received{}, nil
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
		stop()
	}
}

// nextExpiry is how long until the first in-flight message of group and
// topic becomes visible again.
func (s *Service) nextExpiry(group, topic string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, ok := int64(0), false
	for k, qs := range s.queues {
		if k.group != group || k.topic != topic {
			continue
		}
		for _, e := range qs.inflight {
			if !ok || e.until < first {
				first, ok = e.until, true
			}
		}
	}
	if !ok {
		return 0, false
	}
	return max(time.Duration(first-s.now().UnixMilli())*time.Millisecond, time.Millisecond), true
}

// lookupLocked validates h for group and topic and returns its live entry.
// gone reports an entry already removed (acked before): not an error for
// Ack, which is idempotent.
func (s *Service) lookupLocked(group, topic, h string) (k qkey, hd handle, e *entry, err error) {
	if s.closed {
		return k, hd, nil, ErrClosed
	}
	if err := checkNames(group, topic); err != nil {
		return k, hd, nil, err
	}
	hd, err = decodeHandle(s.key, group, topic, h)
	if err != nil {
		return k, hd, nil, err
	}
	k = qkey{group, topic, hd.queue}
	qs := s.queues[k]
	if qs == nil {
		return k, hd, nil, nil
	}
	e = qs.inflight[hd.offset]
	if e != nil && e.nonce != hd.nonce {
		return k, hd, nil, fmt.Errorf("%w: message %s/%d at %d was redelivered or its invisibility changed; use the newest handle", ErrInvalidHandle, topic, hd.queue, hd.offset)
	}
	return k, hd, e, nil
}

// Ack acknowledges the delivery handle names: the message is not delivered
// to group again. Acking an already acked message succeeds; a handle
// replaced by a redelivery or ChangeInvisible gets ErrInvalidHandle.
func (s *Service) Ack(ctx context.Context, group, topic, h string) error {
	return s.AckMany(ctx, group, topic, []string{h})[0]
}

// AckMany acknowledges several handles of one group and topic, as one
// 5.x AckMessage request carries them: their records are appended to the
// journal together, so they share one fsync instead of waiting for one
// each. errs[i] is Ack's answer for hs[i].
func (s *Service) AckMany(ctx context.Context, group, topic string, hs []string) []error {
	errs := make([]error, len(hs))
	var recs []record
	var acking []int
	seen := make(map[string]bool, len(hs))
	s.mu.Lock()
	for i, h := range hs {
		if seen[h] {
			continue // acked by this call already: answered with it
		}
		k, hd, e, err := s.lookupLocked(group, topic, h)
		if err != nil || e == nil {
			errs[i] = err
			continue
		}
		seen[h] = true
		acking = append(acking, i)
		recs = append(recs, record{Kind: kindAck, Group: k.group, Topic: k.topic, Queue: k.queue, Offset: hd.offset})
	}
	var cerr error
	if len(recs) > 0 {
		if _, cerr = s.commitLocked(recs); cerr == nil {
			s.commitOffsets(recs)
		}
	}
	// One barrier covers this call's records and whatever the answers from
	// the state rest on.
	bar := s.j.barrier()
	s.mu.Unlock()
	if cerr != nil {
		for _, i := range acking {
			errs[i] = cerr // not appended: nothing to wait for
		}
	}
	for i := range hs {
		if errors.Is(errs[i], ErrClosed) || (cerr != nil && errs[i] != nil) {
			continue
		}
		errs[i] = s.answer(ctx, bar, errs[i])
	}
	return errs
}

// settledLocked is for an answer given from the state without a journal
// record (err, or success for an ack of an acked message): it returns the
// batch that makes everything that answer may rest on durable.
func (s *Service) settledLocked(err error) (*batch, error) {
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	return s.j.barrier(), err
}

// answer waits for b, then answers err; a journal failure wins.
func (s *Service) answer(ctx context.Context, b *batch, err error) error {
	if werr := s.j.wait(ctx, b); werr != nil {
		return werr
	}
	return err
}

// ChangeInvisible makes the message handle names invisible for d from now
// (0 makes it visible at once) and returns the handle that replaces h.
// When that is sooner than before, it wakes the receives waiting on the
// topic: they wait for the first invisible time they saw to pass (as a
// consumer's nack, a ChangeInvisible with its retry backoff, would
// otherwise be redelivered only when a receive's long poll ended).
func (s *Service) ChangeInvisible(ctx context.Context, group, topic, h string, d time.Duration) (string, error) {
	if d < 0 || d > MaxInvisible {
		return "", fmt.Errorf("%w: invisible duration %v (want [0, %v])", ErrBadArgument, d, MaxInvisible)
	}
	s.mu.Lock()
	nh, sooner, b, err := s.changeInvisibleLocked(group, topic, h, d)
	s.mu.Unlock()
	if err := s.answer(ctx, b, err); err != nil {
		return "", err
	}
	if sooner {
		s.wake(topic)
	}
	return nh, nil
}

// changeInvisibleLocked commits the new invisible time; sooner reports
// that it is before the old one. Called with s.mu held.
func (s *Service) changeInvisibleLocked(group, topic, h string, d time.Duration) (nh string, sooner bool, b *batch, err error) {
	k, hd, e, err := s.lookupLocked(group, topic, h)
	if err == nil && e == nil {
		err = fmt.Errorf("%w: message %s/%d at %d was acked", ErrInvalidHandle, topic, hd.queue, hd.offset)
	}
	if err != nil {
		b, err := s.settledLocked(err)
		return "", false, b, err
	}
	r := record{Kind: kindInv, Group: k.group, Topic: k.topic, Queue: k.queue, Offset: hd.offset, Until: s.now().Add(d).UnixMilli(), Nonce: nonce()}
	sooner = r.Until < e.until
	b, err = s.commitLocked([]record{r})
	if err != nil {
		return "", false, nil, err
	}
	return encodeHandle(s.key, group, topic, handle{queue: k.queue, offset: hd.offset, nonce: r.Nonce, attempt: e.attempt}), sooner, b, nil
}

// ForwardToDLQ stores the message handle names in %DLQ%<group> (with its
// delivery attempts as reconsume times and the original topic in
// RETRY_TOPIC) and acknowledges it.
func (s *Service) ForwardToDLQ(ctx context.Context, group, topic, h string) error {
	s.mu.Lock()
	b, err := s.forwardLocked(ctx, group, topic, h)
	s.mu.Unlock()
	return s.answer(ctx, b, err)
}

func (s *Service) forwardLocked(ctx context.Context, group, topic, h string) (*batch, error) {
	k, hd, e, err := s.lookupLocked(group, topic, h)
	if err == nil && e == nil {
		err = fmt.Errorf("%w: message %s/%d at %d was acked", ErrInvalidHandle, topic, hd.queue, hd.offset)
	}
	if err != nil {
		return s.settledLocked(err)
	}
	msg, err := s.readOne(ctx, store.Queue{Topic: topic, ID: hd.queue}, hd.offset)
	if err != nil {
		return nil, err
	}
	ack, err := s.deadLetterLocked(ctx, k, hd.offset, e.attempt, msg)
	if err != nil {
		return nil, err
	}
	recs := []record{ack}
	b, err := s.commitLocked(recs)
	if err != nil {
		return nil, err
	}
	s.commitOffsets(recs)
	return b, nil
}

// deadLetterLocked stores msg (the message at offset of k's queue; nil when
// retention removed it) in %DLQ%<group>, with its delivery attempts as
// reconsume times and the original topic in RETRY_TOPIC, and returns the
// ack record the caller commits.
func (s *Service) deadLetterLocked(ctx context.Context, k qkey, offset int64, attempts int32, msg *message.Ext) (record, error) {
	ack := record{Kind: kindAck, Group: k.group, Topic: k.topic, Queue: k.queue, Offset: offset}
	if msg == nil {
		return ack, nil
	}
	dlq, err := s.b.EnsureDLQ(k.group)
	if err != nil {
		return record{}, fmt.Errorf("pop: dlq of %s: %w", k.group, err)
	}
	props := msg.Properties.Clone()
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = msg.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = msg.UniqKey()
	}
	delete(props, message.PropertyDelayTimeLevel)
	dm := &message.Ext{
		Message: message.Message{Topic: dlq, Flag: msg.Flag, Properties: props, Body: msg.Body},
		SysFlag: msg.SysFlag, BornTimestamp: msg.BornTimestamp, BornHost: msg.BornHost,
		ReconsumeTimes: attempts,
	}
	if _, err := s.b.Put(ctx, []*message.Ext{dm}); err != nil {
		return record{}, fmt.Errorf("pop: forward to %s: %w", dlq, err)
	}
	s.log.Info("message moved to the dead-letter queue: delivery attempts used up", "group", k.group, "topic", k.topic, "queue", k.queue, "offset", offset, "attempts", attempts, "dlq", dlq)
	return ack, nil
}

// maxAttempts is how many deliveries a message of group gets before it goes
// to the dead-letter queue: the subscription group's retryMaxTimes + 1
// (RocketMQ 5's retry policy; 17 by default).
func (s *Service) maxAttempts(group string) int32 {
	gc, err := s.b.GroupConfig(group)
	if err != nil {
		return broker.NewRetryPolicyDefault().MaxAttempts
	}
	return gc.RetryPolicy().MaxAttempts
}

// InFlight reports how many messages of group and topic are delivered and
// not acked.
func (s *Service) InFlight(group, topic string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, qs := range s.queues {
		if k.group == group && k.topic == topic {
			n += len(qs.inflight)
		}
	}
	return n
}
