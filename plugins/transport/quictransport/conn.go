package quictransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/quivermq/quiver/core/transport"
)

// errWriteTimeout is the cause of a write that hit Config.WriteTimeout.
var errWriteTimeout = errors.New("quictransport: write timeout: the peer did not take the frame")

// queueFrames is the number of received frames queued for ReadFrame before
// stream readers wait (and their writers with them).
const queueFrames = 256

// smallFrame is the size up to which a frame is copied into one buffer and
// handed to QUIC in one call.
const smallFrame = 16 << 10

// Conn is one QUIC connection carrying frames, each on a stream of its own.
type Conn struct {
	qc       *quic.Conn
	cfg      *Config
	maxFrame int
	log      *slog.Logger
	release  func()

	local, remote string

	frames chan []byte
	budget *budget

	// failErr is why we closed the connection ourselves (a bad frame from
	// the peer, a write timeout); ReadFrame and WriteFrame report it.
	failMu  sync.Mutex
	failErr error

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var _ transport.Conn = (*Conn)(nil)

func newConn(qc *quic.Conn, cfg *Config, maxFrame int, log *slog.Logger, release func()) *Conn {
	c := &Conn{
		qc: qc, cfg: cfg, maxFrame: maxFrame, release: release,
		local: qc.LocalAddr().String(), remote: qc.RemoteAddr().String(),
		frames: make(chan []byte, queueFrames),
		budget: newBudget(2 * maxFrame),
		closed: make(chan struct{}),
	}
	c.log = log.With("remote", c.remote)
	c.wg.Add(1)
	go c.acceptStreams()
	return c
}

// gone is closed when the QUIC connection is closed, by either end.
func (c *Conn) gone() <-chan struct{} { return c.qc.Context().Done() }

// acceptStreams serves every stream the peer opens, each in a goroutine of
// its own; QUIC's stream limit (max_streams) bounds them.
func (c *Conn) acceptStreams() {
	defer c.wg.Done()
	for {
		str, err := c.qc.AcceptStream(context.Background())
		if err != nil {
			return
		}
		c.wg.Add(1)
		go c.receive(str)
	}
}

// receive reads one frame from str, queues it and sends the receipt.
func (c *Conn) receive(str *quic.Stream) {
	defer c.wg.Done()
	// The peer has write_timeout to send a frame it started, as long as
	// its own writer waits for it.
	var deadline time.Time
	if c.cfg.WriteTimeout > 0 {
		deadline = time.Now().Add(c.cfg.WriteTimeout)
		str.SetReadDeadline(deadline)
	}
	abandon := func(code quic.StreamErrorCode) {
		str.CancelRead(code)
		str.CancelWrite(code)
	}
	var lb [4]byte
	if _, err := io.ReadFull(str, lb[:]); err != nil {
		// The writer gave up (ctx) or the connection is gone.
		abandon(streamCancelled)
		return
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if n > int64(c.maxFrame) {
		abandon(streamRefused)
		c.fail(codeFrameTooLarge, fmt.Errorf("%w: peer %s declared %d bytes, limit %d", transport.ErrFrameTooLarge, c.remote, n, c.maxFrame))
		return
	}
	if n < 4 {
		abandon(streamRefused)
		c.fail(codeBadFrame, fmt.Errorf("%w: peer %s declared length %d", transport.ErrBadFrame, c.remote, n))
		return
	}
	if !c.budget.acquire(int(n), c.gone(), deadline) {
		abandon(streamClosing)
		return
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(str, buf)
	if err == nil {
		// The frame must end where its length says.
		var extra [1]byte
		var m int
		m, err = str.Read(extra[:])
		switch {
		case m > 0:
			c.budget.release(int(n))
			abandon(streamRefused)
			c.fail(codeBadFrame, fmt.Errorf("%w: peer %s sent more than the declared %d bytes", transport.ErrBadFrame, c.remote, n))
			return
		case errors.Is(err, io.EOF):
			err = nil
		}
	}
	if err != nil {
		c.budget.release(int(n))
		abandon(streamCancelled)
		return
	}
	select {
	case c.frames <- buf:
	case <-c.gone():
		c.budget.release(int(n))
		return
	}
	// The receipt: the frame is queued.
	str.Close()
}

// fail closes the connection because of err, which ReadFrame and WriteFrame
// report from then on.
func (c *Conn) fail(code quic.ApplicationErrorCode, err error) {
	c.failMu.Lock()
	first := c.failErr == nil
	if first {
		c.failErr = err
	}
	c.failMu.Unlock()
	if first {
		c.log.Warn("closing connection", "err", err)
	}
	c.qc.CloseWithError(code, err.Error())
}

// endErr is the error of a connection that is gone: ErrClosed after our
// Close, io.EOF after the peer's, otherwise the reason.
func (c *Conn) endErr() error {
	select {
	case <-c.closed:
		return transport.ErrClosed
	default:
	}
	c.failMu.Lock()
	ferr := c.failErr
	c.failMu.Unlock()
	if ferr != nil {
		return fmt.Errorf("%w: %w", transport.ErrClosed, ferr)
	}
	cause := context.Cause(c.qc.Context())
	var aerr *quic.ApplicationError
	if errors.As(cause, &aerr) && aerr.Remote {
		switch aerr.ErrorCode {
		case codeClosed:
			return io.EOF
		case codeFrameTooLarge:
			return fmt.Errorf("%w: refused by peer %s: %w", transport.ErrFrameTooLarge, c.remote, cause)
		case codeBadFrame:
			return fmt.Errorf("%w: refused by peer %s: %w", transport.ErrBadFrame, c.remote, cause)
		}
	}
	return fmt.Errorf("quictransport: connection to %s: %w", c.remote, cause)
}

// ReadFrame returns the next received frame. Frames the peer wrote before
// it closed the connection are returned before io.EOF.
func (c *Conn) ReadFrame(ctx context.Context) ([]byte, error) {
	select {
	case <-c.closed:
		return nil, transport.ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case f := <-c.frames:
		return c.take(f), nil
	default:
	}
	select {
	case f := <-c.frames:
		return c.take(f), nil
	case <-c.closed:
		return nil, transport.ErrClosed
	case <-c.gone():
		// Frames queued before the end come first.
		select {
		case f := <-c.frames:
			return c.take(f), nil
		default:
		}
		return nil, c.endErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) take(f []byte) []byte {
	c.budget.release(len(f))
	return f
}

// WriteFrame sends parts as one frame on a new stream and waits until the
// peer has queued it (or closed the connection normally after the frame
// was written in full: as with TCP, such a frame may be lost). When ctx ends first the stream is reset: the frame
// may or may not have been delivered, and the connection stays usable.
// A refused oversized or undersized frame sends nothing.
func (c *Conn) WriteFrame(ctx context.Context, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.maxFrame {
		return fmt.Errorf("%w: %d bytes exceeds %d", transport.ErrFrameTooLarge, n, c.maxFrame)
	}
	if n < 4 {
		return fmt.Errorf("%w: %d bytes is shorter than the header-length word", transport.ErrBadFrame, n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return transport.ErrClosed
	case <-c.gone():
		return c.endErr()
	default:
	}
	wctx := ctx
	if c.cfg.WriteTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, c.cfg.WriteTimeout, errWriteTimeout)
		defer cancel()
	}
	str, err := c.qc.OpenStreamSync(wctx)
	if err != nil {
		return c.writeErr(ctx, wctx, err)
	}
	stop := context.AfterFunc(wctx, func() {
		str.CancelWrite(streamCancelled)
		str.CancelRead(streamCancelled)
	})
	defer stop()
	if err := writeFrame(str, n, parts); err != nil {
		return c.writeErr(ctx, wctx, err)
	}
	str.Close()
	// Wait for the receipt: the peer closes its side once it queued the frame.
	var b [1]byte
	m, err := str.Read(b[:])
	if m > 0 {
		str.CancelRead(streamRefused)
		c.fail(codeBadFrame, fmt.Errorf("%w: peer %s answered a frame with data", transport.ErrBadFrame, c.remote))
		return c.endErr()
	}
	if errors.Is(err, io.EOF) || c.peerClosedNormally() {
		// A peer that closes right after it took the frame may close
		// before the receipt leaves; like TCP, a frame written in full as
		// the peer closes counts as written.
		return nil
	}
	return c.writeErr(ctx, wctx, err)
}

// peerClosedNormally tells whether the peer closed the connection with
// Close (and not because of an error).
func (c *Conn) peerClosedNormally() bool {
	select {
	case <-c.gone():
	default:
		return false
	}
	var aerr *quic.ApplicationError
	return errors.As(context.Cause(c.qc.Context()), &aerr) && aerr.Remote && aerr.ErrorCode == codeClosed
}

// writeFrame writes the length and the parts.
func writeFrame(str *quic.Stream, n int, parts [][]byte) error {
	if n+4 <= smallFrame {
		buf := make([]byte, 4, 4+n)
		binary.BigEndian.PutUint32(buf, uint32(n))
		for _, p := range parts {
			buf = append(buf, p...)
		}
		_, err := str.Write(buf)
		return err
	}
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], uint32(n))
	if _, err := str.Write(lb[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := str.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// writeErr explains a failed write: our Close, the end of the caller's
// ctx, the write timeout (which drops the connection), a refusal by the
// peer, or the connection's end.
func (c *Conn) writeErr(ctx, wctx context.Context, err error) error {
	select {
	case <-c.closed:
		return transport.ErrClosed
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("quictransport: write to %s: %w", c.remote, ctx.Err())
	}
	if context.Cause(wctx) == errWriteTimeout {
		c.fail(codeWriteTimeout, fmt.Errorf("%w after %v", errWriteTimeout, c.cfg.WriteTimeout))
		return fmt.Errorf("quictransport: write to %s: %w", c.remote, errWriteTimeout)
	}
	select {
	case <-c.gone():
		return c.endErr()
	default:
	}
	var serr *quic.StreamError
	if errors.As(err, &serr) && serr.Remote && serr.ErrorCode == streamRefused {
		return fmt.Errorf("%w: refused by peer %s", transport.ErrFrameTooLarge, c.remote)
	}
	return fmt.Errorf("quictransport: write to %s: %w", c.remote, err)
}

// LocalAddr implements transport.Conn.
func (c *Conn) LocalAddr() string { return c.local }

// RemoteAddr implements transport.Conn.
func (c *Conn) RemoteAddr() string { return c.remote }

// Close closes the connection in both directions (CONNECTION_CLOSE), fails
// pending reads and writes with transport.ErrClosed and waits for the
// connection's goroutines.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.qc.CloseWithError(codeClosed, "closed")
		c.wg.Wait()
		c.release()
	})
	return nil
}

// budget bounds the bytes of frames being received or queued on one
// connection, so max_streams concurrent frames cannot each hold a frame
// limit's worth of memory. It must hold at least one frame of the limit.
type budget struct {
	mu    sync.Mutex
	avail int
	wake  chan struct{} // closed and replaced on every release
}

func newBudget(n int) *budget { return &budget{avail: n, wake: make(chan struct{})} }

// acquire takes n bytes, waiting until enough are free, or until stop
// closes or the deadline (if not zero) passes (false).
func (b *budget) acquire(n int, stop <-chan struct{}, deadline time.Time) bool {
	var expired <-chan time.Time
	for {
		b.mu.Lock()
		if b.avail >= n {
			b.avail -= n
			b.mu.Unlock()
			return true
		}
		wake := b.wake
		b.mu.Unlock()
		if expired == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-wake:
		case <-stop:
			return false
		case <-expired:
			return false
		}
	}
}

func (b *budget) release(n int) {
	b.mu.Lock()
	b.avail += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}
