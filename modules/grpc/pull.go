package grpc

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/pop"
)

// PullMessage serves 5.x lite/pull consumers as RocketMQ 5's proxy does
// (PullMessageActivity, PullMessageResponseStreamWriter): it reads the
// queue from the request's offset through the group's filter (the filter
// plugins, as 4.x pulls) and answers a status — OK with the messages,
// MESSAGE_NOT_FOUND, or ILLEGAL_OFFSET for an offset outside the queue —
// and then the offset to pull from next. An empty queue is long-polled up
// to long_polling_timeout (at most 30s, and 0.5s inside the call's
// deadline). Pulls do not commit offsets: the client does (UpdateOffset),
// into the table 4.x consumers use.
func (s *Server) PullMessage(req *grpcapi.PullMessageRequest, stream grpcapi.MessagingService_PullMessageServer) error {
	send := func(st *grpcapi.Status) error {
		return stream.Send(&grpcapi.PullMessageResponse{Content: &grpcapi.PullMessageResponse_Status{Status: st}})
	}
	ctx := stream.Context()
	group, st := groupOf(req.GetGroup())
	if st != nil {
		return send(st)
	}
	if st := s.popHeld(group); st != nil {
		return send(st)
	}
	tc, q, st := s.queueOf(req.GetMessageQueue())
	if st != nil {
		return send(st)
	}
	if tc.Perm&protocol.PermRead == 0 || q.ID >= tc.ReadQueueNums {
		return send(status(grpcapi.Code_FORBIDDEN, fmt.Sprintf("queue %d of topic %s is not readable", q.ID, q.Topic)))
	}
	gc, err := s.b.GroupConfig(group)
	if err != nil {
		return send(status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, err.Error()))
	}
	if !gc.ConsumeEnable {
		return send(status(grpcapi.Code_FORBIDDEN, "consumption of group "+group+" is disabled"))
	}
	if req.GetOffset() < 0 {
		return send(status(grpcapi.Code_ILLEGAL_OFFSET, fmt.Sprintf("offset %d is negative", req.GetOffset())))
	}
	matcher, st := s.filterOf(req.GetFilterExpression())
	if st != nil {
		return send(st)
	}
	batch := int(req.GetBatchSize())
	if limit := s.b.Config().PullBatchMax; batch <= 0 || batch > limit {
		batch = min(max(batch, maxReceiveBatch), limit)
	}
	wait := defaultLongPolling
	if d := req.GetLongPollingTimeout(); d != nil && d.CheckValid() == nil {
		wait = min(max(d.AsDuration(), 0), maxLongPolling)
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-500*time.Millisecond)
	}
	res, err := s.pullWait(ctx, q, req.GetOffset(), batch, broker.FilterReadOptions(matcher), max(wait, 0))
	if err != nil {
		return send(status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error()))
	}
	var msgs []*grpcapi.Message
	code := grpcapi.Code_MESSAGE_NOT_FOUND
	msg := "no new message"
	switch res.Status {
	case store.Found:
		for i, raw := range res.Records {
			m, _, err := message.DecodeStored(slices.Clone(raw))
			if err != nil {
				s.log.Warn("grpc: pull: skip malformed record", "queue", q, "err", err)
				continue
			}
			off := m.QueueOffset
			if i < len(res.QueueOffsets) {
				off = res.QueueOffsets[i]
			}
			pm := s.toProto(pop.Received{Message: m, Queue: q.ID, Offset: off, Attempt: m.ReconsumeTimes + 1}, 0)
			pm.SystemProperties.ReceiptHandle = nil // pulled, not popped: nothing to ack
			pm.SystemProperties.InvisibleDuration = nil
			msgs = append(msgs, pm)
		}
		if len(msgs) > 0 {
			code, msg = grpcapi.Code_OK, "OK"
		} else {
			msg = "no matched message"
		}
	case store.NoMatchedMessage, store.OffsetFoundNull:
		msg = "no matched message"
	case store.NoMessageInQueue:
		if req.GetOffset() != 0 {
			code, msg = grpcapi.Code_ILLEGAL_OFFSET, fmt.Sprintf("offset %d: the queue is empty", req.GetOffset())
		}
	case store.OffsetTooSmall, store.OffsetOverflowBadly:
		code, msg = grpcapi.Code_ILLEGAL_OFFSET, fmt.Sprintf("offset %d is outside %d..%d (pull from the next offset)", req.GetOffset(), res.MinOffset, res.MaxOffset)
	}
	if err := send(status(code, msg)); err != nil {
		return err
	}
	for _, m := range msgs {
		if err := stream.Send(&grpcapi.PullMessageResponse{Content: &grpcapi.PullMessageResponse_Message{Message: m}}); err != nil {
			return err
		}
	}
	return stream.Send(&grpcapi.PullMessageResponse{Content: &grpcapi.PullMessageResponse_NextOffset{NextOffset: res.NextOffset}})
}

