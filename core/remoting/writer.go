package remoting

// The connection's writer: frames encoded into pooled buffers and
// written with one flush per batch (transport.FrameBatcher).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
)

// writeFrame writes c's frame, its encoded header hdr followed by its body
// or body parts.
func (p *Peer) writeFrame(ctx context.Context, hdr []byte, c *Command) error {
	switch {
	case len(c.BodyParts) > 0:
		pp := getParts()
		*pp = append(append(*pp, hdr), c.BodyParts...)
		err := p.conn.WriteFrame(ctx, *pp...)
		putParts(pp)
		return err
	case len(c.Body) > 0:
		return p.conn.WriteFrame(ctx, hdr, c.Body)
	}
	return p.conn.WriteFrame(ctx, hdr)
}

var headerPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// partsPool holds the part lists of frames written as vectors (the header
// and the body's parts): transports hold nothing of the list once
// WriteFrame returns.
var partsPool = sync.Pool{New: func() any { p := make([][]byte, 0, 64); return &p }}

func getParts() *[][]byte { return partsPool.Get().(*[][]byte) }

func putParts(p *[][]byte) {
	if cap(*p) > 4096 {
		return
	}
	clear(*p)
	*p = (*p)[:0]
	partsPool.Put(p)
}

// writeQueue holds encoded requests, and answers to build (ReplyLater),
// for the writer goroutine.
type writeQueue struct {
	started atomic.Bool
	wake    chan struct{}

	mu      sync.Mutex
	q       []outFrame
	spare   []outFrame
	stopped bool
	writing int // the writer goroutine and callers writing directly

	// frames and parts are the writer goroutine's scratch lists.
	frames [][][]byte
	parts  [][]byte
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

func (f *outFrame) nparts() int {
	switch {
	case len(f.parts) > 0:
		return 1 + len(f.parts)
	case len(f.body) > 0:
		return 2
	}
	return 1
}

// directWriteMax is the largest frame enqueue writes from the caller's
// goroutine: one that fits a socket buffer, so the caller does not wait
// for the peer to read.
const directWriteMax = 64 << 10

// enqueue encodes req and queues it for the writer goroutine. A small
// frame that finds the queue empty and nobody writing is written by the
// caller at once: on an idle connection that saves waking the writer
// goroutine (a scheduler hand-off per request); under load frames queue
// and go out together.
func (p *Peer) enqueue(req *Command) error {
	if !p.startWriter() {
		return ErrPeerClosed
	}
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], req)
	n, max := len(*hb)+req.BodyLen(), p.batch.MaxFrameSize()
	if n > max {
		headerPool.Put(hb)
		return fmt.Errorf("remoting: write to %s: %w: %d bytes exceeds %d", p.RemoteAddr(), transport.ErrFrameTooLarge, n, max)
	}
	w := &p.out
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		headerPool.Put(hb)
		return ErrPeerClosed
	}
	if len(w.q) == 0 && w.writing == 0 && n <= directWriteMax {
		w.writing++
		w.mu.Unlock()
		err := p.writeDirect(*hb, req)
		headerPool.Put(hb)
		w.mu.Lock()
		w.writing--
		w.mu.Unlock()
		return err
	}
	first := len(w.q) == 0
	w.q = append(w.q, outFrame{hdr: hb, body: req.Body, parts: req.BodyParts, sent: req.Sent})
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// writeDirect writes one request frame from the caller's goroutine, with
// the transport's write timeout (no cancellation registration per call);
// a failed write closes the peer, as the writer goroutine's does. req.Sent
// runs once the frame is written.
func (p *Peer) writeDirect(hdr []byte, req *Command) error {
	err := p.writeFrame(context.Background(), hdr, req)
	if err != nil {
		err = fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
		p.closeWith(err) //nolint:errcheck // closing anyway; the first error is kept and reported
		return err
	}
	if req.Sent != nil {
		req.Sent()
	}
	return nil
}

// startWriter starts the writer goroutine on first use; false when the
// peer is closed.
func (p *Peer) startWriter() bool {
	if p.out.started.Load() {
		return true
	}
	p.startMu.Lock()
	defer p.startMu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	if !p.out.started.Load() {
		p.out.wake = make(chan struct{}, 1)
		p.bg.Add(1)
		go p.writeLoop()
		p.out.started.Store(true)
	}
	return true
}

