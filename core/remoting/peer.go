package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

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
	// SweepInterval is how often a connection with async calls pending
	// looks for ones whose deadline passed or whose context ended (one
	// ticker per connection instead of a timer per call). Default 10 ms.
	SweepInterval time.Duration
}

// Peer is one remoting connection, used the same way on both ends: it reads
// frames, matches responses to pending calls by opaque and hands requests
// to its Handler, each in its own goroutine so requests on one connection
// are served concurrently and answered out of order.
//
// Calls cost no goroutine, channel or timer each: a pending call is a
// pooled entry in a sharded table; a sync call waits on its entry's pooled
// channel; an async call's entry holds its callback, which the
// connection's callback goroutine runs (it also sweeps for expired
// calls). On transports that can write several frames at once (tcp) the
// requests of Invoke and InvokeAsync are encoded into pooled buffers and
// the connection's writer goroutine sends whatever is queued with one
// flush. Both goroutines start on first use and end with the connection.
// Send (responses, oneway requests) writes from the caller, as before.
type Peer struct {
	conn    transport.Conn
	handler Handler
	log     *slog.Logger
	sem     chan struct{}
	sweep   time.Duration

	pending [pendingShards]pendingShard

	// async: completed async calls waiting for the callback goroutine.
	async asyncQueue
	// out: requests waiting for the writer goroutine (batch is nil when
	// the transport cannot write several frames at once).
	out   writeQueue
	batch transport.FrameBatcher
	// recycler takes back request frames after scoped handlers (nil when
	// the transport does not reuse them).
	recycler transport.FrameRecycler

	// asyncPending counts the swept calls (async ones, and sync ones with
	// a deadline) in the pending table;
	// cancellable counts those whose context can end before their
	// deadline; nextExpiry is the earliest deadline (peer clock) of the
	// async calls added since the last sweep.
	asyncPending atomic.Int32
	cancellable  atomic.Int32
	nextExpiry   atomic.Int64

	// work hands requests to idle worker goroutines (handOff);
	// idleWorkers counts those waiting.
	work        chan *Command
	idleWorkers atomic.Int32

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error // why pending calls failed; set before done is closed
	handlers  sync.WaitGroup
	// bg tracks the callback and writer goroutines; Run waits for them.
	bg      sync.WaitGroup
	startMu sync.Mutex

	// badHeaders counts the frames answered for a wrong-shaped header;
	// badHeaderLogged is when one was last logged at WARN (peer clock).
	badHeaders      atomic.Int64
	badHeaderLogged atomic.Int64

	// values lets services attach per-connection state (client id, ...).
	values sync.Map
	// ID is a process-unique connection number.
	ID uint64
}

// pendingShards spreads the pending table over several locks, keyed by
// opaque (sequential, so calls spread evenly).
const pendingShards = 16

type pendingShard struct {
	mu     sync.Mutex
	m      map[int32]*call
	closed bool
	_      [40]byte // keep shards on separate cache lines
}

// call is one pending request: sync calls wait on ch, async ones hold cb.
// Whoever removes a call from the pending table delivers it, once.
type call struct {
	opaque int32
	code   int32
	ch     chan *Command // sync: buffered 1, nil delivered means closed
	cb     func(*Command, error)
	// async: ctx when it can end (checked by the sweep) and the deadline
	// on the peer clock (0: none).
	ctx      context.Context
	deadline int64
	// swept: counted in asyncPending, watched by the sweep (async calls,
	// and sync calls with a deadline of their own).
	swept bool
	resp  *Command
	err   error
}

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan *Command, 1)} }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(c *call) {
	ch := c.ch
	*c = call{ch: ch}
	callPool.Put(c)
}

// peerEpoch anchors the monotonic peer clock of async deadlines.
var peerEpoch = time.Now()

func peerClock(t time.Time) int64 { return int64(t.Sub(peerEpoch)) }

var peerSeq atomic.Uint64