// filterOf compiles a 5.x filter expression through the broker's filter
// plugins (TAG when unset, "*" when empty).
func (s *Server) filterOf(fe *grpcapi.FilterExpression) (filter.Matcher, *grpcapi.Status) {
	typ := "TAG"
	if fe.GetType() == grpcapi.FilterType_SQL {
		typ = "SQL92"
	}
	expr := fe.GetExpression()
	if expr == "" {
		expr = "*"
	}
	m, err := s.b.CompileFilter(typ, expr)
	if err != nil {
		return nil, status(grpcapi.Code_ILLEGAL_FILTER_EXPRESSION, err.Error())
	}
	return m, nil
}

// pullWait reads q at offset; when the queue has nothing at offset yet
// (the 4.x PULL_NOT_FOUND cases) it waits up to wait for a message stored
// on q, the endpoint stopping or the call ending, and reads again.
func (s *Server) pullWait(ctx context.Context, q store.Queue, offset int64, batch int, opts store.ReadOptions, wait time.Duration) (*store.ReadResult, error) {
	opts.MaxMessages = batch
	opts.MaxBytes = int(s.b.Config().PullBytesMax)
	deadline := time.Now().Add(wait)
	res := new(store.ReadResult)
	for {
		// Registered before the read, so that a message stored between
		// the read and the wait still wakes it.
		wake := s.waiters.add(q)
		res.Reset()
		err := s.b.Store().Read(ctx, q, offset, opts, res)
		empty := err == nil && (res.Status == store.OffsetOverflowOne || (res.Status == store.NoMessageInQueue && offset == 0))
		left := time.Until(deadline)
		if !empty || left <= 0 {
			s.waiters.remove(q, wake)
			if err != nil {
				return nil, fmt.Errorf("read %s at %d: %w", q, offset, err)
			}
			return res, nil
		}
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-s.done:
		}
		t.Stop()
		s.waiters.remove(q, wake)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pull %s: %w", q, ctx.Err())
		}
		select {
		case <-s.done:
			deadline = time.Now() // one last read, then answer
		default:
		}
	}
}

// pullWaiters wakes long-polling pulls when a message is stored on their
// queue (a broker StoredListener, registered once by Start).
type pullWaiters struct {
	n  atomic.Int64 // waiters, so that sends skip the lock when none wait
	mu sync.Mutex
	m  map[store.Queue]map[chan struct{}]struct{}
}

func (w *pullWaiters) add(q store.Queue) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[store.Queue]map[chan struct{}]struct{}{}
	}
	set := w.m[q]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.m[q] = set
	}
	set[ch] = struct{}{}
	w.n.Add(1)
	return ch
}

// remove forgets ch (already gone when stored woke it).
func (w *pullWaiters) remove(q store.Queue, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if set := w.m[q]; set != nil {
		if _, ok := set[ch]; ok {
			delete(set, ch)
			w.n.Add(-1)
			if len(set) == 0 {
				delete(w.m, q)
			}
		}
	}
}

// stored wakes the pulls waiting on the queues of msgs. It runs on the
// send path and keeps nothing of msgs.
func (w *pullWaiters) stored(msgs []*message.Ext, _ []store.Position) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		q := store.Queue{Topic: m.Topic, ID: m.QueueID}
		set := w.m[q]
		for ch := range set {
			close(ch)
			w.n.Add(-1)
		}
		if set != nil {
			delete(w.m, q)
		}
	}
}
