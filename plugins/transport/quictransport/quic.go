// Package quictransport is the QUIC transport: remoting frames travel on
// QUIC streams, never two in flight on one stream, so frames in flight at
// once, in either direction, never wait behind each other's lost packets
// (TCP's head-of-line blocking). TLS 1.3 is mandatory and both ends
// negotiate the ALPN protocol "quiver-remoting".
//
// # Wire format
//
// One QUIC connection carries one transport.Conn, over bidirectional
// streams that either end opens and that live as long as the connection.
// On a stream a frame is its 4-byte big-endian length and the frame. The
// ends write on a stream by turns: an end writes a frame only on a stream
// it opened and has not written on yet, or on which the peer's last frame
// arrived in full. A writer takes such an idle stream, or opens one when
// it has none; the peer's answer (any frame the peer writes next) then
// usually goes back on that stream, which makes it the writer's again. So
// a stream is reused only once everything written on it arrived: a lost
// packet delays its own frame and nothing else, as with a stream per frame,
// without the cost of opening and closing a stream (and starting a
// goroutine) for every frame.
//
// One-way traffic would leave the reader with ever more idle streams and
// the writer with none: an end holding more than 64 idle streams hands a
// stream on which a frame arrived straight back with a pass, the length
// 0xFFFFFFFF with no frame. An end holding more than 128 retires the
// stream instead: it closes its side at a frame boundary (FIN) and the peer
// closes its side in turn.
//
// The receiver checks a length against its frame limit before it
// allocates anything. A receiver refuses a frame above its limit, below
// the 4-byte header-length word, or cut short by the end of the stream, by
// resetting the stream, and closes the connection with an application
// error code and the reason, which it logs.
//
// Close writes, on a stream it may write on, a zero length and the 8-byte
// count of frames it wrote in full. The peer ends the connection once it
// has queued that many (or at once when it is closing too); the closer
// sends CONNECTION_CLOSE itself after a bounded linger. So frames written
// before Close reach the peer before it reads io.EOF.
//
// # Order
//
// Frames are delivered as they complete, so frames written one after the
// other may be read in another order (the price of no head-of-line
// blocking; transporttest runs with Unordered). core/remoting matches
// responses by opaque and serves requests concurrently, so it needs no
// order. Earlier designs: a stream per frame with a receipt that
// WriteFrame waited for (kept each writer's order, half the throughput); a
// unidirectional stream per frame (no receipt; opening, accepting and
// closing a stream and a goroutine per frame cost about as much CPU as the
// rest of a send); a shared pool of streams that several frames used at
// once (+17-30% at 0% loss, but -30-45% at 5% loss: frames blocked each
// other); idle streams returned to the writer by a one-byte receipt from
// the reader (most of today's gain, one more small write and goroutine
// wake-up per frame).
package quictransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"

	"github.com/quivermq/quiver/core/transport"
)

// Provider is the transport descriptor registered with the kernel.
type Provider = transport.Descriptor[Config]

// NewProvider returns the provider (transport.Define).
func NewProvider() *Provider {
	return transport.Define("quic", NewConfig,
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Listener, error) {
			ln, err := Listen(ctx, addr, cfg, deps)
			if err != nil {
				return nil, err
			}
			return ln, nil
		},
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Conn, error) {
			c, err := Dial(ctx, addr, cfg, deps)
			if err != nil {
				return nil, err
			}
			return c, nil
		})
}

// Application and stream error codes sent to the peer.
const (
	codeClosed        quic.ApplicationErrorCode = 0x0
	codeFrameTooLarge quic.ApplicationErrorCode = 0x101
	codeBadFrame      quic.ApplicationErrorCode = 0x102
	codeWriteTimeout  quic.ApplicationErrorCode = 0x103
	codeNoListener    quic.ApplicationErrorCode = 0x104

	streamCancelled quic.StreamErrorCode = 0x1
	streamRefused   quic.StreamErrorCode = 0x2
	streamClosing   quic.StreamErrorCode = 0x3
)

