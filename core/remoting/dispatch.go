package remoting

// Requests arriving on a Peer: decoding, the hand-off to warm worker
// goroutines, and the answers (bad headers included).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// dispatch decodes a received frame and completes the call it answers or
// runs its handler: on this goroutine when inline (a FrameDeliverer's
// reader) or when the router declared the code inline (its answer is then
// queued, inline.go), otherwise on a worker goroutine; it waits while
// MaxInFlight handlers run. It may run on several goroutines at once
// (transport.FrameDeliverer).
func (p *Peer) dispatch(ctx context.Context, frame []byte, inline bool) error {
	read := e2etrace.Now() // 0 unless built with -tags e2etrace
	cmd, err := codec.DecodeWith(frame, codec.Options{RawSends: p.router != nil && p.router.rawSends.Load(), Recycler: p.recycler})
	if err != nil {
		var he *codec.HeaderShapeError
		if errors.As(err, &he) {
			p.answerBadHeader(ctx, he, frame)
			return nil
		}
		p.log.Warn("closing connection: undecodable frame", "err", err, "bytes", len(frame))
		return err
	}
	if cmd.IsResponse() {
		p.complete(cmd)
		return nil
	}
	if e2etrace.On {
		e2etrace.FrameRead(read, p.ID, cmd.Code, cmd.Opaque)
	}
	onReader := !inline && p.runsInline(cmd)
	select {
	case p.sem <- struct{}{}:
	default:
		// Answers queued on the reader go out before it waits: the
		// requests holding the slots may need them to be answered.
		if !inline {
			p.flushReplies(ctx)
		}
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.handlers.Add(1)
	if onReader || inline {
		p.serve(ctx, cmd, onReader)
	} else {
		p.handOff(ctx, cmd)
	}
	return nil
}

// maxIdleWorkers bounds the warm handler goroutines a connection keeps
// waiting for requests; more run while requests pile up, and leave once
// theirs is answered.
const maxIdleWorkers = 64

// handOff runs req's handler on a warm worker goroutine of the
// connection, or on a new one when none is idle. A worker's stack has
// already grown to what the handlers need (a fresh goroutine starts at
// 8 KiB and grows, newstack/copystack, through header parsing and the
// interceptors on every request), and handing a request to a waiting
// goroutine costs no goroutine creation.
func (p *Peer) handOff(ctx context.Context, req *Command) {
	select {
	case p.work <- req:
		return
	default:
	}
	// Called only from Run's reading (before Run waits on bg).
	p.bg.Add(1)
	go p.worker(ctx, req)
}

// worker serves req, then waits for the next request handed off, until
// the connection ends or maxIdleWorkers others already wait.
func (p *Peer) worker(ctx context.Context, req *Command) {
	defer p.bg.Done()
	for {
		p.serve(ctx, req, false)
		if p.idleWorkers.Add(1) > maxIdleWorkers {
			p.idleWorkers.Add(-1)
			return
		}
		select {
		case req = <-p.work:
			p.idleWorkers.Add(-1)
		case <-ctx.Done():
			p.idleWorkers.Add(-1)
			return
		case <-p.done:
			p.idleWorkers.Add(-1)
			return
		}
	}
}

// answerBadHeader handles a frame whose header has a field of the wrong
// shape but whose opaque could be read: a request gets a SYSTEM_ERROR
// answer naming the field, a response fails the call waiting for it, a
// oneway request is dropped; the connection stays open (Java's broker
// closes it on any header it cannot decode, which a client can only
// see as a timeout). Each bad frame costs one small answer written from
// the reading goroutine (reading waits for it, so nothing piles up) and
// WARN lines are rate-limited per connection.
func (p *Peer) answerBadHeader(ctx context.Context, he *codec.HeaderShapeError, frame []byte) {
	p.logBadHeader(he, len(frame))
	if p.recycler != nil {
		p.recycler.RecycleFrame(frame) // he refers to nothing in it
	}
	switch {
	case he.Flag&codec.FlagResponse != 0:
		p.complete(&Command{
			Code: SystemError, Language: codec.ServerLanguage, Opaque: he.Opaque, Flag: codec.FlagResponse,
			Remark:        "undecodable response header: field " + he.Field + ": " + he.Problem,
			ExtFields:     map[string]string{},
			SerializeType: he.SerializeType,
		})
	case he.Flag&codec.FlagOneway != 0:
	default:
		req := &Command{Code: he.Code, Opaque: he.Opaque, SerializeType: he.SerializeType}
		resp := NewResponse(req, SystemError, "malformed request header: field "+he.Field+": "+he.Problem)
		if err := p.Send(ctx, resp); err != nil && !errors.Is(err, ErrPeerClosed) {
			p.log.Debug("write bad-header answer", "err", err)
		}
	}
}

// badHeaderLogEvery is how often a connection sending wrong-shaped
// headers logs at WARN; the frames in between are counted and logged at
// DEBUG.
const badHeaderLogEvery = 10 * time.Second

func (p *Peer) logBadHeader(he *codec.HeaderShapeError, size int) {
	n := p.badHeaders.Add(1)
	now := peerClock(time.Now())
	last := p.badHeaderLogged.Load()
	if (last == 0 || now-last >= int64(badHeaderLogEvery)) && p.badHeaderLogged.CompareAndSwap(last, now) {
		p.log.Warn("malformed header: answered with an error, connection kept", "err", he,
			"code", he.Code, "opaque", he.Opaque, "flag", he.Flag, "bytes", size, "bad_headers", n)
		return
	}
	p.log.Debug("malformed header", "err", he, "code", he.Code, "opaque", he.Opaque, "flag", he.Flag, "bad_headers", n)
}

// serve runs req's handler and sends its answer, or queues it when the
// request runs on the reader (inline.go). The caller holds an in-flight
// slot and counted the handler.
func (p *Peer) serve(ctx context.Context, req *Command, onReader bool) {
	defer func() {
		<-p.sem
		p.handlers.Done()
	}()
	resp := p.safeHandle(ctx, req)
	if resp == nil || req.IsOneway() {
		return // no answer, or one sent later with Reply
	}
	resp.Opaque = req.Opaque
	resp.Flag |= codec.FlagResponse
	if onReader {
		p.queueReply(req, resp)
		return
	}
	err := p.Send(ctx, resp)
	if errors.Is(err, transport.ErrFrameTooLarge) {
		err = p.Send(ctx, p.tooLarge(req, err))
	}
	if err != nil && !errors.Is(err, ErrPeerClosed) {
		p.log.Debug("write response", "code", req.Code, "err", err)
	}
}

func (p *Peer) safeHandle(ctx context.Context, req *Command) (resp *Command) {
	if p.handler == nil {
		return NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
	}
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("request handler panicked", "code", req.Code, "panic", r)
			resp = NewResponse(req, SystemError, fmt.Sprintf("internal error handling request %d", req.Code))
		}
	}()
	return p.handler.Handle(ctx, p, req)
}

// tooLarge is the small error answer that replaces an answer to req the
// frame limit cannot carry (err): without it the client would wait for
// its timeout, and retry what may already be done.
func (p *Peer) tooLarge(req *Command, err error) *Command {
	p.log.Warn("response exceeds the frame limit: answered with an error", "code", req.Code, "err", err)
	return NewResponse(req, SystemError, fmt.Sprintf("the answer to request %d (%s) exceeds the frame limit (remoting.max_frame_size): %v",
		req.Code, RequestCodeName(req.Code), err))
}
