package remoting

// The pending-call table: calls waiting for their response, keyed by
// opaque in sharded maps, and the sweep that fails expired ones.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

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