// writeLoop writes whatever is queued, with one WriteFrames (one flush)
// per batch of up to about writeChunk bytes, until the peer closes, and
// then runs the Sent of each command of the batch. A failed write closes
// the peer, failing the pending calls; frames still queued at close are
// dropped (no Sent, late answers not built).
func (p *Peer) writeLoop() {
	defer p.bg.Done()
	w := &p.out
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
		case <-p.done:
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
			err := p.writeBatch(q)
			w.mu.Lock()
			w.spare = q[:0]
			w.writing--
			w.mu.Unlock()
			if err != nil {
				p.closeWith(fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)) //nolint:errcheck // closing anyway; the first error is kept and reported
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
func (p *Peer) writeBatch(q []outFrame) error {
	start, size := 0, 0
	var err error
	for i := range q {
		f := &q[i]
		if f.late != nil {
			p.buildLate(f)
		}
		if f.hdr != nil {
			size += len(*f.hdr) + len(f.body)
			for _, b := range f.parts {
				size += len(b)
			}
		}
		if size >= writeChunk || i == len(q)-1 {
			err = p.writeOut(q[start : i+1])
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

// writeOut writes the built frames of q, runs their Sent once written,
// and clears q. Without a FrameBatcher each frame is written alone; one
// the transport refuses for its size is dropped, as Send leaves the
// connection usable then.
func (p *Peer) writeOut(q []outFrame) error {
	w := &p.out
	for i := range q {
		f := &q[i]
		if f.hdr == nil {
			continue // a late answer that was none
		}
		at := len(w.parts)
		w.parts = append(w.parts, *f.hdr)
		if len(f.parts) > 0 {
			w.parts = append(w.parts, f.parts...)
		} else if len(f.body) > 0 {
			w.parts = append(w.parts, f.body)
		}
		w.frames = append(w.frames, w.parts[at:len(w.parts):len(w.parts)])
	}
	var err error
	var refused []bool
	switch {
	case len(w.frames) == 0:
	case p.batch != nil:
		err = p.batch.WriteFrames(context.Background(), w.frames)
	default:
		for j, fr := range w.frames {
			err = p.conn.WriteFrame(context.Background(), fr...)
			if errors.Is(err, transport.ErrFrameTooLarge) {
				p.log.Warn("queued frame exceeds the frame limit: dropped", "err", err)
				if refused == nil {
					refused = make([]bool, len(w.frames))
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
	clear(w.parts)
	clear(w.frames)
	w.parts, w.frames = w.parts[:0], w.frames[:0]
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
func (p *Peer) ReplyLater(r LateReply) error {
	select {
	case <-p.done:
		return ErrPeerClosed
	default:
	}
	if !p.startWriter() {
		return ErrPeerClosed
	}
	w := &p.out
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return ErrPeerClosed
	}
	first := len(w.q) == 0
	w.q = append(w.q, outFrame{late: r})
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// buildLate runs f's MakeReply and encodes its answer into f; an answer
// the frame limit cannot carry is replaced by a small error answer that
// says why (as serve does), and a panic is logged and answers nothing.
func (p *Peer) buildLate(f *outFrame) {
	resp := p.makeLate(f.late)
	f.late = nil
	if resp == nil {
		return
	}
	resp.Flag |= codec.FlagResponse
	hb := headerPool.Get().(*[]byte)
	*hb = codec.AppendHeader((*hb)[:0], resp)
	if p.batch != nil {
		if n, limit := len(*hb)+resp.BodyLen(), p.batch.MaxFrameSize(); n > limit {
			err := fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, limit)
			p.log.Warn("response exceeds the frame limit: answered with an error", "err", err)
			resp = NewResponse(resp, SystemError, fmt.Sprintf("the answer exceeds the frame limit (remoting.max_frame_size): %v", err))
			*hb = codec.AppendHeader((*hb)[:0], resp)
		}
	}
	f.hdr, f.body, f.parts, f.sent = hb, resp.Body, resp.BodyParts, resp.Sent
}

func (p *Peer) makeLate(r LateReply) (resp *Command) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("late reply panicked", "panic", v)
			resp = nil
		}
	}()
	return r.MakeReply()
}
