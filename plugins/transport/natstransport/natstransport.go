// Package natstransport carries Quiver's remoting over a NATS network, so
// that clients and servers which can reach a NATS server reach each other
// with no direct TCP or UDP path between them. Configuration: the section
// transport.nats (see Config); `transports: [tcp, nats]` enables it.
//
// # Addresses and subjects
//
// Addresses keep their usual form, so the same broker.listen and
// namesrv.listen serve every transport. A listener for host:port
// subscribes to
//
//	<subject_prefix>.<host>.<port>      e.g. quiver.127_0_0_1.10911
//
// with the host's '.' and ':' replaced by '_' (IP literals in canonical
// form, names lower-cased). An unspecified host (0.0.0.0, [::] or empty)
// subscribes for every local interface address, loopback and "localhost",
// as a TCP listener on 0.0.0.0 accepts connections to any of them. An
// address without a port is a name taken verbatim as the rest of the
// subject: `broker.listen=DefaultCluster.broker-a.0` listens on
// quiver.DefaultCluster.broker-a.0, for identity-derived subjects (the
// broker itself still wants an ip:port in broker.advertise for its message
// ids). Port 0 picks a free port number: one no listener on the NATS
// network answers for. Listening twice on one subject in one process fails
// like a TCP address in use; across processes it is allowed, see below.
//
// A dialer reaches "nats://host:port" (transport.Set strips the scheme)
// on the same subject. Quiver's client dials brokers with its name
// server's scheme, so a client given nats:// name servers reaches brokers
// that registered plain host:port addresses over NATS too.
//
// # Connections
//
// Each process (each Provider) holds one NATS connection per server URL
// and credentials, shared by its listeners and connections and closed with
// the last of them. Every connection is a subject of its own under the
// NATS connection's inbox, <inbox>.<n>; one wildcard subscription on
// <inbox>.* receives for all of them.
//
// Dial publishes a connect message to the listener subject with its own
// subject as reply. The listener, subscribed with the queue group
// "quiver", makes a connection for it, answers with an accept message
// whose reply is the server connection's subject, and Accept returns it.
// From then on every remoting frame travels as one NATS message, client to
// server on the server connection's subject and server to client on the
// client's (server-initiated requests such as transaction check-backs
// included), each published with the sender's subject as reply.
//
// The queue group lets several processes listen on one address: each
// connect reaches one of them, and the connection stays pinned to the
// instance that accepted it, so all connection state (client tables,
// held pulls, check-backs) lives there, as behind a TCP load balancer with
// connection affinity. That suits interchangeable instances, such as name
// servers fed by the same brokers; brokers holding different data need
// addresses of their own. A listener that finds others on its subject logs
// it.
//
// # Wire format
//
// Every message starts with a kind byte and a 4-byte sequence number:
// F (a whole frame), S (first piece of a split frame: 4-byte total length,
// then data), M (next piece), P (keep-alive), X (goodbye, optional reason),
// and, unsequenced, C/A/R/Q (connect, accept, refuse, probe; connect and
// accept carry a version byte, the sender's idle timeout in milliseconds
// and its address). Sequence numbers count each direction's messages
// from 1; a gap (a message NATS dropped, e.g. a slow consumer) closes the
// connection instead of corrupting the frame stream.
//
// Frames above the NATS server's max_payload (nc.MaxPayload(), 1 MiB by
// default) are split into pieces of at most max_payload, written under the
// connection's write lock so they are contiguous; NATS keeps one
// publisher's messages to a subject in order, so the receiver appends the
// pieces. Frames are thus bounded only by remoting.max_frame_size; above
// it WriteFrame fails with transport.ErrFrameTooLarge and the connection
// stays usable. Frames written one after the other arrive in that order.
//
// # Ends, keep-alive and NATS outages
//
// Close sends a goodbye after the frames already written: the peer reads
// them, then io.EOF, and its writes fail. A message for a connection that
// no longer exists is answered with a goodbye, and one published to a
// subject without subscriber (the peer process died) comes back as a NATS
// no-responders status: both end the connection at once. A peer that
// vanished silently is detected by idle_timeout: each end sends a
// keep-alive when it sent nothing for a third of the smaller of both
// ends' idle timeouts, and closes the connection when nothing came for the
// whole of it. NATS has no flow control: a connection whose reader falls
// more than max(64 MiB, 4 × remoting.max_frame_size) behind is closed, as
// TCP's write_timeout drops a peer that stops reading.
//
// When the NATS connection drops, every Quiver connection on it ends with
// ErrConnLost: reads fail after the frames already received, writes at
// once, so remoting fails the calls in flight (the peer may be out of
// reach and messages in flight may be lost) and the next request dials
// anew. Listener subscriptions survive: nats.go re-subscribes them on
// reconnect, and dials made then work. Dials while disconnected fail fast.
// When nats.go gives up reconnecting (max_reconnects), listeners fail too.
//
// # Addresses of connections
//
// A server connection's LocalAddr is the listener address; its
// RemoteAddr, and a dialer's LocalAddr, is the dialer's IP as its NATS
// server sees it with a per-connection number as port (NATS has no
// ports). The dialer announces it: over NATS, IP white lists
// authenticate nothing; use NATS accounts and permissions (the process
// needs publish and subscribe rights on <subject_prefix>.> and _INBOX.>).
package natstransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quivermq/quiver/core/transport"
)