func maxOr(n int) int {
	if n <= 0 {
		return transport.DefaultMaxFrameSize
	}
	return n
}

func loggerOf(deps transport.Deps) *slog.Logger {
	if deps.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return deps.Logger.With("transport", "quic")
}

func quicConfig(cfg *Config) *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:  cfg.HandshakeTimeout,
		MaxIdleTimeout:        cfg.IdleTimeout,
		KeepAlivePeriod:       cfg.KeepAlive,
		MaxIncomingStreams:    int64(cfg.MaxStreams),
		MaxIncomingUniStreams: -1,
		Allow0RTT:             cfg.ZeroRTT,
		MaxAckDelay:           cfg.MaxAckDelay,
		AckElicitingThreshold: cfg.AckThreshold,
		CongestionBackoff:     cfg.CongestionBackoff,
		Congestion:            cfg.Congestion,
	}
}

// quicListener is quic.Listener or, with zero_rtt, quic.EarlyListener.
type quicListener interface {
	Accept(ctx context.Context) (*quic.Conn, error)
	Close() error
	Addr() net.Addr
}

// Listener accepts QUIC frame connections on one UDP socket.
type Listener struct {
	ln       quicListener
	addr     string
	ep       *endpoint
	cfg      *Config
	maxFrame int
	log      *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

var _ transport.Listener = (*Listener)(nil)

// Listen binds addr on UDP. With no certificate configured it generates a
// self-signed one and logs its fingerprint.
func Listen(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (*Listener, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	log := loggerOf(deps)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("quictransport: listen %s: %w", addr, err)
	}
	tc, err := serverTLS(cfg, host, log)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, fmt.Errorf("quictransport: listen %s: %w", addr, err)
	}
	ep := newEndpoint(pc.(*net.UDPConn))
	var ln quicListener
	if cfg.ZeroRTT {
		// Connections come out of Accept once the client's first flight
		// (with its 0-RTT frames) is in, before the handshake completes.
		ln, err = ep.tr.ListenEarly(tc, quicConfig(cfg))
	} else {
		ln, err = ep.tr.Listen(tc, quicConfig(cfg))
	}
	if err != nil {
		ep.release()
		return nil, fmt.Errorf("quictransport: listen %s: %w", addr, err)
	}
	return &Listener{ln: ln, addr: ln.Addr().String(), ep: ep, cfg: cfg, maxFrame: maxOr(deps.MaxFrameSize), log: log, closed: make(chan struct{})}, nil
}

// Accept waits for the next connection whose handshake completed, or for
// ctx's end. Failed handshakes never reach it.
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case <-l.closed:
		return nil, transport.ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	qc, err := l.ln.Accept(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, quic.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			return nil, transport.ErrClosed
		}
		return nil, fmt.Errorf("quictransport: accept: %w", err)
	}
	if !l.ep.acquire() {
		qc.CloseWithError(codeNoListener, "listener closed") //nolint:errcheck // closing anyway; the connection is gone either way
		return nil, transport.ErrClosed
	}
	return newConn(qc, l.cfg, l.maxFrame, l.log, l.ep.release), nil
}

// Addr is the bound UDP address.
func (l *Listener) Addr() string { return l.addr }

// Close stops accepting. Connections already accepted stay open; the UDP
// socket is closed once the last of them is.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.ln.Close()
		l.ep.release()
	})
	return nil
}

// endpoint is a UDP socket and its quic.Transport, shared by a listener and
// the connections it accepted, or owned by one dialled connection; the
// last user to release it closes both.
type endpoint struct {
	udp *net.UDPConn
	tr  *quic.Transport

	mu   sync.Mutex
	refs int
}

func newEndpoint(udp *net.UDPConn) *endpoint {
	return &endpoint{udp: udp, tr: &quic.Transport{Conn: udp}, refs: 1}
}

// acquire adds a user unless the endpoint is already gone.
func (e *endpoint) acquire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs == 0 {
		return false
	}
	e.refs++
	return true
}

