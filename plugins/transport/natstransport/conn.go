package natstransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quivermq/quiver/core/transport"
)

// maxQueued bounds the bytes received but not yet read on one connection
// (at least four frames of the limit). NATS has no flow control: a peer
// that outruns our reader would otherwise grow memory without end, so the
// connection is closed instead, as TCP's write_timeout drops a peer that
// stops reading.
func maxQueued(maxFrame int) int { return max(64<<20, 4*maxFrame) }

// Conn is one Quiver connection over NATS: frames from the peer arrive on
// our subject (a token under the hub's inbox) and ours go to the peer's.
type Conn struct {
	hub      *hub
	id       string
	subject  string
	local    string
	maxFrame int
	log      *slog.Logger

	// Set before the connection is handed out (by the handshake for a
	// dialer), read-only afterwards.
	peer   string
	remote string
	idle   time.Duration

	wmu      sync.Mutex // orders publishes: sequence numbers, split frames
	wseq     uint32
	lastSent time.Time

	mu       sync.Mutex
	frames   [][]byte
	queued   int
	rseq     uint32
	partial  []byte
	want     int
	lastRecv time.Time
	end      error // why the peer side ended: io.EOF after a goodbye, or a failure
	werr     error // what writes return once end is set
	closed   bool
	notify   chan struct{}
	timer    *time.Timer

	handshake chan struct{} // dialer: closed when accepted or refused
	dialErr   error

	closeOnce sync.Once
}

var _ transport.Conn = (*Conn)(nil)

func newConn(h *hub, local, remote string, maxFrame int, idle time.Duration, log *slog.Logger) *Conn {
	return &Conn{hub: h, local: local, remote: remote, maxFrame: maxFrame, idle: idle, log: log,
		notify: make(chan struct{}, 1), lastRecv: time.Now(), lastSent: time.Now()}
}

func nextSeq(s uint32) uint32 {
	if s++; s == 0 {
		s = 1 // 0 marks unsequenced messages
	}
	return s
}

func (c *Conn) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// ReadFrame returns the next frame, then (after a goodbye) io.EOF or the
// reason the connection failed.
func (c *Conn) ReadFrame(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		if c.closed {
			err := c.closedErrLocked()
			c.mu.Unlock()
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if len(c.frames) > 0 {
			f := c.frames[0]
			c.frames[0] = nil
			c.frames = c.frames[1:]
			c.queued -= len(f)
			c.mu.Unlock()
			return f, nil
		}
		end := c.end
		c.mu.Unlock()
		if end != nil {
			return nil, end
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
		}
	}
}

// WriteFrame publishes the frame as one NATS message, or as several when
// it is larger than the server's max_payload (see the package comment).
func (c *Conn) WriteFrame(ctx context.Context, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.maxFrame {
		return fmt.Errorf("%w: %d bytes is above the frame limit of %d bytes (remoting.max_frame_size)", transport.ErrFrameTooLarge, n, c.maxFrame)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
		return err
	}
	nc := c.hub.nc
	if !nc.IsConnected() {
		return c.linkLost(fmt.Errorf("%w (reconnecting)", ErrConnLost))
	}
	maxPayload := int(nc.MaxPayload())
	if headerLen+n > maxPayload && maxPayload <= firstLen {
		return fmt.Errorf("natstransport: NATS max_payload %d is too small", maxPayload)
	}
	c.wmu.Lock()
	if err := c.writable(); err != nil {
		c.wmu.Unlock()
		return err
	}
	midFrame, err := c.publishLocked(nc, parts, n, maxPayload)
	c.wmu.Unlock()
	if err != nil {
		// Handled without wmu: ending the connection sends a goodbye.
		return c.writeFailed(err, midFrame)
	}
	return nil
}

