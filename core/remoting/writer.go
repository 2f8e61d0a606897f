package remoting

// The connection's writer: frames encoded into pooled buffers and
// written with one flush per batch (transport.FrameBatcher).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
)

// writer is a connection's writing side: frames written from the caller
// (send, and enqueue's on an idle connection) and a queue of encoded
// requests, and of answers to build (ReplyLater), that its goroutine
// writes with one flush per batch. The goroutine starts on first use
// and ends with the connection. It is given all it uses of the Peer.
type writer struct {
	conn  transport.Conn
	batch transport.FrameBatcher // nil: the transport writes frames one by one
	log   *slog.Logger
	// fail closes the connection after a failed write, the error kept
	// as the cause; done is closed once the connection is gone; spawn
	// runs the goroutine as one the connection waits for, false (and
	// nothing run) once it is closed.
	fail  func(error)
	done  <-chan struct{}
	spawn func(func()) bool

	started atomic.Bool
	wake    chan struct{}

	mu      sync.Mutex
	q       []outFrame
	spare   []outFrame
	stopped bool
	writing int // the goroutine and callers writing directly

	list frameList // the goroutine's scratch
}

type outFrame struct {
	hdr  *[]byte // from headerPool, returned once written
	body []byte
	// parts replaces body when the command has BodyParts.
	parts [][]byte
	// sent is the command's Sent, called once the batch is written.
	sent func()
	// late, when set, builds the frame's command on the writer goroutine
	// (ReplyLater); the fields above are empty until then.
	late LateReply
}

// frameList is the scratch of one writing goroutine: the frames of a
// batch as the part lists WriteFrames takes.
type frameList struct {
	frames [][][]byte
	parts  [][]byte
}

var headerPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// partsPool holds the part lists of frames written as vectors (the header
// and the body's parts): transports hold nothing of the list once
// WriteFrame returns.
var partsPool = sync.Pool{New: func() any { p := make([][]byte, 0, 64); return &p }}

// send writes c from the caller's goroutine and runs its Sent once
// written.
func (w *writer) send(ctx context.Context, c *Command) error {
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], c)
	err := w.writeFrame(ctx, *hb, c)
	headerPool.Put(hb)
	if err == nil && c.Sent != nil {
		c.Sent()
	}
	return err
}

// writeFrame writes c's frame, its encoded header hdr followed by its body
// or body parts.
func (w *writer) writeFrame(ctx context.Context, hdr []byte, c *Command) error {
	switch {
	case len(c.BodyParts) > 0:
		pp := partsPool.Get().(*[][]byte)
		*pp = append(append(*pp, hdr), c.BodyParts...)
		err := w.conn.WriteFrame(ctx, *pp...)
		if cap(*pp) <= 4096 {
			clear(*pp)
			*pp = (*pp)[:0]
			partsPool.Put(pp)
		}
		return err
	case len(c.Body) > 0:
		return w.conn.WriteFrame(ctx, hdr, c.Body)
	}
	return w.conn.WriteFrame(ctx, hdr)
}

// directWriteMax is the largest frame enqueue writes from the caller's
// goroutine: one that fits a socket buffer, so the caller does not wait
// for the peer to read.
const directWriteMax = 64 << 10