// NewPeer wraps conn. Call Run to start reading.
func NewPeer(conn transport.Conn, h Handler, log *slog.Logger, opts PeerOptions) *Peer {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1024
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = 10 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Peer{
		conn: conn, handler: h, log: log.With("remote", conn.RemoteAddr()),
		sem:   make(chan struct{}, opts.MaxInFlight),
		sweep: opts.SweepInterval,
		done:  make(chan struct{}),
		work:  make(chan *Command),
		ID:    peerSeq.Add(1),
	}
	p.nextExpiry.Store(math.MaxInt64)
	if b, ok := conn.(transport.FrameBatcher); ok {
		p.batch = b
	}
	if r, ok := conn.(transport.FrameRecycler); ok {
		p.recycler = r
	}
	return p
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
		p.bg.Wait()
	}()
	if d, ok := p.conn.(transport.FrameDeliverer); ok {
		// The transport's readers call dispatch, which runs handlers
		// right there: no hand-off to a new goroutine either.
		return d.DeliverFrames(ctx, func(frame []byte) error { return p.dispatch(ctx, frame, true) })
	}
	for {
		frame, err := p.conn.ReadFrame(ctx)
		if err != nil {
			return err
		}
		if err := p.dispatch(ctx, frame, false); err != nil {
			return err
		}
	}
}