// publishLocked publishes the frame, split when it does not fit one
// message of maxPayload (under wmu). A publish that fails returns its
// error, with midFrame set when the peer got part of a split frame.
func (c *Conn) publishLocked(nc *nats.Conn, parts [][]byte, n, maxPayload int) (midFrame bool, err error) {
	cur := cursor{parts: parts}
	seq := c.wseq
	if headerLen+n <= maxPayload {
		bp := getBuf(headerLen + n)
		b := *bp
		seq = nextSeq(seq)
		putHeader(b, kindFrame, seq)
		cur.read(b[headerLen:])
		err := nc.PublishRequest(c.peer, c.subject, b)
		putBuf(bp)
		if err != nil {
			return false, err
		}
		c.wseq, c.lastSent = seq, time.Now()
		return false, nil
	}
	bp := getBuf(maxPayload)
	defer putBuf(bp)
	for left, first := n, true; left > 0 || first; first = false {
		b := *bp
		seq = nextSeq(seq)
		var k int
		if first {
			putHeader(b, kindFirst, seq)
			binary.BigEndian.PutUint32(b[headerLen:], uint32(n))
			k = min(left, maxPayload-firstLen)
			b = b[:firstLen+k]
			cur.read(b[firstLen:])
		} else {
			putHeader(b, kindMore, seq)
			k = min(left, maxPayload-headerLen)
			b = b[:headerLen+k]
			cur.read(b[headerLen:])
		}
		left -= k
		if err := nc.PublishRequest(c.peer, c.subject, b); err != nil {
			return !first, err
		}
		c.wseq, c.lastSent = seq, time.Now()
	}
	return false, nil
}

// writeFailed is the error of a failed publish (wmu not held). With the
// NATS connection down the connection ends with ErrConnLost; a split
// frame cut short breaks the stream and ends it too.
func (c *Conn) writeFailed(err error, midFrame bool) error {
	if !c.hub.nc.IsConnected() {
		return c.linkLost(fmt.Errorf("%w: %v", ErrConnLost, err))
	}
	if midFrame {
		c.fail(fmt.Errorf("natstransport: write: %w", err), "write failed mid-frame")
	}
	return fmt.Errorf("natstransport: write to %s: %w", c.remote, err)
}

// linkLost ends the connection with err, a write's finding that the NATS
// connection is down, and returns err. The hub's disconnect handler would
// end it so a moment later; doing it now keeps the reason for what comes
// in between: remoting closes a connection whose write failed, and writes
// racing with that Close must still say the link was lost, not return a
// bare transport.ErrClosed as if we had closed it (closedErrLocked).
func (c *Conn) linkLost(err error) error {
	c.lose(err)
	return err
}

func (c *Conn) writable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closedErrLocked()
	}
	if c.end != nil {
		return c.werr
	}
	return nil
}

// closedErrLocked is what operations on a closed connection return:
// transport.ErrClosed, carrying what ended the connection first, if
// anything did (a lost NATS connection, the peer's goodbye), so a write
// racing with the remoting layer's Close still says why. A bare
// transport.ErrClosed means we closed it.
func (c *Conn) closedErrLocked() error {
	switch {
	case c.end == nil:
		return transport.ErrClosed
	case errors.Is(c.end, io.EOF):
		return fmt.Errorf("%w: %w", transport.ErrClosed, c.werr) // the peer closed first
	}
	return fmt.Errorf("%w: %w", transport.ErrClosed, c.end)
}

// cursor copies the concatenation of parts out piece by piece.
type cursor struct {
	parts [][]byte
	off   int
}

func (c *cursor) read(dst []byte) {
	for len(dst) > 0 {
		p := c.parts[0][c.off:]
		n := copy(dst, p)
		dst = dst[n:]
		c.off += n
		if c.off == len(c.parts[0]) {
			c.parts, c.off = c.parts[1:], 0
		}
	}
}

var bufPool sync.Pool

func getBuf(n int) *[]byte {
	if bp, ok := bufPool.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n)
	return &b
}

func putBuf(bp *[]byte) {
	if cap(*bp) <= 2<<20 {
		bufPool.Put(bp)
	}
}

// sendControl publishes a sequenced control message (ping, goodbye).
func (c *Conn) sendControl(kind byte, text string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	seq := nextSeq(c.wseq)
	if err := c.hub.nc.PublishRequest(c.peer, c.subject, control(kind, seq, text)); err != nil {
		return err
	}
	c.wseq, c.lastSent = seq, time.Now()
	return nil
}

