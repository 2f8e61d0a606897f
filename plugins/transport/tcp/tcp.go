// Package tcp is the TCP transport: RocketMQ remoting frames, each behind
// its 4-byte big-endian total length, over a net.Conn.
package tcp

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/transport"
)

// Provider is the transport descriptor registered with the kernel.
type Provider = transport.Descriptor[Config]

// NewProvider returns the provider (transport.Define).
func NewProvider() *Provider {
	return transport.Define("tcp", NewConfig,
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Listener, error) {
			ln, err := listen(ctx, addr, cfg, deps.MaxFrameSize, deps.Logger)
			if err != nil {
				return nil, err
			}
			return ln, nil
		},
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Conn, error) {
			c, err := Dial(ctx, addr, cfg, deps.MaxFrameSize)
			if err != nil {
				return nil, err
			}
			return c, nil
		})
}

// Listener accepts TCP frame connections.
type Listener struct {
	ln       net.Listener
	cfg      *Config
	maxFrame int
	tls      *tls.Config
}

var _ transport.Listener = (*Listener)(nil)

// Listen binds addr.
func Listen(ctx context.Context, addr string, cfg *Config, maxFrame int) (*Listener, error) {
	return listen(ctx, addr, cfg, maxFrame, nil)
}

func listen(ctx context.Context, addr string, cfg *Config, maxFrame int, log *slog.Logger) (*Listener, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	l := &Listener{cfg: cfg, maxFrame: maxOr(maxFrame)}
	if cfg.TLS.Enabled {
		var err error
		if l.tls, err = serverTLS(&cfg.TLS, addr, log); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	l.ln = ln
	return l, nil
}

func maxOr(n int) int {
	if n <= 0 {
		return transport.DefaultMaxFrameSize
	}
	return n
}

// Accept waits for the next connection or ctx's end.
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tl, _ := l.ln.(*net.TCPListener)
		if tl != nil {
			// A deadline set by an earlier Accept's cancelled ctx must not
			// fail this one.
			tl.SetDeadline(time.Time{}) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
		}
		var stop func() bool
		fired := make(chan struct{})
		if tl != nil {
			stop = context.AfterFunc(ctx, func() {
				tl.SetDeadline(aLongTimeAgo) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
				close(fired)
			})
		}
		c, err := l.ln.Accept()
		if stop != nil && !stop() {
			<-fired
		}
		if err != nil {
			if ctx.Err() != nil {
				if c != nil {
					c.Close()
				}
				return nil, ctx.Err()
			}
			if errors.Is(err, net.ErrClosed) {
				return nil, transport.ErrClosed
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Another Accept's ctx ended; ours did not.
				continue
			}
			return nil, fmt.Errorf("tcp: accept: %w", err)
		}
		if l.tls != nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(l.cfg.NoDelay) //nolint:errcheck // an option: the connection works without it
			}
			// Handshake in the background, so a slow or silent client does
			// not hold up Accept; reads wait for it. A client that does not
			// finish it in time is dropped.
			tc := tls.Server(c, l.tls)
			conn := NewConn(tc, l.cfg, l.maxFrame)
			conn.fullFrames = true
			go func() {
				hctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
				defer cancel()
				if err := tc.HandshakeContext(hctx); err != nil {
					conn.Close()
				}
			}()
			return conn, nil
		}
		conn := NewConn(c, l.cfg, l.maxFrame)
		conn.fullFrames = true
		return conn, nil
	}
}

// tlsHandshakeTimeout bounds a server-side TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// aLongTimeAgo is a deadline in the past, to unblock I/O at once.
var aLongTimeAgo = time.Unix(1, 0)

// Addr is the bound address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops listening.
func (l *Listener) Close() error { return l.ln.Close() }

