// Package tcp is the TCP transport: RocketMQ remoting frames, each behind
// its 4-byte big-endian total length, over a net.Conn.
package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/transport"
)

// Provider is the transport descriptor registered with the kernel.
type Provider struct{}

var _ transport.Provider = Provider{}

// NewProvider returns the provider.
func NewProvider() Provider { return Provider{} }

// ID implements transport.Provider.
func (Provider) ID() string { return "tcp" }

// NewConfig implements transport.Provider.
func (Provider) NewConfig() any { return NewConfig() }

func cfgOf(cfg any) *Config {
	if c, ok := cfg.(*Config); ok && c != nil {
		return c
	}
	return NewConfig()
}

// Listen implements transport.Provider.
func (Provider) Listen(ctx context.Context, addr string, cfg any, deps transport.Deps) (transport.Listener, error) {
	return Listen(ctx, addr, cfgOf(cfg), deps.MaxFrameSize)
}

// Dial implements transport.Provider.
func (Provider) Dial(ctx context.Context, addr string, cfg any, deps transport.Deps) (transport.Conn, error) {
	return Dial(ctx, addr, cfgOf(cfg), deps.MaxFrameSize)
}

// Listener accepts TCP frame connections.
type Listener struct {
	ln       net.Listener
	cfg      *Config
	maxFrame int
}

var _ transport.Listener = (*Listener)(nil)

// Listen binds addr.
func Listen(ctx context.Context, addr string, cfg *Config, maxFrame int) (*Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	return &Listener{ln: ln, cfg: cfg, maxFrame: maxOr(maxFrame)}, nil
}

func maxOr(n int) int {
	if n <= 0 {
		return transport.DefaultMaxFrameSize
	}
	return n
}

// Accept waits for the next connection or ctx's end.
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	stop := context.AfterFunc(ctx, func() {
		if tl, ok := l.ln.(*net.TCPListener); ok {
			tl.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	c, err := l.ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, transport.ErrClosed
		}
		return nil, fmt.Errorf("tcp: accept: %w", err)
	}
	return NewConn(c, l.cfg, l.maxFrame), nil
}

// Addr is the bound address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops listening.
func (l *Listener) Close() error { return l.ln.Close() }

// Dial connects to addr.
func Dial(ctx context.Context, addr string, cfg *Config, maxFrame int) (*Conn, error) {
	d := net.Dialer{Timeout: cfg.DialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	return NewConn(c, cfg, maxOr(maxFrame)), nil
}

// Conn frames a net.Conn.
type Conn struct {
	c        net.Conn
	r        *bufio.Reader
	cfg      *Config
	maxFrame int

	wmu sync.Mutex
	w   *bufio.Writer

	closeOnce sync.Once
	closed    chan struct{}
}

var _ transport.Conn = (*Conn)(nil)

// NewConn wraps an established connection.
func NewConn(c net.Conn, cfg *Config, maxFrame int) *Conn {
	if cfg == nil {
		cfg = NewConfig()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(cfg.NoDelay)
	}
	return &Conn{c: c, r: bufio.NewReaderSize(c, cfg.ReadBuffer), w: bufio.NewWriterSize(c, cfg.WriteBuffer),
		cfg: cfg, maxFrame: maxOr(maxFrame), closed: make(chan struct{})}
}

// ReadFrame reads one length-prefixed frame. A declared length above the
// frame limit, or below the 4 bytes of the header-length word, is an error
// (the caller closes the connection) and nothing is allocated for it.
func (c *Conn) ReadFrame(ctx context.Context) ([]byte, error) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { c.c.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	if c.cfg.IdleTimeout > 0 {
		c.c.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	}
	var lb [4]byte
	if _, err := io.ReadFull(c.r, lb[:]); err != nil {
		return nil, c.readErr(ctx, err)
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if n < 4 {
		return nil, fmt.Errorf("%w: declared length %d", transport.ErrBadFrame, n)
	}
	if n > int64(c.maxFrame) {
		return nil, fmt.Errorf("%w: declared length %d exceeds %d", transport.ErrFrameTooLarge, n, c.maxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, c.readErr(ctx, fmt.Errorf("tcp: truncated frame of %d bytes: %w", n, err))
	}
	return buf, nil
}

func (c *Conn) readErr(ctx context.Context, err error) error {
	select {
	case <-c.closed:
		return transport.ErrClosed
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// WriteFrame writes the length prefix and parts as one frame and flushes.
func (c *Conn) WriteFrame(ctx context.Context, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.maxFrame {
		return fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, c.maxFrame)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return transport.ErrClosed
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetWriteDeadline(dl)
	} else if c.cfg.WriteTimeout > 0 {
		c.c.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	}
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], uint32(n))
	c.w.Write(lb[:])
	for _, p := range parts {
		c.w.Write(p)
	}
	if err := c.w.Flush(); err != nil {
		c.Close()
		return fmt.Errorf("tcp: write to %s: %w", c.RemoteAddr(), err)
	}
	return nil
}

// LocalAddr implements transport.Conn.
func (c *Conn) LocalAddr() string { return c.c.LocalAddr().String() }

// RemoteAddr implements transport.Conn.
func (c *Conn) RemoteAddr() string { return c.c.RemoteAddr().String() }

// Close closes the socket.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.c.Close()
	})
	return err
}
