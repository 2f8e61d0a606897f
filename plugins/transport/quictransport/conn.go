package quictransport

import (
	"bufio"
	"context"
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

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"

	"github.com/quivermq/quiver/core/transport"
)

// errWriteTimeout is the cause of a write that hit Config.WriteTimeout.
var errWriteTimeout = errors.New("quictransport: write timeout: the peer did not take the frame")

// queueFrames is the number of received frames queued for ReadFrame before
// stream readers wait.
const queueFrames = 256

// smallFrame is the size up to which a frame is copied into one buffer and
// queued on its stream in one non-blocking call.
const smallFrame = 16 << 10

// passAbove is the number of idle streams above which a stream the peer
// just wrote a frame on is handed back to it at once (with a pass) rather
// than kept for our next frame: one-way traffic would otherwise leave the
// writer without streams and the reader with ever more.
const passAbove = 64

// maxIdleStreams bounds the idle streams an end keeps; a stream coming to a
// full pool is retired instead (after a burst of concurrent writes, say).
const maxIdleStreams = 128

// passLength is the length word of a pass: no frame, the stream is the
// peer's to write on again.
const passLength = 0xFFFFFFFF

// coalesceFrame is the size up to which a frame that must wait for flow
// control (or is above smallFrame) is copied into one buffer (above
// smallFrame a pooled one) and written in one call.
const coalesceFrame = 1 << 20

// readAhead is the read buffer of a stream's reader.
const readAhead = 4 << 10

// maxLinger bounds how long Close waits for the peer to take the frames
// written before it.
const maxLinger = 5 * time.Second

// pass is a pass's bytes on the wire.
var pass = []byte{0xFF, 0xFF, 0xFF, 0xFF}