func (e *endpoint) release() {
	e.mu.Lock()
	e.refs--
	last := e.refs == 0
	e.mu.Unlock()
	if last {
		e.tr.Close()
		e.udp.Close()
	}
}

// Dial connects to addr ("host:port") over UDP from a socket of its own.
func Dial(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (*Conn, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	if cfg.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("quictransport: dial %s: %w", addr, err)
	}
	raddr, err := resolve(ctx, host, port)
	if err != nil {
		return nil, fmt.Errorf("quictransport: dial %s: %w", addr, err)
	}
	tc, err := clientTLS(cfg, host)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: sourceIP(raddr)})
	if err != nil {
		return nil, fmt.Errorf("quictransport: dial %s: %w", addr, err)
	}
	ep := newEndpoint(udp)
	dial := ep.tr.Dial
	if cfg.ZeroRTT {
		dial = ep.tr.DialEarly
	}
	qc, err := dial(ctx, raddr, tc, quicConfig(cfg))
	if err != nil {
		ep.release()
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, fmt.Errorf("quictransport: dial %s: %w", addr, err)
	}
	c := newConn(qc, cfg, maxOr(deps.MaxFrameSize), loggerOf(deps), ep.release)
	c.dialIP = udp.LocalAddr().(*net.UDPAddr).IP
	return c, nil
}

// Migrate moves a dialled connection to a new UDP socket (a new local
// port, bound to the address the kernel routes the peer from now: a
// device that changed networks gets its new address, otherwise the old
// address is kept): QUIC connection migration, as when a device changes
// networks or its NAT binding changes. The new path is validated with
// the peer (PATH_CHALLENGE and PATH_RESPONSE) before traffic switches to
// it; frames in flight are retransmitted on it, so nothing acknowledged
// is lost, and the session (streams, TLS keys, remoting state) stays.
// Only the dialling end migrates; an accepted connection returns an
// error.
func (c *Conn) Migrate(ctx context.Context) error {
	if c.dialIP == nil {
		return errors.New("quictransport: migrate: only a dialled connection migrates")
	}
	if c.isClosed() {
		return transport.ErrClosed
	}
	ip := c.dialIP
	if ra, err := net.ResolveUDPAddr("udp", c.remote); err == nil {
		if now := sourceIP(ra); now != nil {
			ip = now
		}
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		return fmt.Errorf("quictransport: migrate: %w", err)
	}
	ep := newEndpoint(udp)
	path, err := c.qc.AddPath(ep.tr)
	if err != nil {
		ep.release()
		return fmt.Errorf("quictransport: migrate: %w", err)
	}
	if err := path.Probe(ctx); err != nil {
		path.Close()
		ep.release()
		return fmt.Errorf("quictransport: migrate: probe %s: %w", udp.LocalAddr(), err)
	}
	if err := path.Switch(); err != nil {
		path.Close()
		ep.release()
		return fmt.Errorf("quictransport: migrate: switch to %s: %w", udp.LocalAddr(), err)
	}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		ep.release()
		return transport.ErrClosed
	}
	// The old socket stays open until Close: its quic.Transport owns the
	// connection, and late packets of the old path still arrive there.
	c.paths = append(c.paths, ep)
	c.mu.Unlock()
	c.log.Info("connection migrated", "local", udp.LocalAddr().String())
	return nil
}

func resolve(ctx context.Context, host, port string) (*net.UDPAddr, error) {
	p, err := net.LookupPort("udp", port)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(p))), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	// Prefer IPv4, as the TCP dialler's fallback usually ends up there.
	best := ips[0]
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			best = ip
			break
		}
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(best.Unmap(), uint16(p))), nil
}

// sourceIP is the local address the kernel routes raddr from, so that the
// connection's LocalAddr is what the peer sees as its RemoteAddr; nil (any
// address) when it cannot be found.
func sourceIP(raddr *net.UDPAddr) net.IP {
	c, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP
}
