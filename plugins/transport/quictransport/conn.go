package quictransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/quivermq/quiver/core/transport"
)

// errWriteTimeout is the cause of a write that hit Config.WriteTimeout.
var errWriteTimeout = errors.New("quictransport: write timeout: the peer did not take the frame")

// queueFrames is the number of received frames queued for ReadFrame before
// stream readers wait.
const queueFrames = 256

// smallFrame is the size up to which a frame is copied into one buffer and
// handed to QUIC in one call.
const smallFrame = 16 << 10

// maxLinger bounds how long Close waits for the peer to take the frames
// written before it.
const maxLinger = 5 * time.Second

// Conn is one QUIC connection carrying frames, each on a unidirectional
// stream of its own.
type Conn struct {
	qc       *quic.Conn
	cfg      *Config
	maxFrame int
	log      *slog.Logger
	release  func()

	local, remote string

	frames chan []byte
	budget *budget

	mu sync.Mutex
	// writing are the streams of writes in progress, which Close resets.
	writing map[*quic.SendStream]struct{}
	// sent counts frames written in full; received counts frames queued.
	sent, received uint64
	// goodbye is set once the peer announced its Close and how many
	// frames it sent before; peerDone once they all arrived.
	goodbye, peerDone bool
	peerSent          uint64
	// failErr is why we closed the connection ourselves (a bad frame from
	// the peer, a write timeout); ReadFrame and WriteFrame report it.
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
		frames:  make(chan []byte, queueFrames),
		budget:  newBudget(2 * maxFrame),
		writing: map[*quic.SendStream]struct{}{},
		closed:  make(chan struct{}),
	}
	c.log = log.With("remote", c.remote)
	c.wg.Add(1)
	go c.acceptStreams()
	return c
}

// gone is closed when the QUIC connection is closed, by either end.
func (c *Conn) gone() <-chan struct{} { return c.qc.Context().Done() }

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// acceptStreams serves every stream the peer opens, each in a goroutine of
// its own; QUIC's stream limit (max_streams) bounds them.
func (c *Conn) acceptStreams() {
	defer c.wg.Done()
	for {
		str, err := c.qc.AcceptUniStream(context.Background())
		if err != nil {
			return
		}
		c.wg.Add(1)
		go c.receive(str)
	}
}

// receive reads one frame, or the peer's goodbye, from str.
func (c *Conn) receive(str *quic.ReceiveStream) {
	defer c.wg.Done()
	// No deadline here: a frame the peer wrote is never dropped because our
	// reader is slow (the writer's write_timeout handles a stuck peer, and
	// a peer that never finishes a frame only blocks its own connection).
	var lb [4]byte
	if _, err := io.ReadFull(str, lb[:]); err != nil {
		// The writer gave up (ctx) or the connection is gone.
		str.CancelRead(streamCancelled)
		return
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if n == 0 {
		c.receiveGoodbye(str)
		return
	}
	if n > int64(c.maxFrame) {
		str.CancelRead(streamRefused)
		c.fail(codeFrameTooLarge, fmt.Errorf("%w: peer %s declared %d bytes, limit %d", transport.ErrFrameTooLarge, c.remote, n, c.maxFrame))
		return
	}
	if n < 4 {
		str.CancelRead(streamRefused)
		c.fail(codeBadFrame, fmt.Errorf("%w: peer %s declared length %d", transport.ErrBadFrame, c.remote, n))
		return
	}
	if !c.budget.acquire(int(n), c.gone(), time.Time{}) {
		str.CancelRead(streamClosing)
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
			str.CancelRead(streamRefused)
			c.fail(codeBadFrame, fmt.Errorf("%w: peer %s sent more than the declared %d bytes", transport.ErrBadFrame, c.remote, n))
			return
		case errors.Is(err, io.EOF):
			err = nil
		}
	}
	if err != nil {
		c.budget.release(int(n))
		str.CancelRead(streamCancelled)
		return
	}
	select {
	case c.frames <- buf:
	case <-c.gone():
		c.budget.release(int(n))
		return
	}
	c.mu.Lock()
	c.received++
	done := c.peerFinished()
	c.mu.Unlock()
	if done {
		c.qc.CloseWithError(codeClosed, "goodbye")
	}
}

// receiveGoodbye reads the count of frames the closing peer wrote: once
// they are all queued we end the connection, and ReadFrame returns io.EOF
// after them. Should some never come, the peer ends it after its linger.
func (c *Conn) receiveGoodbye(str *quic.ReceiveStream) {
	var cb [8]byte
	if _, err := io.ReadFull(str, cb[:]); err != nil {
		str.CancelRead(streamCancelled)
		return
	}
	c.mu.Lock()
	var done bool
	if !c.goodbye {
		c.goodbye = true
		c.peerSent = binary.BigEndian.Uint64(cb[:])
		if c.isClosed() {
			// Closing ourselves, we take nothing more: end it now.
			c.received = max(c.received, c.peerSent)
		}
		done = c.peerFinished()
	}
	c.mu.Unlock()
	if done {
		c.qc.CloseWithError(codeClosed, "goodbye")
	}
}

// peerFinished reports, once, that a closing peer's frames are all queued.
// c.mu is held.
func (c *Conn) peerFinished() bool {
	if !c.goodbye || c.peerDone || c.received < c.peerSent {
		return false
	}
	c.peerDone = true
	return true
}

