package natstransport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrConnLost fails every operation of a connection whose NATS connection
// dropped: reads after the frames already received, writes at once. The
// remoting layer then fails the calls waiting on it; the caller's next
// request dials again, which works once nats.go has reconnected.
var ErrConnLost = errors.New("natstransport: NATS connection lost")

// errNATSClosed ends listeners and connections whose NATS connection closed
// for good (reconnect attempts exhausted).
var errNATSClosed = errors.New("natstransport: NATS connection closed")

// pool holds the NATS connections of one Provider, one per connection key,
// each shared by every listener and connection that asks for it and closed
// when the last of them is.
type pool struct {
	mu   sync.Mutex
	hubs map[string]*hub
}

func newPool() *pool { return &pool{hubs: map[string]*hub{}} }

// acquire returns the hub for cfg with a reference taken, connecting to
// NATS when there is none.
func (p *pool) acquire(cfg *Config, log *slog.Logger) (*hub, error) {
	key := cfg.connKey()
	p.mu.Lock()
	if h := p.hubs[key]; h != nil && h.acquire() {
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	// Connect without the lock: a slow NATS server must not hold up
	// Close calls releasing other hubs.
	h, err := connectHub(p, key, cfg, log)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if other := p.hubs[key]; other != nil && other.acquire() {
		p.mu.Unlock()
		h.release() // another caller connected meanwhile: share theirs
		return other, nil
	}
	p.hubs[key] = h
	p.mu.Unlock()
	return h, nil
}

// forget drops h from the pool if it is still there.
func (p *pool) forget(h *hub) {
	p.mu.Lock()
	if p.hubs[h.key] == h {
		delete(p.hubs, h.key)
	}
	p.mu.Unlock()
}

// hub is one shared NATS connection. All connections on it receive through
// a single wildcard subscription on <inbox>.*, each connection being one
// token under it, so a process holds one subscription (and one nats.go
// delivery goroutine) however many connections it has.
type hub struct {
	pool  *pool
	key   string
	nc    *nats.Conn
	inbox string
	sub   *nats.Subscription
	log   *slog.Logger

	mu        sync.Mutex
	refs      int
	conns     map[string]*Conn
	listening map[string]*Listener // subject → in-process listener
	nextID    uint64
}

func natsOptions(cfg *Config, h *hub) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("quiver"),
		nats.Timeout(cfg.ConnectTimeout),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.MaxReconnects(cfg.MaxReconnects),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { h.disconnected(err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { h.log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted()) }),
		nats.ClosedHandler(func(*nats.Conn) { h.closedForGood() }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			h.log.Warn("NATS error", "subject", subj, "err", err)
		}),
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredentialsFile))
	}
	if cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("natstransport: nkey_seed_file: %w", err)
		}
		opts = append(opts, o)
	}
	if cfg.TLS.enabled() {
		opts = append(opts, nats.Secure(&tls.Config{InsecureSkipVerify: cfg.TLS.InsecureSkipVerify, MinVersion: tls.VersionTLS12}))
		if cfg.TLS.CAFile != "" {
			opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
		}
		if cfg.TLS.CertFile != "" {
			opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
		}
	}
	return opts, nil
}

func connectHub(p *pool, key string, cfg *Config, log *slog.Logger) (*hub, error) {
	h := &hub{pool: p, key: key, log: log, refs: 1, conns: map[string]*Conn{}, listening: map[string]*Listener{}}
	opts, err := natsOptions(cfg, h)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(splitURLs(cfg.URL), ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("natstransport: connect to %s: %w", cfg.URL, err)
	}
	h.nc = nc
	h.inbox = nc.NewInbox()
	h.sub, err = nc.Subscribe(h.inbox+".*", h.dispatch)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natstransport: subscribe %s.*: %w", h.inbox, err)
	}
	// The dispatcher only queues; the per-connection bound in Conn keeps
	// memory in check, so nats.go must never drop a message of ours as a
	// slow consumer (a dropped message would close the connection).
	h.sub.SetPendingLimits(-1, -1) //nolint:errcheck // only fails on a closed subscription, which the next receive reports
	log.Info("NATS connected", "server", nc.ConnectedUrlRedacted(), "max_payload", nc.MaxPayload())
	return h, nil
}

