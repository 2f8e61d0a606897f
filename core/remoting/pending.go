package remoting

// The pending-call table: calls waiting for their response, keyed by
// opaque in sharded maps, and the sweep that fails expired ones; sync
// calls.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
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
	// swept: counted in the table's swept, watched by the sweep (async calls,
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

// pendingTable holds the calls waiting for their response.
type pendingTable struct {
	shards [pendingShards]pendingShard
	// swept counts the calls the sweep watches (async ones, and sync ones
	// with a deadline of their own); cancellable those of them whose
	// context can end before their deadline; nextExpiry is the earliest
	// deadline (peer clock) of those added since the last sweep.
	swept       atomic.Int32
	cancellable atomic.Int32
	nextExpiry  atomic.Int64
}

func (t *pendingTable) shard(opaque int32) *pendingShard {
	return &t.shards[uint32(opaque)%pendingShards]
}

// add registers c, counted first when swept, so that take never sees it
// uncounted; false when the table is closed.
func (t *pendingTable) add(c *call) bool {
	if c.swept {
		t.swept.Add(1)
		if c.ctx != nil {
			t.cancellable.Add(1)
		}
	}
	sh := t.shard(c.opaque)
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		t.unswept(c)
		return false
	}
	if sh.m == nil {
		sh.m = make(map[int32]*call)
	}
	sh.m[c.opaque] = c
	sh.mu.Unlock()
	// After the insert: a sweep that resets nextExpiry either sees the
	// call in the table or sees this lower bound.
	if c.swept && c.deadline != 0 {
		t.lowerExpiry(c.deadline)
	}
	return true
}

// take removes the call of opaque, if it is still pending: the caller
// then delivers it.
func (t *pendingTable) take(opaque int32) *call {
	sh := t.shard(opaque)
	sh.mu.Lock()
	c, ok := sh.m[opaque]
	if ok {
		delete(sh.m, opaque)
	}
	sh.mu.Unlock()
	if ok {
		t.unswept(c)
	}
	return c
}

// unswept uncounts a call leaving the table.
func (t *pendingTable) unswept(c *call) {
	if !c.swept {
		return
	}
	t.swept.Add(-1)
	if c.ctx != nil {
		t.cancellable.Add(-1)
	}
}

// close refuses further calls and takes out every pending one.
func (t *pendingTable) close() []*call {
	var out []*call
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.closed = true
		for _, c := range sh.m {
			t.unswept(c)
			out = append(out, c)
		}
		sh.m = nil
		sh.mu.Unlock()
	}
	return out
}

func (t *pendingTable) lowerExpiry(at int64) {
	for {
		cur := t.nextExpiry.Load()
		if at >= cur || t.nextExpiry.CompareAndSwap(cur, at) {
			return
		}
	}
}

// expired takes out the swept calls whose deadline passed by now (peer
// clock) or whose ctx ended, each with c.err saying which. It scans the
// table only when one may have: a deadline is due or some call has a
// context that can end.
func (t *pendingTable) expired(now int64) []*call {
	if t.cancellable.Load() == 0 && now < t.nextExpiry.Load() {
		return nil
	}
	t.nextExpiry.Store(math.MaxInt64)
	next := int64(math.MaxInt64)
	var out []*call
	var lastCtx context.Context
	lastDone := false
	for i := range t.shards {
		sh := &t.shards[i]
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
			t.unswept(c)
			c.err = err
			out = append(out, c)
		}
		sh.mu.Unlock()
	}
	t.lowerExpiry(next)
	return out
}

func (p *Peer) complete(resp *Command) {
	c := p.pending.take(resp.Opaque)
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
		}
	}
	if !p.pending.add(c) {
		putCall(c)
		return nil, ErrPeerClosed
	}
	if c.swept {
		p.async.wakeIfIdle()
	}
	// Queued for the writer goroutine where the transport has one: the
	// write then needs no cancellation registration for ctx (a sync call's
	// ctx is new every time), and concurrent callers share a flush. ctx
	// still ends the wait; the write itself is bounded by the transport's
	// write timeout.
	var err error
	if p.w.batch != nil {
		err = p.w.enqueue(req)
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
	if p.pending.take(c.opaque) == nil {
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

// expire fails the calls whose deadline passed or whose ctx ended.
func (p *Peer) expire() {
	for _, c := range p.pending.expired(peerClock(time.Now())) {
		c.err = fmt.Errorf("remoting: request %d to %s: %w", c.code, p.RemoteAddr(), c.err)
		if c.cb == nil {
			c.ch <- nil // c.err says why
			continue
		}
		deliver(c)
	}
}
