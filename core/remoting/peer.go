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

	"github.com/quivermq/quiver/core/remoting/codec"
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
// to its Handler, each on a worker goroutine of the connection (warm ones
// are reused, dispatch.go) so requests on one connection are served
// concurrently and answered out of order.
//
// Calls cost no goroutine, channel or timer each: a pending call is a
// pooled entry in a sharded table; a sync call waits on its entry's pooled
// channel; an async call's entry holds its callback, which the
// connection's callback goroutine runs (it also sweeps for expired
// calls). On transports that can write several frames at once (tcp) the
// requests of Invoke and InvokeAsync are encoded into pooled buffers and
// the connection's writer goroutine sends whatever is queued with one
// flush. The answers of ReplyLater go through that goroutine on every
// transport, built there in turn, so that a peer that does not read holds
// up only its own connection. Both
// goroutines start on first use and end with the connection. Send
// (responses, oneway requests) writes from the caller, as before.
type Peer struct {
	conn    transport.Conn
	handler Handler
	log     *slog.Logger
	sem     chan struct{}
	sweep   time.Duration

	pending pendingTable

	// async: completed async calls waiting for the callback goroutine.
	async asyncQueue
	// w writes the connection's frames (writer.go).
	w writer
	// recycler takes back request frames after scoped handlers (nil when
	// the transport does not reuse them).
	recycler transport.FrameRecycler

	// router, when the handler is one, says which requests run on the
	// reader and how sends are decoded; ahead tells the reader whether a
	// whole frame is buffered; replies are the queued answers of requests
	// run there (inline.go), touched only by the reading goroutine.
	router  *Router
	ahead   frameLookahead
	replies replyQueue

	// work hands requests to idle worker goroutines (handOff);
	// idleWorkers counts those waiting.
	work        chan *Command
	idleWorkers atomic.Int32

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error // why pending calls failed; set before done is closed
	handlers  sync.WaitGroup
	// bg tracks the workers and what spawn starts; Run waits for them.
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
	p.pending.nextExpiry.Store(math.MaxInt64) // no deadline yet
	p.w.conn, p.w.log, p.w.done, p.w.spawn = conn, p.log, p.done, p.spawn
	p.w.fail = func(err error) { p.closeWith(err) } //nolint:errcheck // closing anyway; the first error is kept and reported
	p.w.batch, _ = conn.(transport.FrameBatcher)
	p.recycler, _ = conn.(transport.FrameRecycler)
	p.router, _ = h.(*Router)
	p.ahead, _ = conn.(frameLookahead)
	return p
}

// spawn runs f on a goroutine Run waits for; false, f not run, when the
// peer is closed. Under startMu, so a goroutine is started (bg.Add)
// either before done is closed or not at all: Run's bg.Wait comes after.
func (p *Peer) spawn(f func()) bool {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		f()
	}()
	return true
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
	// Answers of requests served on this goroutine (inline.go) are
	// written once no whole frame is left to read, or at the bounds.
	defer p.flushReplies(ctx)
	for {
		frame, err := p.conn.ReadFrame(ctx)
		if err != nil {
			return err
		}
		if err := p.dispatch(ctx, frame, false); err != nil {
			return err
		}
		if p.replyDue() {
			p.flushReplies(ctx)
		}
	}
}

// Send writes one command.
func (p *Peer) Send(ctx context.Context, c *Command) error {
	select {
	case <-p.done:
		return ErrPeerClosed
	default:
	}
	if err := p.w.send(ctx, c); err != nil {
		// A frame refused for its size was not written (transports check
		// the length first): the connection stays usable.
		if !errors.Is(err, transport.ErrFrameTooLarge) {
			p.Close()
		}
		return fmt.Errorf("remoting: write to %s: %w", p.RemoteAddr(), err)
	}
	return nil
}

// Reply sends a response prepared with NewResponse for a request whose
// handler returned nil.
func (p *Peer) Reply(ctx context.Context, resp *Command) error {
	resp.Flag |= codec.FlagResponse
	return p.Send(ctx, resp)
}

// InvokeOneway sends req without waiting; the oneway bit is set.
func (p *Peer) InvokeOneway(ctx context.Context, req *Command) error {
	req.Flag |= codec.FlagOneway
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
		for _, c := range p.pending.close() {
			if c.cb == nil {
				c.ch <- nil
				continue
			}
			c.err = p.failure()
			p.async.push(p, c)
		}
		// Under startMu: see spawn.
		p.startMu.Lock()
		close(p.done)
		p.startMu.Unlock()
	})
	return err
}
