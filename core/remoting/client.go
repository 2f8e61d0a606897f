package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/transport"
)

// DialFunc opens a frame connection to addr.
type DialFunc func(ctx context.Context, addr string) (transport.Conn, error)

// Client keeps one connection per remote address, dialled on first use and
// redialled after it fails, and serves requests the remote side sends back
// with its Handler (which may be nil).
type Client struct {
	dial    DialFunc
	handler Handler
	log     *slog.Logger
	opts    PeerOptions

	mu      sync.Mutex
	peers   map[string]*Peer
	dialing map[string]chan struct{}
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewClient returns a client dialling with dial.
func NewClient(dial DialFunc, h Handler, log *slog.Logger, opts PeerOptions) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{dial: dial, handler: h, log: log, opts: opts, peers: map[string]*Peer{}, dialing: map[string]chan struct{}{}, ctx: ctx, cancel: cancel}
}

// Peer returns the connection to addr, dialling it if needed.
func (c *Client) Peer(ctx context.Context, addr string) (*Peer, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrPeerClosed
		}
		if p, ok := c.peers[addr]; ok {
			select {
			case <-p.Done():
				delete(c.peers, addr)
			default:
				c.mu.Unlock()
				return p, nil
			}
		}
		if wait, ok := c.dialing[addr]; ok {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait := make(chan struct{})
		c.dialing[addr] = wait
		c.mu.Unlock()

		conn, err := c.dial(ctx, addr)
		c.mu.Lock()
		delete(c.dialing, addr)
		close(wait)
		if err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
		}
		if c.closed {
			c.mu.Unlock()
			conn.Close()
			return nil, ErrPeerClosed
		}
		p := NewPeer(conn, c.handler, c.log, c.opts)
		c.peers[addr] = p
		c.wg.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.wg.Done()
			p.Run(c.ctx) //nolint:errcheck // the peer ends with its connection; errors are logged by Run
			c.mu.Lock()
			if c.peers[addr] == p {
				delete(c.peers, addr)
			}
			c.mu.Unlock()
		}()
		return p, nil
	}
}

// Invoke sends req to addr and waits for the response.
func (c *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	p, err := c.Peer(ctx, addr)
	if err != nil {
		return nil, err
	}
	return p.Invoke(ctx, req)
}

// InvokeDeadline is Invoke with the wait also bounded by deadline
// (Peer.InvokeDeadline).
func (c *Client) InvokeDeadline(ctx context.Context, addr string, req *Command, deadline time.Time) (*Command, error) {
	p, err := c.Peer(ctx, addr)
	if err != nil {
		return nil, err
	}
	return p.InvokeDeadline(ctx, req, deadline)
}

// InvokeOneway sends req to addr without waiting.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	p, err := c.Peer(ctx, addr)
	if err != nil {
		return err
	}
	return p.InvokeOneway(ctx, req)
}

// InvokeAsync sends req to addr and calls cb with the outcome.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *Command, cb func(*Command, error)) error {
	p, err := c.Peer(ctx, addr)
	if err != nil {
		return err
	}
	return p.InvokeAsync(ctx, req, cb)
}

// InvokeAsyncDeadline is InvokeAsync with the wait also bounded by
// deadline (Peer.InvokeAsyncDeadline).
func (c *Client) InvokeAsyncDeadline(ctx context.Context, addr string, req *Command, deadline time.Time, cb func(*Command, error)) error {
	p, err := c.Peer(ctx, addr)
	if err != nil {
		return err
	}
	return p.InvokeAsyncDeadline(ctx, req, deadline, cb)
}

// CloseAddr drops the connection to addr, if any.
func (c *Client) CloseAddr(addr string) {
	c.mu.Lock()
	p := c.peers[addr]
	delete(c.peers, addr)
	c.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// Close closes every connection and waits for their readers.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	peers := c.peers
	c.peers = map[string]*Peer{}
	c.mu.Unlock()
	c.cancel()
	for _, p := range peers {
		p.Close()
	}
	c.wg.Wait()
	return nil
}