// deliver takes one message from the peer (in the hub's dispatch
// goroutine, in the order the peer published).
func (c *Conn) deliver(kind byte, seq uint32, rest []byte, reply string) {
	c.mu.Lock()
	if c.closed || c.end != nil {
		c.mu.Unlock()
		return
	}
	c.lastRecv = time.Now()
	switch kind {
	case kindAccept, kindRefuse:
		c.handshakeLocked(kind, rest, reply)
		c.mu.Unlock()
		return
	}
	if c.peer == "" { // not yet accepted
		c.mu.Unlock()
		return
	}
	if kind == kindClose && seq == 0 {
		// The peer has no such connection (it closed, or restarted).
		c.endLocked(io.EOF, fmt.Errorf("natstransport: write to %s: the peer closed the connection: %w", c.remote, io.ErrClosedPipe))
		c.mu.Unlock()
		return
	}
	if want := nextSeq(c.rseq); seq != want {
		err := fmt.Errorf("natstransport: messages from %s lost (got #%d, expected #%d)", c.remote, seq, want)
		c.mu.Unlock()
		c.fail(err, "messages lost")
		return
	}
	c.rseq = seq
	var err error
	switch kind {
	case kindFrame:
		if c.partial != nil {
			err = fmt.Errorf("%w: a whole frame inside a split one", transport.ErrBadFrame)
		} else if len(rest) > c.maxFrame {
			err = fmt.Errorf("%w: %s sent %d bytes, above our limit of %d", transport.ErrFrameTooLarge, c.remote, len(rest), c.maxFrame)
		} else {
			err = c.queueLocked(rest)
		}
	case kindFirst:
		if c.partial != nil || len(rest) < 4 {
			err = fmt.Errorf("%w: bad split frame start", transport.ErrBadFrame)
			break
		}
		total := int(binary.BigEndian.Uint32(rest))
		if total > c.maxFrame {
			err = fmt.Errorf("%w: %s sent %d bytes, above our limit of %d", transport.ErrFrameTooLarge, c.remote, total, c.maxFrame)
			break
		}
		if c.queued+total > maxQueued(c.maxFrame) {
			err = c.tooSlowLocked()
			break
		}
		c.partial, c.want = make([]byte, 0, total), total
		err = c.pieceLocked(rest[4:])
	case kindMore:
		if c.partial == nil {
			err = fmt.Errorf("%w: split frame continued without a start", transport.ErrBadFrame)
			break
		}
		err = c.pieceLocked(rest)
	case kindPing:
	case kindClose:
		if len(rest) > 0 {
			c.log.Debug("peer closed", "remote", c.remote, "reason", string(rest))
		}
		c.endLocked(io.EOF, fmt.Errorf("natstransport: write to %s: the peer closed the connection: %w", c.remote, io.ErrClosedPipe))
	default:
		err = fmt.Errorf("%w: unknown message kind %q", transport.ErrBadFrame, kind)
	}
	c.mu.Unlock()
	if err != nil {
		c.fail(err, err.Error())
	}
}

func (c *Conn) pieceLocked(p []byte) error {
	if len(c.partial)+len(p) > c.want {
		return fmt.Errorf("%w: split frame longer than announced", transport.ErrBadFrame)
	}
	c.partial = append(c.partial, p...)
	if len(c.partial) < c.want {
		return nil
	}
	f := c.partial
	c.partial = nil
	c.frames = append(c.frames, f)
	c.queued += len(f)
	c.signal()
	return nil
}

func (c *Conn) queueLocked(f []byte) error {
	if c.queued+len(f) > maxQueued(c.maxFrame) {
		return c.tooSlowLocked()
	}
	c.frames = append(c.frames, f)
	c.queued += len(f)
	c.signal()
	return nil
}

func (c *Conn) tooSlowLocked() error {
	return fmt.Errorf("natstransport: reader too slow: more than %d bytes from %s unread", maxQueued(c.maxFrame), c.remote)
}

// handshakeLocked completes a Dial.
func (c *Conn) handshakeLocked(kind byte, rest []byte, reply string) {
	if c.handshake == nil || c.peer != "" || c.dialErr != nil {
		return
	}
	switch {
	case kind == kindRefuse:
		c.dialErr = fmt.Errorf("connection refused: %s", rest)
	case len(rest) < 5 || rest[0] != version:
		c.dialErr = errors.New("the listener answered with an unsupported protocol version")
	case reply == "":
		c.dialErr = errors.New("the listener accepted without a subject")
	default:
		c.peer = reply
		c.idle = minIdle(c.idle, time.Duration(binary.BigEndian.Uint32(rest[1:]))*time.Millisecond)
		if a := string(rest[5:]); a != "" {
			c.remote = a
		}
	}
	close(c.handshake)
}

