package remoting

// Requests served on the connection's reading goroutine (Mode.Inline)
// and their answers, written together once the reader has drained what
// arrived.
//
// A request whose handler was declared short (it answers from memory or
// the page cache and never waits long: a send with storage.flush=async,
// an offset query) costs more in the hand-off to a worker goroutine (a
// scheduler wake-up) and in its own write system call than in the
// handler itself. The reader runs such a handler itself and queues the
// encoded answer; the queue is written with one WriteFrames (one write)
// when the transport holds no further whole frame (ReadFrame would wait
// on the socket), when maxQueuedReplies answers or maxQueuedBytes are
// queued, before the reader waits for an in-flight slot, and when reading
// stops. A burst of pipelined requests (the official client's ×16 or
// async senders) is answered with one write per burst instead of one per
// request; a lone request is answered at once, as before. Requests of
// other codes go to worker goroutines as before, so a handler that blocks
// (a long-polling pull, a sync flush) holds up nothing on the reader.

import (
	"context"
	"errors"
	"fmt"

	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
)

// frameLookahead is a Conn that can tell, without blocking, whether a
// whole frame is already buffered (the tcp transport): only the reading
// goroutine calls it. Without it every inline answer is written at once.
type frameLookahead interface{ FrameBuffered() bool }

// Bounds of the answers queued on the reader: past either the queue is
// written even though more requests are buffered, so a client that keeps
// the read buffer full still gets its answers.
const (
	maxQueuedReplies = 64
	maxQueuedBytes   = 64 << 10
)

// replyQueue is the reader's queue of encoded answers. Only the reading
// goroutine touches it.
type replyQueue struct {
	q     []outFrame
	bytes int
	list  frameList
}

// runsInline reports whether req is served on the reader.
func (p *Peer) runsInline(req *Command) bool {
	return p.router != nil && p.w.batch != nil && p.router.inline(req.Code)
}

// queueReply encodes resp and queues it; an answer the frame limit cannot
// carry is replaced by a small error answer that says why (as serve
// does).
func (p *Peer) queueReply(req, resp *Command) {
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], resp)
	n, limit := len(*hb)+resp.BodyLen(), p.w.batch.MaxFrameSize()
	if n > limit {
		resp = p.tooLarge(req, fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, limit))
		*hb = codec.AppendHeader((*hb)[:0], resp)
		n = len(*hb)
	}
	r := &p.replies
	r.q = append(r.q, outFrame{hdr: hb, body: resp.Body, parts: resp.BodyParts, sent: resp.Sent})
	r.bytes += n
}

// replyDue reports whether the queued answers must be written now: the
// bounds are reached, or no whole frame waits in the transport's buffer.
func (p *Peer) replyDue() bool {
	r := &p.replies
	if len(r.q) == 0 {
		return false
	}
	return len(r.q) >= maxQueuedReplies || r.bytes >= maxQueuedBytes ||
		p.ahead == nil || !p.ahead.FrameBuffered()
}

// flushReplies writes the queued answers with one WriteFrames and runs
// their Sent. A failed write closes the peer, as a failed Send does.
func (p *Peer) flushReplies(ctx context.Context) {
	r := &p.replies
	if len(r.q) == 0 {
		return
	}
	err := p.w.writeOut(ctx, r.q, &r.list)
	r.q, r.bytes = r.q[:0], 0
	if err != nil {
		err = fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
		p.closeWith(err) //nolint:errcheck // closing anyway; the first error is kept and reported
		if !errors.Is(err, transport.ErrClosed) && ctx.Err() == nil {
			p.log.Debug("write responses", "err", err)
		}
	}
}