// acquire takes a reference unless the hub is already being closed.
func (h *hub) acquire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs == 0 {
		return false
	}
	h.refs++
	return true
}

// release drops a reference; the last one closes the NATS connection,
// after flushing what was published (goodbyes included).
func (h *hub) release() {
	h.pool.mu.Lock()
	h.mu.Lock()
	h.refs--
	last := h.refs == 0
	h.mu.Unlock()
	if last && h.pool.hubs[h.key] == h {
		delete(h.pool.hubs, h.key)
	}
	h.pool.mu.Unlock()
	if !last {
		return
	}
	if h.nc.IsConnected() {
		h.nc.FlushTimeout(time.Second) //nolint:errcheck // best effort flush on close
	}
	h.nc.Close()
}

// register adds a connection and names its subject.
func (h *hub) register(c *Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs == 0 {
		return false
	}
	h.nextID++
	c.id = strconv.FormatUint(h.nextID, 36)
	c.subject = h.inbox + "." + c.id
	h.conns[c.id] = c
	h.refs++
	return true
}

func (h *hub) unregister(c *Conn) {
	h.mu.Lock()
	_, ok := h.conns[c.id]
	delete(h.conns, c.id)
	h.mu.Unlock()
	if ok {
		h.release()
	}
}

// localAddr is the host:port a dialer reports as its address: the IP the
// NATS server sees for this process and a per-connection number as port
// (NATS has no ports; remoting, logs and born-host fields want one).
func (h *hub) localAddr(seq uint64) string {
	ip, err := h.nc.GetClientIP()
	if err != nil || ip == nil {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(1+seq%65535, 10))
}

// dispatch hands a message on <inbox>.<id> to connection id.
func (h *hub) dispatch(m *nats.Msg) {
	id := m.Subject[len(h.inbox)+1:]
	h.mu.Lock()
	c := h.conns[id]
	h.mu.Unlock()
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// Published with our reply subject to a subject nobody listens
		// on: the peer's subscription is gone.
		if c != nil {
			c.unreachable(m.Header.Get("Nats-Subject"))
		}
		return
	}
	kind, seq, rest, err := parseHeader(m.Data)
	if err != nil {
		h.log.Debug("dropping message", "subject", m.Subject, "err", err)
		return
	}
	if c == nil {
		// A message for a connection closed here: tell its sender, so it
		// does not wait for the idle timeout (never answer goodbyes).
		switch kind {
		case kindFrame, kindFirst, kindMore, kindPing, kindAccept:
			if m.Reply != "" {
				h.nc.Publish(m.Reply, control(kindClose, 0, "no such connection")) //nolint:errcheck // best effort answer on a NATS connection; a lost one shows as a timeout at the asker
			}
		}
		return
	}
	c.deliver(kind, seq, rest, m.Reply)
}

// disconnected runs when nats.go lost the server: every connection ends
// with ErrConnLost (its peer may be unreachable, and messages in flight
// may be lost). Their goodbyes are queued in nats.go's reconnect buffer,
// so peers that kept their own NATS connection learn of it once we are
// back. Listeners stay: nats.go re-subscribes them on reconnect.
func (h *hub) disconnected(err error) {
	if err == nil {
		err = errors.New("connection closed")
	}
	h.mu.Lock()
	refs := h.refs
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	if refs == 0 {
		return // our own Close
	}
	h.log.Warn("NATS connection lost; closing its connections", "err", err, "connections", len(conns))
	for _, c := range conns {
		c.lose(fmt.Errorf("%w: %v", ErrConnLost, err))
	}
}

// closedForGood runs when the NATS connection is closed: by us, or by
// nats.go after its reconnect attempts ran out. Then every listener and
// connection on it ends, and the pool forgets the hub so that the next
// Listen or Dial connects anew.
func (h *hub) closedForGood() {
	h.pool.forget(h)
	h.mu.Lock()
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	lns := make([]*Listener, 0, len(h.listening))
	for _, l := range h.listening {
		lns = append(lns, l)
	}
	refs := h.refs
	h.mu.Unlock()
	if refs > 0 {
		h.log.Error("NATS connection closed for good", "err", h.nc.LastError())
	}
	for _, c := range conns {
		c.lose(errNATSClosed)
	}
	for _, l := range lns {
		l.fail(errNATSClosed)
	}
}