// Dial connects to addr.
func Dial(ctx context.Context, addr string, cfg *Config, maxFrame int) (*Conn, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	d := net.Dialer{Timeout: cfg.DialTimeout}
	var c net.Conn
	var err error
	if cfg.TLS.Enabled {
		tc, terr := clientTLS(&cfg.TLS, addr)
		if terr != nil {
			return nil, terr
		}
		td := tls.Dialer{NetDialer: &d, Config: tc}
		c, err = td.DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	conn := NewConn(c, cfg, maxOr(maxFrame))
	// A dialled connection reads from a server it chose: its frames
	// (pull responses of up to a few hundred KiB) are allocated whole at
	// once rather than grown as they arrive, which costs a copy and a
	// cleared allocation per doubling.
	conn.eager = conn.maxFrame
	return conn, nil
}

// Conn frames a net.Conn.
type Conn struct {
	c        net.Conn
	r        *bufio.Reader
	cfg      *Config
	maxFrame int
	eager    int // frames up to this size are allocated at once (readBody)
	// fullFrames: new frame buffers get their pool class's whole capacity
	// (accepted connections, whose frames remoting gives back).
	fullFrames bool

	wmu sync.Mutex
	w   *bufio.Writer
	// writers counts WriteFrame calls waiting for or holding wmu. A writer
	// that sees another one queued behind it leaves its bytes in w for that
	// one to flush: under concurrent writes (pipelined requests, many
	// responses in flight) frames go out in one write syscall per batch
	// instead of one per frame. The last writer always flushes.
	writers atomic.Int32
	// wctx is the context of the last WriteFrame with its AfterFunc
	// registration (wstop, wfired), kept while the next writer passes the
	// same ctx (a server's responses all carry the connection's). Guarded
	// by wmu.
	wctx   context.Context
	wstop  func() bool
	wfired chan struct{}
	// wdl is the write deadline last set (wdlSet: it is known; an
	// AfterFunc that fired has replaced it). Guarded by wmu.
	wdl    time.Time
	wdlSet bool

	// rerr is a sticky read error: once a frame could not be read whole the
	// stream has lost its framing. Only the reading goroutine touches it.
	rerr error
	// rctx is the context of the last ReadFrame with its AfterFunc
	// registration (rstop, rfired): a reader that passes the same ctx on
	// every call (remoting.Peer) registers once, not once per frame. Only
	// the reading goroutine touches them.
	rctx   context.Context
	rstop  func() bool
	rfired chan struct{}
	// rdl is the read deadline last set (rdlSet: it is known; an
	// AfterFunc that fired has replaced it). Only the reading goroutine
	// touches them.
	rdl    time.Time
	rdlSet bool

	closeOnce sync.Once
	closed    chan struct{}
}

var _ transport.Conn = (*Conn)(nil)
var _ transport.FrameBatcher = (*Conn)(nil)

// NewConn wraps an established connection.
func NewConn(c net.Conn, cfg *Config, maxFrame int) *Conn {
	if cfg == nil {
		cfg = NewConfig()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(cfg.NoDelay) //nolint:errcheck // an option: the connection works without it
	}
	return &Conn{c: c, r: bufio.NewReaderSize(c, cfg.ReadBuffer), w: bufio.NewWriterSize(c, cfg.WriteBuffer), eager: eagerAlloc,
		cfg: cfg, maxFrame: maxOr(maxFrame), closed: make(chan struct{})}
}

// ReadFrame reads one length-prefixed frame. A declared length above the
// frame limit, or below the 4 bytes of the header-length word, is an error
// (the caller closes the connection) and nothing is allocated for it.
//
// When ctx ends or the idle timeout expires before any byte of a frame has
// arrived, the connection stays usable; when it happens in the middle of a
// frame, the stream has lost its framing and the connection is closed.
func (c *Conn) ReadFrame(ctx context.Context) ([]byte, error) {
	b, err := c.readFrame(ctx)
	if err != nil {
		c.releaseReadCtx()
	}
	return b, err
}

// releaseReadCtx drops the AfterFunc registration of the last read's ctx,
// waiting for it if it has fired, so its past deadline cannot land on a
// read under another ctx.
func (c *Conn) releaseReadCtx() {
	if c.rstop == nil {
		return
	}
	if !c.rstop() {
		<-c.rfired
		c.rdlSet = false
	}
	c.rctx, c.rstop, c.rfired = nil, nil, nil
}

// deadlineSlack lets an idle (or write) deadline be renewed only once per
// eighth of its timeout instead of on every frame: setting a deadline
// takes the runtime's timer lock. A deadline is set to now + timeout +
// timeout/8 and kept while at least timeout remains, so it never fires
// before timeout has passed without a frame, and at most timeout/8 after.
const deadlineSlack = 8

// setReadDeadline sets the read deadline to t, or, with renew, to at
// least now+d (d > 0) without touching a deadline that already is.
func (c *Conn) setReadDeadline(t time.Time) {
	c.c.SetReadDeadline(t) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
	c.rdl, c.rdlSet = t, true
}

func (c *Conn) renewReadDeadline(d time.Duration) {
	now := time.Now()
	if c.rdlSet && !c.rdl.IsZero() && !c.rdl.Before(now.Add(d)) {
		return
	}
	c.setReadDeadline(now.Add(d + d/deadlineSlack))
}

func (c *Conn) readFrame(ctx context.Context) ([]byte, error) {
	if c.rerr != nil {
		return nil, c.readErr(ctx, c.rerr)
	}
	if err := ctx.Err(); err != nil {
		return nil, c.readErr(ctx, err)
	}
	if ctx != c.rctx {
		c.releaseReadCtx()
	}
	// Set the idle deadline first, so that a ctx that ends meanwhile wins:
	// its AfterFunc runs after this, or ctx.Err below sees it.
	if c.cfg.IdleTimeout > 0 {
		c.renewReadDeadline(c.cfg.IdleTimeout)
	} else if !c.rdlSet || !c.rdl.IsZero() {
		c.setReadDeadline(time.Time{})
	}
	if ctx.Done() != nil {
		if c.rstop == nil {
			fired := make(chan struct{})
			c.rctx, c.rfired = ctx, fired
			c.rstop = context.AfterFunc(ctx, func() {
				c.c.SetReadDeadline(aLongTimeAgo) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
				close(fired)
			})
		} else if ctx.Err() != nil {
			// The registration fired before the deadline above was set.
			c.setReadDeadline(aLongTimeAgo)
		}
	}
	var lb [4]byte
	if n, err := io.ReadFull(c.r, lb[:]); err != nil {
		if n > 0 {
			c.Close()
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			err = fmt.Errorf("tcp: truncated frame length: %w", err)
		}
		return nil, c.readErr(ctx, err)
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if n < 4 {
		c.rerr = fmt.Errorf("%w: declared length %d", transport.ErrBadFrame, n)
		return nil, c.rerr
	}
	if n > int64(c.maxFrame) {
		c.rerr = fmt.Errorf("%w: declared length %d exceeds %d", transport.ErrFrameTooLarge, n, c.maxFrame)
		return nil, c.rerr
	}
	// Once a frame has started it must arrive within the read timeout, so
	// a slow sender cannot hold a connection's frame open indefinitely. A
	// frame already whole in the buffer needs no more reading.
	if rt := c.cfg.ReadTimeout; rt > 0 && (c.cfg.IdleTimeout <= 0 || rt < c.cfg.IdleTimeout) && c.r.Buffered() < int(n) {
		c.setReadDeadline(time.Now().Add(rt))
		if ctx.Err() != nil {
			c.setReadDeadline(aLongTimeAgo)
		}
	}
	buf, err := readBody(c.r, int(n), c.eager, c.fullFrames)
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, c.readErr(ctx, fmt.Errorf("tcp: truncated frame of %d bytes: %w", n, err))
	}
	return buf, nil
}

// FrameBuffered reports whether a whole frame (or a length that ReadFrame
// refuses at once) is already in the read buffer, so the next ReadFrame
// returns without reading the socket. Remoting writes the answers it
// queued while serving requests on the reader once this is false. Only
// the reading goroutine may call it.
func (c *Conn) FrameBuffered() bool {
	n := c.r.Buffered()
	if n < 4 || c.rerr != nil {
		return c.rerr != nil
	}
	lb, err := c.r.Peek(4)
	if err != nil {
		return false
	}
	l := int64(int32(binary.BigEndian.Uint32(lb)))
	return l < 4 || l > int64(c.maxFrame) || int64(n-4) >= l
}

// eagerAlloc is the frame size up to which an accepted connection's
// buffer is allocated at once; larger frames grow as their bytes actually
// arrive, so a peer that only declares a large length costs no memory.
const eagerAlloc = 64 << 10

// readBody reads an n-byte frame into a buffer from the frame pools
// (framepool.go).
func readBody(r io.Reader, n, eager int, full bool) ([]byte, error) {
	if n <= max(eager, eagerAlloc) {
		buf := getFrame(n, full)
		if _, err := io.ReadFull(r, buf); err != nil {
			putFrame(buf)
			return nil, err
		}
		return buf, nil
	}
	buf := getFrame(eagerAlloc, full)[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := getFrame(min(2*cap(buf), n), full)[:len(buf)]
			copy(grown, buf)
			putFrame(buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			putFrame(buf)
			return nil, err
		}
	}
	return buf, nil
}

// RecycleFrame implements transport.FrameRecycler: a frame ReadFrame
// returned goes back to the frame pools once the caller is done with it.
func (c *Conn) RecycleFrame(frame []byte) { putFrame(frame) }

// readErr reports err, or the reason behind it: our own Close or ctx.
func (c *Conn) readErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-c.closed:
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded) {
			// Closed by us because the frame was cut short: say why.
			return fmt.Errorf("%w: %w", transport.ErrClosed, err)
		}
		return transport.ErrClosed
	default:
	}
	return err
}