// Provider is the transport descriptor registered with the kernel (a
// transport.Define descriptor, embedded). It owns the process's NATS
// connections: listeners and dialers of one Provider share them.
type Provider struct {
	*transport.Descriptor[Config]
	pool *pool
	seq  atomic.Uint64
}

var _ transport.Provider = (*Provider)(nil)

// NewProvider returns a provider with no NATS connection yet.
func NewProvider() *Provider {
	p := &Provider{pool: newPool()}
	p.Descriptor = transport.Define("nats", NewConfig,
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Listener, error) {
			ln, err := p.ListenNATS(ctx, addr, cfg, deps)
			if err != nil {
				return nil, err
			}
			return ln, nil
		},
		func(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (transport.Conn, error) {
			c, err := p.DialNATS(ctx, addr, cfg, deps)
			if err != nil {
				return nil, err
			}
			return c, nil
		})
	return p
}

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
	return deps.Logger.With("transport", "nats")
}

// queueGroup is the queue group of every listener subscription.
const queueGroup = "quiver"

// backlog bounds connections accepted by NATS but not yet by Accept.
const backlog = 256

// probeTimeout bounds the question whether a listener subject is taken.
const probeTimeout = 2 * time.Second

// Listener accepts connections arriving on its subject(s).
type Listener struct {
	hub      *hub
	addr     address
	subjects []string
	subs     []*nats.Subscription
	cfg      *Config
	maxFrame int
	log      *slog.Logger
	seq      *atomic.Uint64

	mu      sync.Mutex
	closed  bool
	err     error
	pending chan *Conn
	done    chan struct{}
	once    sync.Once
}

var _ transport.Listener = (*Listener)(nil)