// enqueue encodes req and queues it for the writer goroutine (only on a
// FrameBatcher). A small frame that finds the queue empty and nobody
// writing is written by the caller at once, with the transport's write
// timeout (no cancellation registration per call): on an idle connection
// that saves waking the goroutine (a scheduler hand-off per request);
// under load frames queue and go out together. A failed write fails the
// connection, as the goroutine's does.
func (w *writer) enqueue(req *Command) error {
	if !w.start() {
		return ErrPeerClosed
	}
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], req)
	n, max := len(*hb)+req.BodyLen(), w.batch.MaxFrameSize()
	if n > max {
		headerPool.Put(hb)
		return fmt.Errorf("remoting: write to %s: %w: %d bytes exceeds %d", w.conn.RemoteAddr(), transport.ErrFrameTooLarge, n, max)
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		headerPool.Put(hb)
		return ErrPeerClosed
	}
	if len(w.q) > 0 || w.writing > 0 || n > directWriteMax {
		w.queueLocked(outFrame{hdr: hb, body: req.Body, parts: req.BodyParts, sent: req.Sent})
		return nil
	}
	w.writing++
	w.mu.Unlock()
	err := w.writeFrame(context.Background(), *hb, req)
	headerPool.Put(hb)
	if err != nil {
		err = fmt.Errorf("remoting: write to %s: %w", w.conn.RemoteAddr(), err)
		w.fail(err)
	} else if req.Sent != nil {
		req.Sent()
	}
	w.mu.Lock()
	w.writing--
	w.mu.Unlock()
	return err
}

// later queues r for the goroutine to build and write (Peer.ReplyLater).
func (w *writer) later(r LateReply) error {
	select {
	case <-w.done:
		return ErrPeerClosed
	default:
	}
	if !w.start() {
		return ErrPeerClosed
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return ErrPeerClosed
	}
	w.queueLocked(outFrame{late: r})
	return nil
}