// WriteFrame writes the length prefix and parts as one frame and flushes,
// unless another WriteFrame is already queued behind it: then that one
// flushes both (write combining; the last of a burst always flushes).
// A frame shorter than the 4-byte header-length word is refused with
// ErrBadFrame, as the peer would refuse it. When the write fails or ctx
// ends half-way, the frame is torn and the connection is closed.
func (c *Conn) WriteFrame(ctx context.Context, parts ...[]byte) error {
	n, err := c.frameLen(parts)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writers.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writers.Add(-1)
	if err := c.beginWrite(ctx); err != nil {
		return err
	}
	c.bufferFrame(n, parts)
	if c.writers.Load() > 0 && c.w.Buffered() < c.w.Size()/2 {
		// Another writer is queued on wmu and will flush these bytes with
		// its own (it cannot leave without flushing, except when the
		// connection is closed, and then nothing can be sent anyway).
		return nil
	}
	return c.flush(ctx)
}

// WriteFrames writes frames in order, each the concatenation of its
// parts, under one hold of the write lock and with one flush at the end
// (the buffer also flushes whenever it fills): a writer goroutine's batch
// of requests goes out in as few write syscalls as the buffer allows.
// Every frame is checked first; if one is malformed or too large, nothing
// is written. Otherwise as WriteFrame.
func (c *Conn) WriteFrames(ctx context.Context, frames [][][]byte) error {
	for _, parts := range frames {
		if _, err := c.frameLen(parts); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writers.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writers.Add(-1)
	if err := c.beginWrite(ctx); err != nil {
		return err
	}
	for _, parts := range frames {
		n, _ := c.frameLen(parts)
		c.bufferFrame(n, parts)
	}
	return c.flush(ctx)
}

// MaxFrameSize is the largest frame WriteFrame accepts.
func (c *Conn) MaxFrameSize() int { return c.maxFrame }

func (c *Conn) frameLen(parts [][]byte) (int, error) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.maxFrame {
		return 0, fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, c.maxFrame)
	}
	if n < 4 {
		return 0, fmt.Errorf("%w: %d bytes is shorter than the header-length word", transport.ErrBadFrame, n)
	}
	return n, nil
}