// minIdle is the idle timeout both ends agree on: the smaller one set.
func minIdle(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// endLocked records that the peer side is over; reads return what was
// queued, then readErr, and writes fail with writeErr.
func (c *Conn) endLocked(readErr, writeErr error) {
	if c.end != nil {
		return
	}
	c.end, c.werr = readErr, writeErr
	c.partial = nil
	c.signal()
}

// fail ends the connection because of err and tells the peer why.
func (c *Conn) fail(err error, reason string) {
	c.mu.Lock()
	if c.closed || c.end != nil {
		c.mu.Unlock()
		return
	}
	c.endLocked(err, err)
	c.mu.Unlock()
	c.log.Warn("closing connection", "remote", c.remote, "err", err)
	c.sendControl(kindClose, reason) //nolint:errcheck // best effort: the peer also learns of the close from its idle timeout
	c.hub.unregister(c)
}

// lose ends the connection because the NATS connection failed.
func (c *Conn) lose(err error) {
	c.mu.Lock()
	if c.closed || c.end != nil {
		c.mu.Unlock()
		return
	}
	c.endLocked(err, err)
	established := c.peer != ""
	c.mu.Unlock()
	if established {
		// Queued for after the reconnect: a peer that kept its NATS
		// connection then stops waiting for us.
		c.sendControl(kindClose, "NATS connection lost") //nolint:errcheck // best effort: the peer also learns of the close from its idle timeout
	}
	c.hub.unregister(c)
}

// unreachable is a no-responders answer: our message to subj found no
// subscriber.
func (c *Conn) unreachable(subj string) {
	c.mu.Lock()
	if c.handshake != nil && c.peer == "" && c.dialErr == nil {
		c.dialErr = fmt.Errorf("connection refused: nothing listens on %s", subj)
		close(c.handshake)
		c.mu.Unlock()
		return
	}
	if c.closed || c.end != nil {
		c.mu.Unlock()
		return
	}
	err := fmt.Errorf("natstransport: %s unreachable: nobody subscribes to %s", c.remote, subj)
	c.endLocked(err, err)
	c.mu.Unlock()
	c.hub.unregister(c)
}

// startKeepAlive arms the idle timer: every third of the idle timeout a
// ping goes out if nothing else did, and the connection ends when nothing
// came from the peer for the whole timeout.
func (c *Conn) startKeepAlive() {
	if c.idle <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.timer = time.AfterFunc(c.idle/3, c.tick)
}

func (c *Conn) tick() {
	c.mu.Lock()
	if c.closed || c.end != nil {
		c.mu.Unlock()
		return
	}
	silent := time.Since(c.lastRecv)
	c.mu.Unlock()
	if silent > c.idle {
		c.fail(fmt.Errorf("natstransport: %s silent for %v (idle_timeout %v): peer vanished", c.remote, silent.Round(time.Millisecond), c.idle), "idle timeout")
		return
	}
	c.wmu.Lock()
	quiet := time.Since(c.lastSent) >= c.idle/3
	c.wmu.Unlock()
	if quiet && c.hub.nc.IsConnected() {
		c.sendControl(kindPing, "") //nolint:errcheck // best effort: the peer also learns of the close from its idle timeout
	}
	c.mu.Lock()
	if !c.closed && c.timer != nil {
		c.timer.Reset(c.idle / 3)
	}
	c.mu.Unlock()
}

// LocalAddr is our address: the listener's, or for a dialer the IP the
// NATS server sees with a per-connection number as port.
func (c *Conn) LocalAddr() string { return c.local }

// RemoteAddr is the peer's address as it announced it.
func (c *Conn) RemoteAddr() string { return c.remote }

// Close sends a goodbye after the frames already written (so the peer
// reads them, then io.EOF) and stops receiving.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		goodbye := c.end == nil && c.peer != ""
		if c.timer != nil {
			c.timer.Stop()
		}
		c.frames, c.partial = nil, nil
		c.signal()
		c.mu.Unlock()
		if goodbye && c.hub.nc.IsConnected() {
			if err := c.sendControl(kindClose, ""); err != nil && !errors.Is(err, ErrConnLost) {
				c.log.Debug("goodbye", "remote", c.remote, "err", err)
			}
		}
		c.hub.unregister(c)
	})
	return nil
}