// Conn is one QUIC connection carrying frames on bidirectional streams,
// one frame in flight per stream at a time: an end writes on a stream it
// opened or on which it read the peer's last frame, never on one it wrote
// the last frame on.
type Conn struct {
	qc       *quic.Conn
	cfg      *Config
	maxFrame int
	log      *slog.Logger
	release  func()

	local, remote string

	frames chan []byte
	budget *budget

	// The pool of idle streams: those we may write our next frame on.
	poolMu sync.Mutex
	idle   []*stream
	// waiters counts writers waiting for a stream; wake is closed and
	// replaced when a stream comes back or dies while there are any.
	waiters int
	wake    chan struct{}
	// opened counts the streams we opened.
	opened atomic.Int64

	mu sync.Mutex
	// writing are the streams of blocking writes in progress, which Close
	// resets.
	writing map[*stream]struct{}
	// sent counts frames written in full; received counts frames queued.
	sent, received uint64
	// goodbye is set once the peer announced its Close and how many
	// frames it sent before; peerDone once they all arrived.
	goodbye, peerDone bool
	peerSent          uint64
	// failErr is why we closed the connection ourselves (a bad frame from
	// the peer, a write timeout); ReadFrame and WriteFrame report it.
	failErr error

	// deliver is DeliverFrames' function while it runs (guarded by dmu):
	// stream readers call it themselves instead of queueing frames, and
	// delivering counts those calls. deliverErr is the first error it
	// returned (guarded by mu).
	dmu        sync.RWMutex
	deliver    func([]byte) error
	delivering sync.WaitGroup
	deliverErr error

	// dialIP is the local address a dialled connection's socket is bound
	// to (nil on accepted connections, which do not migrate); paths are
	// the endpoints Migrate moved the connection to, released on Close.
	dialIP net.IP
	paths  []*endpoint

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var (
	_ transport.Conn           = (*Conn)(nil)
	_ transport.FrameDeliverer = (*Conn)(nil)
)

// stream is a bidirectional stream of the connection, opened by either
// end. Both ends read it all along; they write on it by turns.
type stream struct {
	str *quic.Stream
	// buf holds a small frame with its length while it is queued.
	buf []byte
	// dead is set once the stream was reset or retired; it never returns
	// to the pool.
	dead atomic.Bool

	// mu orders a blocking write's end against its ctx's cancellation.
	mu        sync.Mutex
	inWrite   bool
	cancelled bool
}

func newConn(qc *quic.Conn, cfg *Config, maxFrame int, log *slog.Logger, release func()) *Conn {
	c := &Conn{
		qc: qc, cfg: cfg, maxFrame: maxFrame, release: release,
		local: qc.LocalAddr().String(), remote: qc.RemoteAddr().String(),
		frames:  make(chan []byte, queueFrames),
		budget:  newBudget(2 * maxFrame),
		wake:    make(chan struct{}),
		writing: map[*stream]struct{}{},
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

// acceptStreams serves every stream the peer opens; QUIC's stream limit
// (max_streams) bounds them.
func (c *Conn) acceptStreams() {
	defer c.wg.Done()
	for {
		str, err := c.qc.AcceptStream(context.Background())
		if err != nil {
			return
		}
		c.wg.Add(1)
		go c.receive(&stream{str: str})
	}
}

// receive reads what the peer writes on s, for the stream's life: frames,
// after each of which s is ours to write on; passes, which give s back to
// us without a frame; the end of the stream at a frame boundary (the peer
// retired it); or the peer's goodbye. It runs on both ends, for the
// streams each opened and accepted.
func (c *Conn) receive(s *stream) {
	// counted is whether c.wg counts this goroutine: not while a delivery
	// runs, nor after one that ended during Close (see handOver).
	counted := true
	defer func() {
		if counted {
			c.wg.Done()
		}
	}()
	str := s.str
	// No deadline here: a frame the peer wrote is never dropped because our
	// reader is slow (the writer's write_timeout handles a stuck peer, and
	// a peer that never finishes a frame only blocks its own connection).
	// Reading ahead takes a small frame's length and body in one Read. It
	// never waits for more than the peer wrote: after a frame, nothing
	// follows on the stream until we write on it.
	r := bufio.NewReaderSize(str, readAhead)
	var lb [4]byte
	for {
		if m, err := io.ReadFull(r, lb[:]); err != nil {
			s.dead.Store(true)
			switch {
			case m == 0 && errors.Is(err, io.EOF):
				// The peer retired the stream; so do we.
				str.Close()
			case errors.Is(err, io.ErrUnexpectedEOF):
				c.refuse(str, codeBadFrame, fmt.Errorf("%w: peer %s ended a stream inside a frame length", transport.ErrBadFrame, c.remote))
			default:
				// The writer gave up (ctx) or the connection is gone.
				abandon(str)
			}
			return
		}
		u := binary.BigEndian.Uint32(lb[:])
		if u == passLength {
			c.own(s, false)
			continue
		}
		n := int64(int32(u))
		if n == 0 {
			s.dead.Store(true)
			c.receiveGoodbye(str, r)
			return
		}
		if n > int64(c.maxFrame) {
			s.dead.Store(true)
			c.refuse(str, codeFrameTooLarge, fmt.Errorf("%w: peer %s declared %d bytes, limit %d", transport.ErrFrameTooLarge, c.remote, n, c.maxFrame))
			return
		}
		if n < 4 {
			s.dead.Store(true)
			c.refuse(str, codeBadFrame, fmt.Errorf("%w: peer %s declared length %d", transport.ErrBadFrame, c.remote, n))
			return
		}
		if !c.budget.acquire(int(n), c.gone(), time.Time{}) {
			s.dead.Store(true)
			abandon(str)
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			c.budget.release(int(n))
			s.dead.Store(true)
			if errors.Is(err, io.ErrUnexpectedEOF) {
				c.refuse(str, codeBadFrame, fmt.Errorf("%w: peer %s ended a stream inside a frame", transport.ErrBadFrame, c.remote))
			} else {
				abandon(str)
			}
			return
		}
		var ok bool
		if ok, counted = c.handOver(s, buf); !ok {
			return
		}
	}
}

// handOver gives a whole frame that came on s to DeliverFrames' function,
// when one is set, or queues it for ReadFrame; ok is false when the
// connection is gone or the function refused the frame. s is ours to write
// on from then: when the function handles the frame, only once it
// returned, so a handler may take its time (remoting runs request handlers
// there) without another frame waiting behind it, since the peer writes on
// s only after we did.
//
// The calling reader is not counted in c.wg while the function runs: a
// handler may close the connection, and Close waits for c.wg. DeliverFrames
// waits for deliveries instead. counted reports whether the reader counts
// again: not when Close began meanwhile, and then it must only return.
func (c *Conn) handOver(s *stream, buf []byte) (ok, counted bool) {
	c.dmu.RLock()
	d := c.deliver
	if d != nil {
		c.delivering.Add(1)
	}
	c.dmu.RUnlock()
	if d != nil {
		defer c.delivering.Done()
		c.budget.release(len(buf))
		c.wg.Done()
		err := d(buf)
		c.mu.Lock()
		counted = !c.isClosed()
		var done bool
		if counted {
			c.wg.Add(1)
			done = c.receivedLocked()
		}
		c.mu.Unlock()
		if !counted {
			return false, false
		}
		c.own(s, true)
		if err != nil {
			c.deliveryFailed(err)
			return false, true
		}
		c.endIfDone(done)
		return true, true
	}
	// The whole frame is here, so s is free for our next frame (the
	// answer, usually) as soon as now, before the frame is read.
	c.own(s, true)
	select {
	case c.frames <- buf:
	case <-c.gone():
		c.budget.release(len(buf))
		return false, true
	}
	c.mu.Lock()
	done := c.receivedLocked()
	c.mu.Unlock()
	c.endIfDone(done)
	return true, true
}

// receivedLocked counts a frame handed over and reports, once, that a
// closing peer's frames are all in. c.mu is held.
func (c *Conn) receivedLocked() bool {
	c.received++
	return c.peerFinished()
}

// endIfDone ends the connection once a closing peer's frames are all in.
func (c *Conn) endIfDone(done bool) {
	if done {
		c.qc.CloseWithError(codeClosed, "goodbye") //nolint:errcheck // closing anyway; the connection is gone either way
	}
}

// DeliverFrames implements transport.FrameDeliverer: each stream's reader
// calls deliver with the frame it read, so a frame reaches remoting
// without a hand-off through ReadFrame's queue. Frames queued before the
// call are delivered from this goroutine.
func (c *Conn) DeliverFrames(ctx context.Context, deliver func(frame []byte) error) error {
	c.dmu.Lock()
	c.deliver = deliver
	c.dmu.Unlock()
	err := c.drainTo(ctx, deliver)
	// No delivery starts after this; later frames go to the queue nobody
	// reads any more.
	c.dmu.Lock()
	c.deliver = nil
	c.dmu.Unlock()
	c.delivering.Wait()
	c.mu.Lock()
	derr := c.deliverErr
	c.mu.Unlock()
	if derr != nil {
		return derr
	}
	return err
}

// drainTo delivers queued frames until ReadFrame fails: at the end of the
// connection or of ctx, or when deliver refused a frame.
func (c *Conn) drainTo(ctx context.Context, deliver func([]byte) error) error {
	for {
		f, err := c.ReadFrame(ctx)
		if err != nil {
			return err
		}
		if err := deliver(f); err != nil {
			c.deliveryFailed(err)
			return err
		}
	}
}

// deliveryFailed closes the connection because DeliverFrames' function
// refused a frame with err.
func (c *Conn) deliveryFailed(err error) {
	c.mu.Lock()
	if c.deliverErr == nil {
		c.deliverErr = err
	}
	c.mu.Unlock()
	c.fail(codeBadFrame, err)
}

// own takes s, which the peer just finished writing on (a frame, or a pass
// when gotFrame is false), into the pool of idle streams; above passAbove
// idle streams a stream that brought a frame goes back to the peer with a
// pass, and above maxIdleStreams a stream is retired.
func (c *Conn) own(s *stream, gotFrame bool) {
	c.poolMu.Lock()
	k := len(c.idle)
	if k < passAbove || (k < maxIdleStreams && !gotFrame) {
		c.idle = append(c.idle, s)
		c.signal()
		c.poolMu.Unlock()
		return
	}
	c.poolMu.Unlock()
	if gotFrame && k < maxIdleStreams && s.str.TryWriteAll(pass) == nil {
		return
	}
	// Retire it: the peer's reader sees the end and ends its side too.
	s.dead.Store(true)
	s.str.Close()
}

// abandon resets both directions of a peer's stream.
func abandon(str *quic.Stream) {
	str.CancelRead(streamCancelled)
	str.CancelWrite(streamCancelled)
}

// refuse drops a stream that carried a bad frame, and the connection.
func (c *Conn) refuse(str *quic.Stream, code quic.ApplicationErrorCode, err error) {
	str.CancelRead(streamRefused)
	str.CancelWrite(streamRefused)
	c.fail(code, err)
}

// receiveGoodbye reads the count of frames the closing peer wrote: once
// they are all queued we end the connection, and ReadFrame returns io.EOF
// after them. Should some never come, the peer ends it after its linger.
func (c *Conn) receiveGoodbye(str *quic.Stream, r io.Reader) {
	var cb [8]byte
	if _, err := io.ReadFull(r, cb[:]); err != nil {
		abandon(str)
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
	c.endIfDone(done)
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
	c.qc.CloseWithError(code, err.Error()) //nolint:errcheck // closing anyway; the connection is gone either way
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
// they complete: frames written concurrently, or one after the other by
// one writer, may be read in another order. Frames the peer wrote before
// it closed the connection are returned before io.EOF.
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

// WriteFrame sends parts as one frame on an idle stream (one on which the
// peer's last frame or pass arrived in full, so the frame never waits
// behind another's lost packet), or on a new one. A small frame the flow control lets through is queued
// at once; otherwise WriteFrame returns once QUIC took the whole frame
// (flow control may make it wait for the peer to read). It does not wait
// for the peer. When ctx ends first the stream is reset: the frame is not
// delivered, and the connection stays usable. A refused oversized or
// undersized frame sends nothing.
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
	s, err := c.takeStream(ctx, deadline)
	if err != nil {
		return c.writeErr(ctx, err)
	}
	if n+4 > coalesceFrame {
		return c.writeBlocking(ctx, s, deadline, n, nil, parts)
	}
	if n+4 > smallFrame {
		// One blocking Write of the whole frame from a pooled buffer:
		// quic-go copies it straight into the packets as they go out.
		// TryWriteAll would copy it into a buffer of its own, grown by
		// append (as many bytes allocated per frame as without the pool).
		// After a failed write quic-go may still hold the buffer, so it
		// only returns to the pool after a successful one.
		pooled := getFrameBuf(n + 4)
		b := appendFrame((*pooled)[:0], n, parts)
		*pooled = b
		err := c.writeBlocking(ctx, s, deadline, n, b, nil)
		if err == nil {
			frameBufs.Put(pooled)
		}
		return err
	}
	b := appendFrame(s.buf[:0], n, parts)
	s.buf = b
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		c.kill(s, streamClosing)
		return transport.ErrClosed
	}
	err = s.str.TryWriteAll(b)
	if err == nil {
		c.sent++
	}
	c.mu.Unlock()
	if err == nil {
		return nil
	}
	if !errors.Is(err, quic.ErrWouldBlock) {
		c.kill(s, streamCancelled)
		return c.writeErr(ctx, err)
	}
	// Out of flow-control credit: wait for it.
	return c.writeBlocking(ctx, s, deadline, n, b, nil)
}

// appendFrame appends the length n and the parts to b.
func appendFrame(b []byte, n int, parts [][]byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// frameBufs holds the buffers frames above smallFrame are copied into.
var frameBufs sync.Pool

// getFrameBuf returns a buffer with room for n bytes.
func getFrameBuf(n int) *[]byte {
	if p, ok := frameBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, 0, n)
	return &b
}

// writeBlocking writes a frame that could not be queued at once, with
// write_timeout as the stream's deadline and ctx's end resetting it.
func (c *Conn) writeBlocking(ctx context.Context, s *stream, deadline time.Time, n int, whole []byte, parts [][]byte) error {
	s.str.SetWriteDeadline(deadline) //nolint:errcheck // best effort: on a closed connection the I/O that follows fails and says so
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		c.kill(s, streamClosing)
		return transport.ErrClosed
	}
	c.writing[s] = struct{}{}
	c.mu.Unlock()
	s.mu.Lock()
	s.inWrite, s.cancelled = true, false
	s.mu.Unlock()
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			s.mu.Lock()
			if s.inWrite {
				s.cancelled = true
				s.dead.Store(true)
				s.str.CancelWrite(streamCancelled)
			}
			s.mu.Unlock()
		})
	}
	err := writeAll(s, n, whole, parts)
	if stop != nil {
		stop()
	}
	s.mu.Lock()
	s.inWrite = false
	cancelled := s.cancelled
	s.mu.Unlock()
	if cancelled {
		// ctx ended: the stream is being reset, whatever Write said.
		err = ctx.Err()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errWriteTimeout
	}
	c.mu.Lock()
	delete(c.writing, s)
	if err == nil && c.isClosed() {
		err = transport.ErrClosed
	}
	if err == nil {
		c.sent++
	}
	c.mu.Unlock()
	if err != nil {
		c.kill(s, streamCancelled)
		return c.writeErr(ctx, err)
	}
	return nil
}