// beginWrite checks the connection and arms the write deadline and ctx's
// AfterFunc. Called with wmu held.
func (c *Conn) beginWrite(ctx context.Context) error {
	select {
	case <-c.closed:
		c.releaseWriteCtx()
		return transport.ErrClosed
	default:
	}
	if ctx != c.wctx {
		c.releaseWriteCtx()
	}
	wt := c.cfg.WriteTimeout
	if dl, ok := ctx.Deadline(); ok && (wt <= 0 || time.Until(dl) < wt) {
		c.setWriteDeadline(dl)
	} else if wt > 0 {
		// Renewed once per eighth of the timeout, not per write (see
		// deadlineSlack).
		now := time.Now()
		if !c.wdlSet || c.wdl.IsZero() || c.wdl.Before(now.Add(wt)) || c.wdl.After(now.Add(wt+wt/deadlineSlack)) {
			c.setWriteDeadline(now.Add(wt + wt/deadlineSlack))
		}
	} else if !c.wdlSet || !c.wdl.IsZero() {
		c.setWriteDeadline(time.Time{})
	}
	if ctx.Done() != nil {
		if c.wstop == nil {
			fired := make(chan struct{})
			c.wctx, c.wfired = ctx, fired
			c.wstop = context.AfterFunc(ctx, func() {
				c.c.SetWriteDeadline(aLongTimeAgo) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
				close(fired)
			})
		} else if ctx.Err() != nil {
			// The registration fired before the deadline above was set.
			c.setWriteDeadline(aLongTimeAgo)
		}
	}
	return nil
}

// bufferFrame writes the length prefix and parts into w. Called with wmu
// held; errors stick in w and come out of the flush.
func (c *Conn) bufferFrame(n int, parts [][]byte) {
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], uint32(n))
	c.w.Write(lb[:]) //nolint:errcheck // bufio keeps the first error; flush reports it
	for _, p := range parts {
		c.w.Write(p) //nolint:errcheck // bufio keeps the first error; flush reports it
	}
}

// flush flushes w; a failure tears the stream and closes the connection.
// Called with wmu held.
func (c *Conn) flush(ctx context.Context) error {
	if err := c.w.Flush(); err != nil {
		c.releaseWriteCtx()
		c.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("tcp: write to %s: %w", c.RemoteAddr(), ctx.Err())
		}
		if errors.Is(err, net.ErrClosed) {
			// Close ran while we were writing.
			return transport.ErrClosed
		}
		return fmt.Errorf("tcp: write to %s: %w", c.RemoteAddr(), err)
	}
	return nil
}

// releaseWriteCtx drops the AfterFunc registration of the last write's
// ctx, waiting for it if it has fired, so its past deadline cannot land on
// a write under another ctx. Called with wmu held.
func (c *Conn) releaseWriteCtx() {
	if c.wstop == nil {
		return
	}
	if !c.wstop() {
		<-c.wfired
		c.wdlSet = false
	}
	c.wctx, c.wstop, c.wfired = nil, nil, nil
}

// setWriteDeadline sets and remembers the write deadline. Called with wmu
// held.
func (c *Conn) setWriteDeadline(t time.Time) {
	c.c.SetWriteDeadline(t) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
	c.wdl, c.wdlSet = t, true
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
