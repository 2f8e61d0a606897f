package remoting

// The connection's writer: frames encoded into pooled buffers and
// written with one flush per batch (transport.FrameBatcher).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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

// writeQueue holds encoded requests for the writer goroutine.
type writeQueue struct {
	started atomic.Bool
	wake    chan struct{}

	mu      sync.Mutex
	q       []outFrame
	spare   []outFrame
	stopped bool
	writing int // the writer goroutine and callers writing directly
}

type outFrame struct {
	hdr  *[]byte // from headerPool, returned once written
	body []byte
	// parts replaces body when the command has BodyParts.
	parts [][]byte
	// sent is the command's Sent, called once the batch is written.
	sent func()
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
	*hb = AppendHeader((*hb)[:0], req)
	n, max := len(*hb)+bodyLen(req), p.batch.MaxFrameSize()
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

// writeLoop writes whatever requests are queued with one WriteFrames (one
// flush) per batch, until the peer closes, and then runs the Sent of each
// command of the batch. A failed write closes the peer, failing the
// pending calls; frames still queued at close are dropped (no Sent).
func (p *Peer) writeLoop() {
	defer p.bg.Done()
	w := &p.out
	var frames [][][]byte
	var parts [][]byte
	defer func() {
		w.mu.Lock()
		w.stopped = true
		q := w.q
		w.q = nil
		w.mu.Unlock()
		for i := range q {
			headerPool.Put(q[i].hdr)
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
			for i := range q {
				f := &q[i]
				parts = append(parts, *f.hdr)
				if len(f.parts) > 0 {
					parts = append(parts, f.parts...)
				} else if len(f.body) > 0 {
					parts = append(parts, f.body)
				}
			}
			at := 0
			for i := range q {
				n := q[i].nparts()
				frames = append(frames, parts[at:at+n:at+n])
				at += n
			}
			err := p.batch.WriteFrames(context.Background(), frames)
			for i := range q {
				headerPool.Put(q[i].hdr)
				if err == nil && q[i].sent != nil {
					q[i].sent()
				}
				q[i] = outFrame{}
			}
			clear(parts)
			clear(frames)
			parts, frames = parts[:0], frames[:0]
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