// dispatch decodes a received frame and completes the call it answers or
// runs its handler (on this goroutine when inline, otherwise on a new one),
// waiting while MaxInFlight handlers run. It may run on several goroutines
// at once (transport.FrameDeliverer).
func (p *Peer) dispatch(ctx context.Context, frame []byte, inline bool) error {
	cmd, err := Decode(frame)
	if err != nil {
		var he *HeaderShapeError
		if errors.As(err, &he) {
			p.answerBadHeader(ctx, he, frame)
			return nil
		}
		p.log.Warn("closing connection: undecodable frame", "err", err, "bytes", len(frame))
		return err
	}
	if p.recycler != nil {
		cmd.frame, cmd.recycler = frame, p.recycler
	}
	if cmd.IsResponse() {
		p.complete(cmd)
		return nil
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.handlers.Add(1)
	if inline {
		p.serve(ctx, cmd)
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
		p.serve(ctx, req)
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
func (p *Peer) answerBadHeader(ctx context.Context, he *HeaderShapeError, frame []byte) {
	p.logBadHeader(he, len(frame))
	if p.recycler != nil {
		p.recycler.RecycleFrame(frame) // he refers to nothing in it
	}
	switch {
	case he.Flag&FlagResponse != 0:
		p.complete(&Command{
			Code: SystemError, Language: ServerLanguage, Opaque: he.Opaque, Flag: FlagResponse,
			Remark:        "undecodable response header: field " + he.Field + ": " + he.Problem,
			ExtFields:     map[string]string{},
			SerializeType: he.SerializeType,
		})
	case he.Flag&FlagOneway != 0:
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

func (p *Peer) logBadHeader(he *HeaderShapeError, size int) {
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
	err := p.Send(ctx, resp)
	if errors.Is(err, transport.ErrFrameTooLarge) {
		// An answer the frame limit cannot carry would otherwise leave the
		// client waiting for its timeout (and retrying what may already
		// be done): it gets an error answer that says why instead.
		p.log.Warn("response exceeds the frame limit: answered with an error", "code", req.Code, "err", err)
		small := NewResponse(req, SystemError, fmt.Sprintf("the answer to request %d (%s) exceeds the frame limit (remoting.max_frame_size): %v",
			req.Code, RequestCodeName(req.Code), err))
		small.Opaque = req.Opaque
		small.Flag |= FlagResponse
		err = p.Send(ctx, small)
	}
	if err != nil && !errors.Is(err, ErrPeerClosed) {
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

func (p *Peer) shard(opaque int32) *pendingShard {
	return &p.pending[uint32(opaque)%pendingShards]
}

// add registers c; false when the peer is closed.
func (p *Peer) add(c *call) bool {
	sh := p.shard(c.opaque)
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return false
	}
	if sh.m == nil {
		sh.m = make(map[int32]*call)
	}
	sh.m[c.opaque] = c
	sh.mu.Unlock()
	return true
}

// take removes the call of opaque, if it is still pending: the caller
// then delivers it.
func (p *Peer) take(opaque int32) *call {
	sh := p.shard(opaque)
	sh.mu.Lock()
	c, ok := sh.m[opaque]
	if ok {
		delete(sh.m, opaque)
	}
	sh.mu.Unlock()
	if ok {
		p.unswept(c)
	}
	return c
}

// unswept uncounts a call leaving the pending table.
func (p *Peer) unswept(c *call) {
	if !c.swept {
		return
	}
	p.asyncPending.Add(-1)
	if c.ctx != nil {
		p.cancellable.Add(-1)
	}
}

func (p *Peer) complete(resp *Command) {
	c := p.take(resp.Opaque)
	if c == nil {
		return
	}
	if c.cb == nil {
		c.ch <- resp
		return
	}
	c.resp = resp
	p.async.push(p, c)
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
	err := p.writeFrame(ctx, h, c)
	*hb = h
	headerPool.Put(hb)
	if c.Sent != nil {
		c.Sent()
	}
	if err != nil {
		// A frame refused for its size was not written (transports check
		// the length first): the connection stays usable.
		if !errors.Is(err, transport.ErrFrameTooLarge) {
			p.Close()
		}
		return fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
	}
	return nil
}

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

// Reply sends a response prepared with NewResponse for a request whose
// handler returned nil.
func (p *Peer) Reply(ctx context.Context, resp *Command) error {
	resp.Flag |= FlagResponse
	return p.Send(ctx, resp)
}

// Invoke sends req and waits for its response or ctx's end.
func (p *Peer) Invoke(ctx context.Context, req *Command) (*Command, error) {
	return p.InvokeDeadline(ctx, req, time.Time{})
}

// InvokeDeadline is Invoke with the wait also bounded by deadline (when
// not zero) without deriving a context per call: the connection's sweep
// fails the call once it passes (to within SweepInterval), with an error
// wrapping context.DeadlineExceeded.
func (p *Peer) InvokeDeadline(ctx context.Context, req *Command, deadline time.Time) (*Command, error) {
	c := getCall()
	c.opaque, c.code = req.Opaque, req.Code
	if !deadline.IsZero() {
		if d, ok := ctx.Deadline(); !ok || deadline.Before(d) {
			if !p.startAsync() {
				putCall(c)
				return nil, ErrPeerClosed
			}
			c.deadline, c.swept = max(peerClock(deadline), 1), true
			p.asyncPending.Add(1)
		}
	}
	if !p.add(c) {
		p.unswept(c)
		putCall(c)
		return nil, ErrPeerClosed
	}
	if c.swept {
		p.lowerExpiry(c.deadline)
		p.async.wakeIfIdle()
	}
	// Queued for the writer goroutine where the transport has one: the
	// write then needs no cancellation registration for ctx (a sync call's
	// ctx is new every time), and concurrent callers share a flush. ctx
	// still ends the wait; the write itself is bounded by the transport's
	// write timeout.
	var err error
	if p.batch != nil {
		err = p.enqueue(req)
	} else {
		err = p.Send(ctx, req)
	}
	if err != nil {
		p.abandon(c)
		return nil, err
	}
	select {
	case resp := <-c.ch:
		err := c.err
		putCall(c)
		if resp == nil {
			if err == nil {
				err = p.failure()
			}
			return nil, err
		}
		return resp, nil
	case <-ctx.Done():
		p.abandon(c)
		return nil, fmt.Errorf("remoting: request %d to %s: %w", req.Code, p.RemoteAddr(), ctx.Err())
	}
}

// abandon gives up the sync call c: removed from the pending table, or,
// when a response or Close got there first, its delivery is drained, so
// c can go back to the pool.
func (p *Peer) abandon(c *call) {
	if p.take(c.opaque) == nil {
		<-c.ch
	}
	putCall(c)
}

// failure is the error of calls failed by Close.
func (p *Peer) failure() error {
	if p.closeErr != nil {
		return p.closeErr
	}
	return ErrPeerClosed
}

// InvokeAsync sends req and calls cb once with the response, or with the
// error when the connection closes or ctx ends first (noticed by the
// connection's sweep, within PeerOptions.SweepInterval). cb runs on the
// connection's callback goroutine, one call at a time: it may call Invoke
// and InvokeAsync, but a slow cb delays the other callbacks of the
// connection. When InvokeAsync returns an error, cb is not called.
func (p *Peer) InvokeAsync(ctx context.Context, req *Command, cb func(*Command, error)) error {
	return p.InvokeAsyncDeadline(ctx, req, time.Time{}, cb)
}

// InvokeAsyncDeadline is InvokeAsync with the wait also bounded by
// deadline (when not zero), without deriving a context per call. A call
// that expires fails with an error wrapping context.DeadlineExceeded.
func (p *Peer) InvokeAsyncDeadline(ctx context.Context, req *Command, deadline time.Time, cb func(*Command, error)) error {
	select {
	case <-p.done:
		return ErrPeerClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("remoting: request %d to %s: %w", req.Code, p.RemoteAddr(), err)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	if !p.startAsync() {
		return ErrPeerClosed
	}
	c := getCall()
	c.opaque, c.code, c.cb, c.swept = req.Opaque, req.Code, cb, true
	if !deadline.IsZero() {
		c.deadline = max(peerClock(deadline), 1)
	}
	if ctx.Done() != nil {
		c.ctx = ctx
	}
	// Counted before the call is visible, so take never sees it uncounted.
	p.asyncPending.Add(1)
	if c.ctx != nil {
		p.cancellable.Add(1)
	}
	deadlineNs := c.deadline
	if !p.add(c) {
		p.unswept(c)
		putCall(c)
		return ErrPeerClosed
	}
	// After add: a sweep that resets nextExpiry either sees the call in
	// the table or sees this lower bound.
	if deadlineNs != 0 {
		p.lowerExpiry(deadlineNs)
	}
	p.async.wakeIfIdle()
	var err error
	if p.batch != nil && !directAsyncWrites {
		err = p.enqueue(req)
	} else {
		err = p.Send(ctx, req)
	}
	if err != nil {
		if p.take(c.opaque) != nil {
			putCall(c)
			return err
		}
		// Close got there first and fails the call through cb.
	}
	return nil
}

// InvokeOneway sends req without waiting; the oneway bit is set.
func (p *Peer) InvokeOneway(ctx context.Context, req *Command) error {
	req.Flag |= FlagOneway
	return p.Send(ctx, req)
}

// Close closes the connection and fails every pending call.
func (p *Peer) Close() error {
	return p.closeWith(nil)
}

// closeWith closes the peer; pending calls fail with ErrPeerClosed
// wrapping cause, when there is one.
func (p *Peer) closeWith(cause error) error {
	var err error
	p.closeOnce.Do(func() {
		if cause != nil {
			p.closeErr = fmt.Errorf("%w: %w", ErrPeerClosed, cause)
		}
		err = p.conn.Close()
		var failed []*call
		for i := range p.pending {
			sh := &p.pending[i]
			sh.mu.Lock()
			sh.closed = true
			for k, c := range sh.m {
				delete(sh.m, k)
				failed = append(failed, c)
			}
			sh.mu.Unlock()
		}
		for _, c := range failed {
			p.unswept(c)
			if c.cb == nil {
				c.ch <- nil
				continue
			}
			c.err = p.failure()
			p.async.push(p, c)
		}
		// Under startMu, so a goroutine is started (bg.Add) either before
		// done is closed or not at all: Run's bg.Wait comes after.
		p.startMu.Lock()
		close(p.done)
		p.startMu.Unlock()
	})
	return err
}

// startAsync starts the callback goroutine on the first async call; false
// when the peer is closed.
func (p *Peer) startAsync() bool {
	if p.async.started.Load() {
		return true
	}
	p.startMu.Lock()
	defer p.startMu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	if !p.async.started.Load() {
		p.async.wake = make(chan struct{}, 1)
		p.async.idle.Store(true) // no ticker yet: the first call wakes it
		p.bg.Add(1)
		go p.asyncLoop()
		p.async.started.Store(true)
	}
	return true
}

// asyncQueue hands completed async calls to the callback goroutine.
type asyncQueue struct {
	started atomic.Bool
	wake    chan struct{}

	mu      sync.Mutex
	q       []*call
	spare   []*call
	stopped bool // the goroutine is gone: pushers run callbacks themselves

	// idle: the goroutine waits without its sweep ticker.
	idle atomic.Bool
}

// push queues c for its callback.
func (a *asyncQueue) push(p *Peer, c *call) {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		deliver(c)
		return
	}
	first := len(a.q) == 0
	a.q = append(a.q, c)
	a.mu.Unlock()
	if first {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// wakeIfIdle wakes the callback goroutine when it waits without its
// sweep ticker, so that it starts ticking for a new async call.
func (a *asyncQueue) wakeIfIdle() {
	if a.idle.Load() && a.idle.CompareAndSwap(true, false) {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

func deliver(c *call) {
	cb, resp, err := c.cb, c.resp, c.err
	putCall(c)
	cb(resp, err)
}

// asyncLoop runs callbacks and, while async calls are pending, sweeps for
// expired ones every SweepInterval.
func (p *Peer) asyncLoop() {
	defer p.bg.Done()
	a := &p.async
	var tick *time.Ticker
	var tickC <-chan time.Time
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		closed := false
		select {
		case <-a.wake:
		case <-tickC:
			p.expire()
		case <-p.done:
			closed = true
		}
		for {
			a.mu.Lock()
			q := a.q
			if len(q) == 0 {
				a.stopped = closed
				a.mu.Unlock()
				break
			}
			a.q, a.spare = a.spare[:0], nil
			a.mu.Unlock()
			for i, c := range q {
				q[i] = nil
				deliver(c)
			}
			a.mu.Lock()
			a.spare = q[:0]
			a.mu.Unlock()
		}
		if closed {
			return
		}
		if p.asyncPending.Load() > 0 {
			if tick == nil {
				tick = time.NewTicker(p.sweep)
				tickC = tick.C
			}
			continue
		}
		a.idle.Store(true)
		if p.asyncPending.Load() > 0 {
			// An InvokeAsync counted its call before idle was set, so it
			// may not wake us: keep ticking (if it did wake us, the spare
			// wake-up is harmless).
			a.idle.Store(false)
			continue
		}
		if tick != nil {
			tick.Stop()
			tick, tickC = nil, nil
		}
	}
}

func (p *Peer) lowerExpiry(t int64) {
	for {
		cur := p.nextExpiry.Load()
		if t >= cur || p.nextExpiry.CompareAndSwap(cur, t) {
			return
		}
	}
}

// expire fails async calls whose deadline passed or whose ctx ended. It
// scans the table only when one may have: a deadline is due or some call
// has a context that can end.
func (p *Peer) expire() {
	now := peerClock(time.Now())
	if p.cancellable.Load() == 0 && now < p.nextExpiry.Load() {
		return
	}
	p.nextExpiry.Store(math.MaxInt64)
	next := int64(math.MaxInt64)
	var expired []*call
	var lastCtx context.Context
	lastDone := false
	for i := range p.pending {
		sh := &p.pending[i]
		sh.mu.Lock()
		for k, c := range sh.m {
			if !c.swept {
				continue
			}
			var err error
			if c.ctx != nil {
				if c.ctx != lastCtx {
					lastCtx, lastDone = c.ctx, c.ctx.Err() != nil
				}
				if lastDone {
					err = c.ctx.Err()
				}
			}
			if err == nil && c.deadline != 0 {
				if c.deadline <= now {
					err = context.DeadlineExceeded
				} else {
					next = min(next, c.deadline)
				}
			}
			if err == nil {
				continue
			}
			delete(sh.m, k)
			c.err = fmt.Errorf("remoting: request %d to %s: %w", c.code, p.RemoteAddr(), err)
			expired = append(expired, c)
		}
		sh.mu.Unlock()
	}
	p.lowerExpiry(next)
	for _, c := range expired {
		p.unswept(c)
		if c.cb == nil {
			c.ch <- nil // c.err says why
			continue
		}
		deliver(c)
	}
}

// directAsyncWrites makes InvokeAsync write from the caller's goroutine
// (the transport's write combining) instead of through the writer
// goroutine; a test switch, for measuring one against the other.
var directAsyncWrites = false

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
	w.q = append(w.q, outFrame{hdr: hb, body: req.Body, parts: req.BodyParts})
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
// a failed write closes the peer, as the writer goroutine's does.
func (p *Peer) writeDirect(hdr []byte, req *Command) error {
	err := p.writeFrame(context.Background(), hdr, req)
	if err != nil {
		err = fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
		p.closeWith(err)
	}
	return err
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
// flush) per batch, until the peer closes. A failed write closes the peer,
// failing the pending calls.
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
				p.closeWith(fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err))
				return
			}
		}
	}
}