// ListenNATS subscribes to the subjects of addr (see the package comment).
func (p *Provider) ListenNATS(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (*Listener, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	a, err := parseAddress(addr)
	if err != nil {
		return nil, err
	}
	log := loggerOf(deps)
	h, err := p.pool.acquire(cfg, log)
	if err != nil {
		return nil, err
	}
	l := &Listener{hub: h, cfg: cfg, maxFrame: maxOr(deps.MaxFrameSize), log: log, seq: &p.seq,
		pending: make(chan *Conn, backlog), done: make(chan struct{})}
	if err := l.bind(ctx, a); err != nil {
		h.release()
		return nil, err
	}
	return l, nil
}

// bind picks the port (for port 0), claims the subjects in the process and
// subscribes.
func (l *Listener) bind(ctx context.Context, a address) error {
	h := l.hub
	for try := 0; ; try++ {
		cand := a
		if !a.isName() && a.port == 0 {
			cand.port = 1024 + rand.IntN(65535-1024)
		}
		subjects := cand.listenSubjects(l.cfg.SubjectPrefix)
		if !h.claim(subjects, l) {
			if cand.port != a.port && try < 20 {
				continue
			}
			return fmt.Errorf("natstransport: listen %s: %s already listened on in this process", a, subjects[0])
		}
		taken, err := l.probe(ctx, subjects[0])
		if err != nil {
			h.unclaim(subjects, l)
			return fmt.Errorf("natstransport: listen %s: %w", a, err)
		}
		if taken && cand.port != a.port {
			h.unclaim(subjects, l)
			if try < 20 {
				continue
			}
			return fmt.Errorf("natstransport: listen %s: no free port number found", a)
		}
		if taken {
			l.log.Info("another instance listens on this address: connections are shared between them (queue group)", "subject", subjects[0])
		}
		l.addr, l.subjects = cand, subjects
		break
	}
	for _, s := range l.subjects {
		sub, err := h.nc.QueueSubscribe(s, queueGroup, l.handle)
		if err != nil {
			l.unsubscribe()
			h.unclaim(l.subjects, l)
			return fmt.Errorf("natstransport: listen %s: subscribe %s: %w", a, s, err)
		}
		sub.SetPendingLimits(-1, -1) //nolint:errcheck // only fails on a closed subscription, which the next receive reports
		l.subs = append(l.subs, sub)
	}
	// The subscription is in place on the server once it answered a
	// flush, so a dial right after Listen finds it.
	if err := h.nc.FlushTimeout(l.cfg.ConnectTimeout); err != nil {
		l.unsubscribe()
		h.unclaim(l.subjects, l)
		return fmt.Errorf("natstransport: listen %s: %w", a, err)
	}
	l.log.Debug("listening", "addr", l.addr.String(), "subjects", l.subjects)
	return nil
}

// probe asks whether some listener already answers on subj.
func (l *Listener) probe(ctx context.Context, subj string) (bool, error) {
	nc := l.hub.nc
	if !nc.HeadersSupported() {
		return false, nil // no no-responders answers: cannot tell
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, subj, control(kindProbe, 0, ""))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders):
		return false, nil
	case errors.Is(err, context.DeadlineExceeded):
		return false, fmt.Errorf("probing %s: no answer within %v", subj, probeTimeout)
	default:
		return false, fmt.Errorf("probing %s: %w", subj, err)
	}
}

func (h *hub) claim(subjects []string, l *Listener) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range subjects {
		if h.listening[s] != nil {
			return false
		}
	}
	for _, s := range subjects {
		h.listening[s] = l
	}
	return true
}

func (h *hub) unclaim(subjects []string, l *Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range subjects {
		if h.listening[s] == l {
			delete(h.listening, s)
		}
	}
}

func (l *Listener) unsubscribe() {
	for _, s := range l.subs {
		s.Unsubscribe() //nolint:errcheck // closing anyway
	}
	l.subs = nil
}

// handshakePayload is the body of connect and accept: version, idle
// timeout in milliseconds, address.
func handshakePayload(kind byte, idle time.Duration, addr string) []byte {
	b := make([]byte, headerLen+5, headerLen+5+len(addr))
	putHeader(b, kind, 0)
	b[headerLen] = version
	binary.BigEndian.PutUint32(b[headerLen+1:], uint32(min(idle.Milliseconds(), 1<<32-1)))
	return append(b, addr...)
}

// handle serves connects and probes (in the subscription's goroutine).
func (l *Listener) handle(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	nc := l.hub.nc
	kind, _, rest, err := parseHeader(m.Data)
	if err != nil {
		return
	}
	switch kind {
	case kindProbe:
		nc.Publish(m.Reply, handshakePayload(kindAccept, l.cfg.IdleTimeout, l.addr.String())) //nolint:errcheck // best effort answer on a NATS connection; a lost one shows as a timeout at the asker
		return
	case kindConnect:
	default:
		return
	}
	if len(rest) < 5 || rest[0] != version {
		nc.Publish(m.Reply, control(kindRefuse, 0, "unsupported protocol version")) //nolint:errcheck // best effort answer on a NATS connection; a lost one shows as a timeout at the asker
		return
	}
	remote := string(rest[5:])
	if remote == "" {
		remote = "0.0.0.0:0"
	}
	idle := minIdle(l.cfg.IdleTimeout, time.Duration(binary.BigEndian.Uint32(rest[1:]))*time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		nc.Publish(m.Reply, control(kindRefuse, 0, "listener closed")) //nolint:errcheck // best effort answer on a NATS connection; a lost one shows as a timeout at the asker
		return
	}
	c := newConn(l.hub, l.addr.String(), remote, l.maxFrame, idle, l.log)
	c.peer = m.Reply
	if !l.hub.register(c) {
		nc.Publish(m.Reply, control(kindRefuse, 0, "listener closing")) //nolint:errcheck // best effort answer on a NATS connection; a lost one shows as a timeout at the asker
		return
	}
	if err := nc.PublishRequest(m.Reply, c.subject, handshakePayload(kindAccept, l.cfg.IdleTimeout, l.addr.String())); err != nil {
		c.Close()
		return
	}
	c.startKeepAlive()
	select {
	case l.pending <- c:
	default:
		l.log.Warn("connection refused: accept backlog full", "remote", remote, "backlog", backlog)
		c.fail(errors.New("natstransport: accept backlog full"), "accept backlog full")
		c.Close()
	}
}