// lingerFor is how long Close waits for the peer: long enough for frames
// in flight to be retransmitted a few times (8 round trips, at least 1 s),
// at most write_timeout and maxLinger.
func (c *Conn) lingerFor() time.Duration {
	d := max(time.Second, 8*c.qc.ConnectionStats().SmoothedRTT)
	d = min(d, maxLinger)
	if c.cfg.WriteTimeout > 0 {
		d = min(d, c.cfg.WriteTimeout)
	}
	return d
}

// fail closes the connection because of err, which ReadFrame and WriteFrame
// report from then on.
func (c *Conn) fail(code quic.ApplicationErrorCode, err error) {
	c.mu.Lock()
	first := c.failErr == nil
	if first {
		c.failErr = err
	}
	c.mu.Unlock()
	if first {
		c.log.Warn("closing connection", "err", err)
	}
	c.qc.CloseWithError(code, err.Error())
}

// endErr is the error of a connection that is gone: ErrClosed after our
// Close, io.EOF after the peer's, otherwise the reason.
func (c *Conn) endErr() error {
	if c.isClosed() {
		return transport.ErrClosed
	}
	c.mu.Lock()
	ferr, peerDone := c.failErr, c.peerDone
	c.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("%w: %w", transport.ErrClosed, ferr)
	}
	if peerDone {
		return io.EOF
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

// ReadFrame returns the next received frame. Frames arrive in the order
// their streams complete: frames written concurrently, or one after the
// other by one writer, may be read in another order. Frames the peer wrote
// before it closed the connection are returned before io.EOF.
func (c *Conn) ReadFrame(ctx context.Context) ([]byte, error) {
	if c.isClosed() {
		return nil, transport.ErrClosed
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

// WriteFrame sends parts as one frame on a new stream. It returns once QUIC
// took the whole frame (flow control may make it wait for the peer to
// read); it does not wait for the peer. When ctx ends first the stream is
// reset: the frame is not delivered, and the connection stays usable.
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
	if c.isClosed() {
		return transport.ErrClosed
	}
	select {
	case <-c.gone():
		return c.endErr()
	default:
	}
	var deadline time.Time
	if c.cfg.WriteTimeout > 0 {
		deadline = time.Now().Add(c.cfg.WriteTimeout)
	}
	str, err := c.qc.OpenUniStream()
	if err != nil {
		// At the peer's stream limit: wait for one of ours to complete.
		if str, err = c.openSync(ctx, deadline); err != nil {
			return c.writeErr(ctx, err)
		}
	}
	if !deadline.IsZero() {
		str.SetWriteDeadline(deadline)
	}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		str.CancelWrite(streamClosing)
		return transport.ErrClosed
	}
	c.writing[str] = struct{}{}
	c.mu.Unlock()
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { str.CancelWrite(streamCancelled) })
	}
	err = writeFrame(str, n, parts)
	if stop != nil && !stop() {
		// ctx ended: the stream is being reset, whatever Write said.
		err = ctx.Err()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		str.CancelWrite(streamCancelled)
		err = errWriteTimeout
	}
	c.mu.Lock()
	delete(c.writing, str)
	if err == nil && c.isClosed() {
		err = transport.ErrClosed
		str.CancelWrite(streamClosing)
	}
	if err == nil {
		str.Close()
		c.sent++
	}
	c.mu.Unlock()
	if err != nil {
		return c.writeErr(ctx, err)
	}
	return nil
}

// openSync waits for a stream until ctx ends or the deadline passes.
func (c *Conn) openSync(ctx context.Context, deadline time.Time) (*quic.SendStream, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, deadline, errWriteTimeout)
		defer cancel()
	}
	str, err := c.qc.OpenUniStreamSync(ctx)
	if err != nil && context.Cause(ctx) == errWriteTimeout {
		err = errWriteTimeout
	}
	return str, err
}

// writeFrame writes the length and the parts.
func writeFrame(str *quic.SendStream, n int, parts [][]byte) error {
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
func (c *Conn) writeErr(ctx context.Context, err error) error {
	if c.isClosed() {
		return transport.ErrClosed
	}
	if ctx.Err() != nil {
		return fmt.Errorf("quictransport: write to %s: %w", c.remote, ctx.Err())
	}
	if errors.Is(err, errWriteTimeout) {
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

// Close closes the connection in both directions. Pending and later reads
// and writes fail with transport.ErrClosed at once; writes in progress are
// reset. Frames already written still reach the peer before it sees the
// end: Close tells the peer how many there were and waits until the peer
// took them all and ended the connection, for 8 round trips (at least 1 s,
// at most 5 s and write_timeout), before it sends CONNECTION_CLOSE itself.
// It waits for the connection's goroutines.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		close(c.closed)
		for str := range c.writing {
			str.CancelWrite(streamClosing)
		}
		sent, peerDone := c.sent, c.peerDone
		c.mu.Unlock()
		select {
		case <-c.gone():
		default:
			// With nothing written there is nothing to wait for.
			if sent > 0 && !peerDone && c.sayGoodbye(sent) {
				t := time.NewTimer(c.lingerFor())
				select {
				case <-c.gone():
				case <-t.C:
				}
				t.Stop()
			}
		}
		c.qc.CloseWithError(codeClosed, "closed")
		c.wg.Wait()
		c.release()
	})
	return nil
}

// sayGoodbye tells the peer we close after sent frames.
func (c *Conn) sayGoodbye(sent uint64) bool {
	str, err := c.qc.OpenUniStream()
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.lingerFor())
		defer cancel()
		if str, err = c.qc.OpenUniStreamSync(ctx); err != nil {
			return false
		}
	}
	var b [12]byte
	binary.BigEndian.PutUint64(b[4:], sent)
	if _, err := str.Write(b[:]); err != nil {
		return false
	}
	str.Close()
	return true
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