// queueLocked appends f to the queue, unlocks w.mu (held by the caller)
// and wakes the goroutine if the queue was empty.
func (w *writer) queueLocked(f outFrame) {
	first := len(w.q) == 0
	w.q = append(w.q, f)
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// start starts the goroutine on first use; false when the connection is
// closed.
func (w *writer) start() bool {
	if w.started.Load() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started.Load() {
		w.wake = make(chan struct{}, 1)
		if !w.spawn(w.loop) {
			return false
		}
		w.started.Store(true)
	}
	return true
}

// loop writes whatever is queued, with one WriteFrames (one flush) per
// batch of up to about writeChunk bytes, until the connection closes, and
// then runs the Sent of each command of the batch. A failed write fails
// the connection; frames still queued at close are dropped (no Sent, late
// answers not built).
func (w *writer) loop() {
	defer func() {
		w.mu.Lock()
		w.stopped = true
		q := w.q
		w.q = nil
		w.mu.Unlock()
		for i := range q {
			if q[i].hdr != nil {
				headerPool.Put(q[i].hdr)
			}
		}
	}()
	for {
		select {
		case <-w.wake:
		case <-w.done:
			return
		}
		for {
			w.mu.Lock()
			q := w.q
			if len(q) == 0 {
				w.mu.Unlock()
				break
			}
			w.q, w.spare = w.spare[:0], nil
			w.writing++
			w.mu.Unlock()
			err := w.writeBatch(q)
			w.mu.Lock()
			w.spare = q[:0]
			w.writing--
			w.mu.Unlock()
			if err != nil {
				w.fail(fmt.Errorf("remoting: write to %s: %w", w.conn.RemoteAddr(), err))
				return
			}
		}
	}
}

// writeChunk is about the most bytes the writer builds before writing
// them: late answers are built (their records read) only when their
// chunk's turn comes, so a connection whose peer does not read holds
// about this much encoded, not all it is owed.
const writeChunk = 1 << 20

// writeBatch builds the late answers of q and writes q in order, in
// chunks of about writeChunk bytes, and clears q.
func (w *writer) writeBatch(q []outFrame) error {
	start, size := 0, 0
	var err error
	for i := range q {
		f := &q[i]
		if f.late != nil {
			w.buildLate(f)
		}
		if f.hdr != nil {
			size += len(*f.hdr) + len(f.body)
			for _, b := range f.parts {
				size += len(b)
			}
		}
		if size >= writeChunk || i == len(q)-1 {
			err = w.writeOut(context.Background(), q[start:i+1], &w.list)
			start, size = i+1, 0
			if err != nil {
				break
			}
		}
	}
	for i := start; i < len(q); i++ { // not reached: a write failed
		if q[i].hdr != nil {
			headerPool.Put(q[i].hdr)
		}
		q[i] = outFrame{}
	}
	return err
}

// writeOut writes the built frames of q with l as scratch, runs their
// Sent once written, and clears q. Without a FrameBatcher each frame is
// written alone; one the transport refuses for its size is dropped, as
// Send leaves the connection usable then.
func (w *writer) writeOut(ctx context.Context, q []outFrame, l *frameList) error {
	for i := range q {
		f := &q[i]
		if f.hdr == nil {
			continue // a late answer that was none
		}
		at := len(l.parts)
		l.parts = append(l.parts, *f.hdr)
		if len(f.parts) > 0 {
			l.parts = append(l.parts, f.parts...)
		} else if len(f.body) > 0 {
			l.parts = append(l.parts, f.body)
		}
		l.frames = append(l.frames, l.parts[at:len(l.parts):len(l.parts)])
	}
	var err error
	var refused []bool
	switch {
	case len(l.frames) == 0:
	case w.batch != nil:
		err = w.batch.WriteFrames(ctx, l.frames)
	default:
		for j, fr := range l.frames {
			err = w.conn.WriteFrame(ctx, fr...)
			if errors.Is(err, transport.ErrFrameTooLarge) {
				w.log.Warn("queued frame exceeds the frame limit: dropped", "err", err)
				if refused == nil {
					refused = make([]bool, len(l.frames))
				}
				refused[j], err = true, nil
			}
			if err != nil {
				break
			}
		}
	}
	j := 0
	for i := range q {
		if q[i].hdr != nil {
			headerPool.Put(q[i].hdr)
			if err == nil && q[i].sent != nil && (j >= len(refused) || !refused[j]) {
				q[i].sent()
			}
			j++
		}
		q[i] = outFrame{}
	}
	clear(l.parts)
	clear(l.frames)
	l.parts, l.frames = l.parts[:0], l.frames[:0]
	return err
}

// LateReply is an answer built on the connection's writer goroutine
// (Peer.ReplyLater).
type LateReply interface {
	// MakeReply returns the response, or nil for none. It runs on the
	// writer goroutine just before the write, one at a time and in queue
	// order: while it runs, later frames of this connection (only these)
	// wait.
	MakeReply() *Command
}

// ReplyLater queues r, the answer to a request whose handler returned
// nil, for the connection's writer goroutine, which builds it
// (r.MakeReply) when its turn comes and writes it. It never writes or
// waits on the caller's goroutine: a peer that stops reading holds up
// only its own connection's frames, until the transport's write timeout
// closes it. Frames queued on one connection are written in order. On a
// closed connection it returns ErrPeerClosed; r is not built then, nor
// when the connection closes before r's turn.
func (p *Peer) ReplyLater(r LateReply) error { return p.w.later(r) }

// buildLate runs f's MakeReply and encodes its answer into f; an answer
// the frame limit cannot carry is replaced by a small error answer that
// says why (as serve does), and a panic is logged and answers nothing.
func (w *writer) buildLate(f *outFrame) {
	resp := w.makeLate(f.late)
	f.late = nil
	if resp == nil {
		return
	}
	resp.Flag |= codec.FlagResponse
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], resp)
	if w.batch != nil {
		if n, limit := len(*hb)+resp.BodyLen(), w.batch.MaxFrameSize(); n > limit {
			err := fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, limit)
			w.log.Warn("response exceeds the frame limit: answered with an error", "err", err)
			resp = NewResponse(resp, SystemError, fmt.Sprintf("the answer exceeds the frame limit (remoting.max_frame_size): %v", err))
			*hb = codec.AppendHeader((*hb)[:0], resp)
		}
	}
	f.hdr, f.body, f.parts, f.sent = hb, resp.Body, resp.BodyParts, resp.Sent
}

func (w *writer) makeLate(r LateReply) (resp *Command) {
	defer func() {
		if v := recover(); v != nil {
			w.log.Error("late reply panicked", "panic", v)
			resp = nil
		}
	}()
	return r.MakeReply()
}
