package transport_test

// memTransport is an in-memory frame transport. It serves two purposes:
// it runs transporttest, which shows the suite asks nothing TCP-specific of
// a transport (NATS and QUIC frame messages, not byte streams), and it is
// the fake provider of the Set tests.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/quivermq/quiver/core/transport"
)

type memNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	next      int
}

func newMemNet() *memNet { return &memNet{listeners: map[string]*memListener{}} }

func (n *memNet) addr() string {
	n.next++
	return "memory:" + strconv.Itoa(n.next)
}

func (n *memNet) listen(addr string, maxFrame int) (*memListener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "" || addr == "memory:0" {
		addr = n.addr()
	}
	if _, dup := n.listeners[addr]; dup {
		return nil, fmt.Errorf("mem: %s in use", addr)
	}
	l := &memListener{net: n, addr: addr, maxFrame: maxFrame, conns: make(chan *memConn), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

func (n *memNet) dial(ctx context.Context, addr string, maxFrame int) (*memConn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	local := n.addr()
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("mem: dial %s: connection refused", addr)
	}
	a, b := newHalf(), newHalf()
	client := &memConn{in: a, out: b, local: local, remote: addr, maxFrame: maxFrame, closed: make(chan struct{})}
	server := &memConn{in: b, out: a, local: addr, remote: local, maxFrame: l.maxFrame, closed: make(chan struct{})}
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("mem: dial %s: connection refused", addr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memListener struct {
	net      *memNet
	addr     string
	maxFrame int
	conns    chan *memConn
	once     sync.Once
	done     chan struct{}
}

func (l *memListener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case <-l.done:
		return nil, transport.ErrClosed
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, transport.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Addr() string { return l.addr }

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		delete(l.net.listeners, l.addr)
		l.net.mu.Unlock()
	})
	return nil
}

// half is one direction: an unbounded queue of frames.
type half struct {
	mu     sync.Mutex
	frames [][]byte
	closed bool          // the writer closed
	notify chan struct{} // signalled on every change
}

func newHalf() *half { return &half{notify: make(chan struct{}, 1)} }

func (h *half) signal() {
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

type memConn struct {
	in, out       *half
	local, remote string
	maxFrame      int
	once          sync.Once
	closed        chan struct{}
}

func (c *memConn) ReadFrame(ctx context.Context) ([]byte, error) {
	for {
		select {
		case <-c.closed:
			return nil, transport.ErrClosed
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.in.mu.Lock()
		if len(c.in.frames) > 0 {
			f := c.in.frames[0]
			c.in.frames = c.in.frames[1:]
			c.in.mu.Unlock()
			return f, nil
		}
		eof := c.in.closed
		c.in.mu.Unlock()
		if eof {
			return nil, io.EOF
		}
		select {
		case <-c.in.notify:
		case <-c.closed:
		case <-ctx.Done():
		}
	}
}

func (c *memConn) WriteFrame(ctx context.Context, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.maxFrame {
		return fmt.Errorf("%w: %d bytes", transport.ErrFrameTooLarge, n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return transport.ErrClosed
	default:
	}
	f := make([]byte, 0, n)
	for _, p := range parts {
		f = append(f, p...)
	}
	c.in.mu.Lock()
	peerGone := c.in.closed // the peer closed its sending side, so all of it
	c.in.mu.Unlock()
	if peerGone {
		return io.ErrClosedPipe
	}
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	c.out.frames = append(c.out.frames, f)
	c.out.signal()
	return nil
}

func (c *memConn) LocalAddr() string  { return c.local }
func (c *memConn) RemoteAddr() string { return c.remote }

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.out.mu.Lock()
		c.out.closed = true
		c.out.signal()
		c.out.mu.Unlock()
	})
	return nil
}

// memProvider is a transport.Provider over a memNet.
type memProvider struct {
	id      string
	net     *memNet
	failOn  string // Listen fails for this address
	mu      sync.Mutex
	gotCfgs []any
}

type memConfig struct{ Name string }

func (p *memProvider) ID() string     { return p.id }
func (p *memProvider) NewConfig() any { return &memConfig{} }

func (p *memProvider) Listen(_ context.Context, addr string, cfg any, deps transport.Deps) (transport.Listener, error) {
	p.mu.Lock()
	p.gotCfgs = append(p.gotCfgs, cfg)
	p.mu.Unlock()
	if addr == p.failOn {
		return nil, fmt.Errorf("mem: cannot listen on %s", addr)
	}
	return p.net.listen(p.id+"-"+addr, max(deps.MaxFrameSize, 1))
}

func (p *memProvider) Dial(ctx context.Context, addr string, _ any, deps transport.Deps) (transport.Conn, error) {
	return p.net.dial(ctx, p.id+"-"+addr, max(deps.MaxFrameSize, 1))
}
