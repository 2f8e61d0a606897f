package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/transport"
)

// Handler answers requests arriving on a Peer. Returning nil means no answer
// now: the handler keeps the request and answers later with Peer.Reply (long
// polling), or the request needs no answer at all.
type Handler interface {
	Handle(ctx context.Context, p *Peer, req *Command) *Command
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, p *Peer, req *Command) *Command

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, p *Peer, req *Command) *Command {
	return f(ctx, p, req)
}

// ErrPeerClosed is returned for calls on a closed peer and for calls still
// waiting when the connection went away.
var ErrPeerClosed = errors.New("remoting: connection closed")

// RemoteError is a response that arrived with a non-success code.
type RemoteError struct {
	Code   int32
	Remark string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("remoting: CODE: %d DESC: %s", e.Code, e.Remark)
}

// PeerOptions tune a Peer.
type PeerOptions struct {
	// MaxInFlight bounds requests handled at once on one connection; reading
	// pauses while it is reached. Default 1024.
	MaxInFlight int
}

// Peer is one remoting connection, used the same way on both ends: it reads
// frames, matches responses to pending calls by opaque and hands requests
// to its Handler, each in its own goroutine so requests on one connection
// are served concurrently and answered out of order.
type Peer struct {
	conn    transport.Conn
	handler Handler
	log     *slog.Logger
	sem     chan struct{}

	mu      sync.Mutex
	pending map[int32]chan *Command
	closed  bool

	done      chan struct{}
	closeOnce sync.Once
	handlers  sync.WaitGroup

	// values lets services attach per-connection state (client id, ...).
	values sync.Map
	// ID is a process-unique connection number.
	ID uint64
}

var peerSeq atomic.Uint64

// NewPeer wraps conn. Call Run to start reading.
func NewPeer(conn transport.Conn, h Handler, log *slog.Logger, opts PeerOptions) *Peer {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1024
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Peer{
		conn: conn, handler: h, log: log.With("remote", conn.RemoteAddr()),
		sem:     make(chan struct{}, opts.MaxInFlight),
		pending: make(map[int32]chan *Command),
		done:    make(chan struct{}),
		ID:      peerSeq.Add(1),
	}
}

// RemoteAddr is the peer's address.
func (p *Peer) RemoteAddr() string { return p.conn.RemoteAddr() }

// LocalAddr is our end's address.
func (p *Peer) LocalAddr() string { return p.conn.LocalAddr() }

// Done is closed when the connection is gone.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Value returns per-connection state stored with SetValue.
func (p *Peer) Value(k any) (any, bool) { return p.values.Load(k) }

// SetValue stores per-connection state.
func (p *Peer) SetValue(k, v any) { p.values.Store(k, v) }

// Run reads frames until the connection fails or ctx ends, then closes the
// peer, fails pending calls and waits for running handlers. The error is the
// reason reading stopped.
func (p *Peer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		p.Close()
		p.handlers.Wait()
	}()
	for {
		frame, err := p.conn.ReadFrame(ctx)
		if err != nil {
			return err
		}
		cmd, err := Decode(frame)
		if err != nil {
			p.log.Warn("closing connection: undecodable frame", "err", err, "bytes", len(frame))
			return err
		}
		if cmd.IsResponse() {
			p.complete(cmd)
			continue
		}
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.handlers.Add(1)
		go p.serve(ctx, cmd)
	}
}

func (p *Peer) serve(ctx context.Context, req *Command) {
	defer func() {
		<-p.sem
		p.handlers.Done()
	}()
	var resp *Command
	if p.handler == nil {
		resp = NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
	} else {
		resp = p.safeHandle(ctx, req)
	}
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	if err := p.Send(ctx, resp); err != nil && !errors.Is(err, ErrPeerClosed) {
		p.log.Debug("write response", "code", req.Code, "err", err)
	}
}

func (p *Peer) safeHandle(ctx context.Context, req *Command) (resp *Command) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("request handler panicked", "code", req.Code, "panic", r)
			resp = NewResponse(req, SystemError, fmt.Sprintf("internal error handling request %d", req.Code))
		}
	}()
	return p.handler.Handle(ctx, p, req)
}

func (p *Peer) complete(resp *Command) {
	p.mu.Lock()
	ch, ok := p.pending[resp.Opaque]
	if ok {
		delete(p.pending, resp.Opaque)
	}
	p.mu.Unlock()
	if ok {
		ch <- resp
	}
}

// Send writes one command.
func (p *Peer) Send(ctx context.Context, c *Command) error {
	select {
	case <-p.done:
		return ErrPeerClosed
	default:
	}
	hb := headerPool.Get().(*[]byte)
	h := AppendHeader((*hb)[:0], c)
	var err error
	switch {
	case len(c.BodyParts) > 0:
		parts := make([][]byte, 0, len(c.BodyParts)+1)
		parts = append(parts, h)
		parts = append(parts, c.BodyParts...)
		err = p.conn.WriteFrame(ctx, parts...)
	case len(c.Body) > 0:
		err = p.conn.WriteFrame(ctx, h, c.Body)
	default:
		err = p.conn.WriteFrame(ctx, h)
	}
	*hb = h
	headerPool.Put(hb)
	if err != nil {
		p.Close()
		return fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
	}
	return nil
}

var headerPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Reply sends a response prepared with NewResponse for a request whose
// handler returned nil.
func (p *Peer) Reply(ctx context.Context, resp *Command) error {
	resp.Flag |= FlagResponse
	return p.Send(ctx, resp)
}

// Invoke sends req and waits for its response or ctx's end.
func (p *Peer) Invoke(ctx context.Context, req *Command) (*Command, error) {
	ch := make(chan *Command, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPeerClosed
	}
	p.pending[req.Opaque] = ch
	p.mu.Unlock()
	if err := p.Send(ctx, req); err != nil {
		p.forget(req.Opaque)
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrPeerClosed
		}
		return resp, nil
	case <-ctx.Done():
		p.forget(req.Opaque)
		return nil, fmt.Errorf("remoting: request %d to %s: %w", req.Code, p.RemoteAddr(), ctx.Err())
	}
}

// InvokeAsync sends req and calls cb with the response from another
// goroutine; cb also receives the error when ctx ends first.
func (p *Peer) InvokeAsync(ctx context.Context, req *Command, cb func(*Command, error)) error {
	ch := make(chan *Command, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPeerClosed
	}
	p.pending[req.Opaque] = ch
	p.mu.Unlock()
	if err := p.Send(ctx, req); err != nil {
		p.forget(req.Opaque)
		return err
	}
	go func() {
		select {
		case resp, ok := <-ch:
			if !ok {
				cb(nil, ErrPeerClosed)
				return
			}
			cb(resp, nil)
		case <-ctx.Done():
			p.forget(req.Opaque)
			cb(nil, ctx.Err())
		}
	}()
	return nil
}

// InvokeOneway sends req without waiting; the oneway bit is set.
func (p *Peer) InvokeOneway(ctx context.Context, req *Command) error {
	req.Flag |= FlagOneway
	return p.Send(ctx, req)
}

func (p *Peer) forget(opaque int32) {
	p.mu.Lock()
	delete(p.pending, opaque)
	p.mu.Unlock()
}

// Close closes the connection and fails every pending call.
func (p *Peer) Close() error {
	var err error
	p.closeOnce.Do(func() {
		err = p.conn.Close()
		p.mu.Lock()
		p.closed = true
		for k, ch := range p.pending {
			close(ch)
			delete(p.pending, k)
		}
		p.mu.Unlock()
		close(p.done)
	})
	return err
}
