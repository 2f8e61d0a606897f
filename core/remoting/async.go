package remoting

// Async calls: their callbacks run on the connection's callback
// goroutine, which also sweeps for expired calls.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

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
	if !p.pending.add(c) {
		putCall(c)
		return ErrPeerClosed
	}
	p.async.wakeIfIdle()
	var err error
	if p.w.batch != nil && !directAsyncWrites {
		err = p.w.enqueue(req)
	} else {
		err = p.Send(ctx, req)
	}
	if err != nil {
		if p.pending.take(c.opaque) != nil {
			putCall(c)
			return err
		}
		// Close got there first and fails the call through cb.
	}
	return nil
}

// startAsync starts the callback goroutine on the first async call; false
// when the peer is closed.
func (p *Peer) startAsync() bool {
	a := &p.async
	if a.started.Load() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started.Load() {
		a.wake = make(chan struct{}, 1)
		a.idle.Store(true) // no ticker yet: the first call wakes it
		if !p.spawn(p.asyncLoop) {
			return false
		}
		a.started.Store(true)
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
		if p.pending.swept.Load() > 0 {
			if tick == nil {
				tick = time.NewTicker(p.sweep)
				tickC = tick.C
			}
			continue
		}
		a.idle.Store(true)
		if p.pending.swept.Load() > 0 {
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

// directAsyncWrites makes InvokeAsync write from the caller's goroutine
// (the transport's write combining) instead of through the writer
// goroutine; a test switch, for measuring one against the other.
var directAsyncWrites = false