// Accept returns the next connection, or fails once the listener is
// closed or ctx ends.
func (l *Listener) Accept(ctx context.Context) (transport.Conn, error) {
	select {
	case <-l.done:
		return nil, l.closedErr()
	default:
	}
	select {
	case c := <-l.pending:
		return c, nil
	case <-l.done:
		return nil, l.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *Listener) closedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %w", l.err, transport.ErrClosed)
	}
	return transport.ErrClosed
}

// Addr is the listen address, with the port picked for port 0.
func (l *Listener) Addr() string { return l.addr.String() }

// Subjects are the NATS subjects the listener subscribes to.
func (l *Listener) Subjects() []string { return append([]string(nil), l.subjects...) }

// Close unsubscribes and refuses connections not yet accepted.
// Connections already accepted stay open.
func (l *Listener) Close() error {
	l.shut(nil)
	return nil
}

func (l *Listener) fail(err error) { l.shut(err) }

func (l *Listener) shut(err error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed, l.err = true, err
		l.mu.Unlock()
		l.unsubscribe()
		l.hub.unclaim(l.subjects, l)
		close(l.done)
		for {
			select {
			case c := <-l.pending:
				c.Close()
				continue
			default:
			}
			break
		}
		l.hub.release()
	})
}

// DialNATS connects to the listener of addr ("host:port" or a name).
func (p *Provider) DialNATS(ctx context.Context, addr string, cfg *Config, deps transport.Deps) (*Conn, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	a, err := parseAddress(addr)
	if err != nil {
		return nil, err
	}
	a = a.dialAddress()
	log := loggerOf(deps)
	h, err := p.pool.acquire(cfg, log)
	if err != nil {
		return nil, err
	}
	defer h.release() // the connection holds its own reference
	if !h.nc.IsConnected() {
		return nil, fmt.Errorf("natstransport: dial %s: %w (reconnecting to %s)", addr, ErrConnLost, cfg.URL)
	}
	subj := a.subject(cfg.SubjectPrefix)
	c := newConn(h, h.localAddr(p.seq.Add(1)), a.String(), maxOr(deps.MaxFrameSize), cfg.IdleTimeout, log)
	c.handshake = make(chan struct{})
	if !h.register(c) {
		return nil, fmt.Errorf("natstransport: dial %s: %w", addr, errNATSClosed)
	}
	if err := h.nc.PublishRequest(subj, c.subject, handshakePayload(kindConnect, cfg.IdleTimeout, c.local)); err != nil {
		c.Close()
		return nil, fmt.Errorf("natstransport: dial %s: %w", addr, err)
	}
	t := time.NewTimer(cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case <-c.handshake:
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("natstransport: dial %s: %w", addr, ctx.Err())
	case <-t.C:
		c.Close()
		return nil, fmt.Errorf("natstransport: dial %s: no answer on %s within %v (connect_timeout)", addr, subj, cfg.ConnectTimeout)
	}
	c.mu.Lock()
	err = c.dialErr
	if err == nil && c.end != nil {
		err = c.end
	}
	c.mu.Unlock()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("natstransport: dial %s: %w", addr, err)
	}
	c.startKeepAlive()
	return c, nil
}
