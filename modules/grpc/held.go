package grpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/pop"
)

// Received messages are counted from the moment ReceiveMessage has them
// until the call ends, so that consumers that stop reading cannot pin
// unbounded memory while stream.Send blocks: a call keeps at most
// grpc.receive_stream_buffer bytes of message bodies (at least one
// message), all calls together at most grpc.receive_buffer, and the
// messages not yet sent when the receive's deadline passes are let go.
// What a call cannot keep is left invisible: it comes back after its
// invisible time, as any delivery a consumer did not ack.

// recvBudget counts the body bytes of received messages held by
// ReceiveMessage calls.
type recvBudget struct {
	limit int64
	used  atomic.Int64
}

// full reports that no call may receive more until one ends.
func (b *recvBudget) full() bool { return b.used.Load() >= b.limit }

// take counts n bytes if they fit; a lone message always fits, so that a
// message larger than the budget is still delivered.
func (b *recvBudget) take(n int64) bool {
	for {
		cur := b.used.Load()
		if cur > 0 && cur+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *recvBudget) give(n int64) { b.used.Add(-n) }

// waitSlots bounds the ReceiveMessage calls waiting for messages at once
// (grpc.max_receive_waits).
type waitSlots struct {
	limit int64
	n     atomic.Int64
}

// take counts a waiting receive if one more may wait.
func (w *waitSlots) take() bool {
	for {
		cur := w.n.Load()
		if cur >= w.limit {
			return false
		}
		if w.n.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

func (w *waitSlots) give() { w.n.Add(-1) }

// heldBatch is the messages one ReceiveMessage call holds for its client.
type heldBatch struct {
	b     *recvBudget
	mu    sync.Mutex
	msgs  []pop.Received // sent or let go: zeroed
	sizes []int64
	next  int   // the next message to send
	held  int64 // bytes counted in b
	done  bool  // the deadline passed: nothing more is sent
}

// hold keeps what of got fits the call's and the endpoint's budget, in
// order; the rest is zeroed in got (left to its invisible time). nil when
// nothing fits.
func (s *Server) hold(got []pop.Received) *heldBatch {
	limit := int64(s.cfg.ReceiveStreamBuffer)
	hb := &heldBatch{b: &s.recvHeld}
	for i, r := range got {
		n := int64(len(r.Message.Body))
		if i > 0 && hb.held+n > limit {
			break
		}
		if !hb.b.take(n) {
			break
		}
		hb.held += n
		hb.sizes = append(hb.sizes, n)
	}
	kept := len(hb.sizes)
	if kept < len(got) {
		s.log.Debug("grpc: receive: messages left to their invisible time", "kept", kept, "received", len(got),
			"receive_stream_buffer", limit, "receive_buffer", hb.b.limit)
		clear(got[kept:])
	}
	if kept == 0 {
		return nil
	}
	hb.msgs = got[:kept]
	return hb
}

// sendHeld holds recs within the receive budgets (hold), answers OK and
// streams them one by one until all are sent, the stream fails or the
// receive's deadline passes: the call's, or the end of the messages'
// invisible time (their InvisibleUntil: then they are handed out again
// anyway), so nothing is kept past it. decorate, if not nil, adds to each
// message before it goes out. TOO_MANY_REQUESTS when nothing fits the
// budgets.
//
// The invisible time runs from when the messages were handed out, not
// from the start of the call: a receive that long-polled for longer than
// its invisible time before a message came must still send it.
func (s *Server) sendHeld(ctx context.Context, stream grpcapi.MessagingService_ReceiveMessageServer, send func(*grpcapi.Status) error,
	recs []pop.Received, invisible time.Duration, decorate func(pop.Received, *grpcapi.Message)) error {
	deadline := heldUntil(recs, invisible)
	hb := s.hold(recs)
	if hb == nil {
		return send(status(grpcapi.Code_TOO_MANY_REQUESTS, fmt.Sprintf("the endpoint holds grpc.receive_buffer (%d bytes) of messages for consumers that do not read: try again later", s.recvHeld.limit)))
	}
	defer hb.release()
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	t := time.AfterFunc(time.Until(deadline), hb.expire)
	defer t.Stop()
	if err := send(ok()); err != nil {
		return err
	}
	for {
		r, more := hb.take()
		if !more {
			return nil
		}
		pm := s.toProto(r, invisible)
		if decorate != nil {
			decorate(r, pm)
		}
		if err := stream.Send(&grpcapi.ReceiveMessageResponse{Content: &grpcapi.ReceiveMessageResponse_Message{Message: pm}}); err != nil {
			return err
		}
	}
}

// heldUntil is when the first of recs becomes visible again; a record
// without its InvisibleUntil counts invisible from now.
func heldUntil(recs []pop.Received, invisible time.Duration) time.Time {
	var until time.Time
	for _, r := range recs {
		u := r.InvisibleUntil
		if u.IsZero() {
			u = time.Now().Add(invisible)
		}
		if until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return until
}

// take hands out the next message to send; false when all are sent or
// the deadline passed.
func (hb *heldBatch) take() (pop.Received, bool) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.done || hb.next >= len(hb.msgs) {
		return pop.Received{}, false
	}
	r := hb.msgs[hb.next]
	hb.msgs[hb.next] = pop.Received{}
	hb.next++
	return r, true
}

// expire lets go of the messages not yet sent: the receive's deadline
// passed while the client did not read.
func (hb *heldBatch) expire() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.done = true
	var n int64
	for i := hb.next; i < len(hb.msgs); i++ {
		n += hb.sizes[i]
		hb.msgs[i] = pop.Received{}
	}
	hb.next = len(hb.msgs)
	hb.held -= n
	hb.b.give(n)
}

// release gives back what the call still counts; it ends the call.
func (hb *heldBatch) release() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.done = true
	clear(hb.msgs)
	hb.b.give(hb.held)
	hb.held = 0
}