// writeAll writes whole, the frame with its length when it was copied
// into one buffer (up to coalesceFrame), or else the length and the parts.
func writeAll(s *stream, n int, whole []byte, parts [][]byte) error {
	if whole != nil {
		// One Write: quic-go packs a blocking Write's data as the packets
		// go out, so a Write per part (the length word, a pull answer's
		// header, each message) wakes its sender for each and sends parts
		// in packets of their own, partly filled: more packets to lose.
		_, err := s.str.Write(whole)
		return err
	}
	var lb [4]byte
	binary.BigEndian.PutUint32(lb[:], uint32(n))
	if _, err := s.str.Write(lb[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := s.str.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// takeStream returns an idle stream, or opens one, or waits for one to
// come back (at the peer's stream limit) until ctx ends, the deadline
// passes or the connection is gone.
func (c *Conn) takeStream(ctx context.Context, deadline time.Time) (*stream, error) {
	var expired <-chan time.Time
	for {
		c.poolMu.Lock()
		for k := len(c.idle); k > 0; k-- {
			s := c.idle[k-1]
			c.idle[k-1] = nil
			c.idle = c.idle[:k-1]
			if !s.dead.Load() {
				c.poolMu.Unlock()
				return s, nil
			}
		}
		c.waiters++
		wake := c.wake
		c.poolMu.Unlock()
		str, err := c.qc.OpenStream()
		if err == nil {
			c.unwait(wake)
			c.opened.Add(1)
			s := &stream{str: str}
			c.wg.Add(1)
			go c.receive(s)
			return s, nil
		}
		if !errors.Is(err, &quic.StreamLimitReachedError{}) {
			c.unwait(wake)
			return nil, err
		}
		if expired == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop() //nolint:gocritic // made once (expired == nil before), stopped on return
			expired = t.C
		}
		// The peer's credit for new streams comes without a signal to us:
		// look again now and then too.
		retry := time.NewTimer(10 * time.Millisecond)
		err = nil
		select {
		case <-wake:
		case <-retry.C:
		case <-expired:
			err = errWriteTimeout
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.gone():
			err = context.Cause(c.qc.Context())
		}
		retry.Stop()
		c.unwait(wake)
		if err != nil {
			return nil, err
		}
	}
}

// unwait takes back the waiters count of a takeStream that captured wake,
// unless a signal already cleared it.
func (c *Conn) unwait(wake chan struct{}) {
	c.poolMu.Lock()
	if c.wake == wake {
		c.waiters--
	}
	c.poolMu.Unlock()
}

// signal wakes waiting writers; c.poolMu is held.
func (c *Conn) signal() {
	if c.waiters > 0 {
		close(c.wake)
		c.wake = make(chan struct{})
		c.waiters = 0
	}
}

// kill resets s, which never returns to the pool.
func (c *Conn) kill(s *stream, code quic.StreamErrorCode) {
	s.dead.Store(true)
	s.str.CancelWrite(code)
	s.str.CancelRead(code)
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
// and writes fail with transport.ErrClosed at once; blocked writes are
// reset. Frames already written still reach the peer before it sees the
// end: Close tells the peer how many there were and waits until the peer
// took them all and ended the connection, for 8 round trips (at least 1 s,
// at most 5 s and write_timeout), before it sends CONNECTION_CLOSE itself.
// It waits for the connection's goroutines.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		close(c.closed)
		for s := range c.writing {
			s.dead.Store(true)
			s.str.CancelWrite(streamClosing)
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
		c.qc.CloseWithError(codeClosed, "closed") //nolint:errcheck // closing anyway; the connection is gone either way
		c.wg.Wait()
		c.release()
		c.mu.Lock()
		paths := c.paths
		c.paths = nil
		c.mu.Unlock()
		for _, ep := range paths {
			ep.release()
		}
	})
	return nil
}

// sayGoodbye tells the peer we close after sent frames.
func (c *Conn) sayGoodbye(sent uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.lingerFor())
	defer cancel()
	s, err := c.takeStream(ctx, time.Time{})
	if err != nil {
		return false
	}
	var b [12]byte
	binary.BigEndian.PutUint64(b[4:], sent)
	s.dead.Store(true)
	if _, err := s.str.Write(b[:]); err != nil {
		return false
	}
	return true
}

// budget bounds the bytes of frames being received or queued on one
// connection, so max_streams concurrent frames cannot each hold a frame
// limit's worth of memory. It must hold at least one frame of the limit.
type budget struct {
	mu      sync.Mutex
	avail   int
	waiters int
	wake    chan struct{} // closed and replaced on a release while waiters > 0
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
		b.waiters++
		wake := b.wake
		b.mu.Unlock()
		if expired == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop() //nolint:gocritic // made once (expired == nil before), stopped on return
			expired = t.C
		}
		select {
		case <-wake:
			continue
		case <-stop:
		case <-expired:
		}
		b.mu.Lock()
		if b.wake == wake {
			b.waiters--
		}
		b.mu.Unlock()
		return false
	}
}

func (b *budget) release(n int) {
	b.mu.Lock()
	b.avail += n
	if b.waiters > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
		b.waiters = 0
	}
	b.mu.Unlock()
}
