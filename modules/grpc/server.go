// Package grpc serves the RocketMQ 5 gRPC messaging API
// (apache.rocketmq.v2.MessagingService) in front of this process's broker,
// so the official 5.x clients work without a proxy process: routes,
// heartbeats, the Telemetry settings stream and sends go to the same
// broker services the remoting handlers use.
package grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/internal/netlimit"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/modules/transaction"
)

// Deps are the services the endpoint fronts.
type Deps struct {
	Broker *broker.Broker
	// Pop serves ReceiveMessage, AckMessage, ChangeInvisibleDuration and
	// ForwardMessageToDeadLetterQueue; nil answers them NOT_IMPLEMENTED.
	Pop    *pop.Service
	Logger *slog.Logger
	// Auth are the enabled auth plugins (kernel.Guard): every call is
	// authenticated and authorized by each (auth.go). Empty: no checks.
	Auth []AuthPlugin
	// Transaction serves transactional sends, EndTransaction and
	// check-backs over Telemetry (transaction.go); nil refuses them.
	Transaction *transaction.Service
	// Schedule serves RecallMessage and the recall handles of delayed
	// sends (recall.go); nil answers RecallMessage NOT_IMPLEMENTED.
	Schedule *schedule.Service
}

// Server is the gRPC endpoint.
type Server struct {
	grpcapi.UnimplementedMessagingServiceServer

	cfg  *Config
	b    *broker.Broker
	pop  *pop.Service
	log  *slog.Logger
	srv  *grpclib.Server
	ln   net.Listener
	lim  *netlimit.Listener // ln, counting connections per IP
	auth *guard             // nil: no auth plugin
	// waiters are the long-polling pulls (pull.go), woken by the
	// broker's stored listener that Start registers once.
	waiters  pullWaiters
	listened sync.Once
	wg       sync.WaitGroup
	done     chan struct{} // closed by Stop: Telemetry streams return
	once     sync.Once

	rr      atomic.Uint64 // round robin over write queues
	mu      sync.Mutex
	clients map[string]*client            // by x-mq-client-id
	swept   time.Time                     // last expiry sweep of clients
	claims  atomic.Pointer[claimIndex]    // groups.go
	streams map[*telemetryStream]struct{} // open Telemetry streams (transaction_check.go)

	recvHeld  recvBudget // message bytes held by ReceiveMessage calls (held.go)
	recvWaits waitSlots  // ReceiveMessage calls waiting for messages (held.go)

	sched *schedule.Service // recall.go
	tx    *transaction.Service
	txKey []byte // transaction ids' HMAC key (transaction.go)
	untx  func() // removes the check transport

	lite *liteIndex // lite topics (lite.go), made by Start
}

var _ grpcapi.MessagingServiceServer = (*Server)(nil)

// New builds an endpoint; Start binds it.
func New(cfg *Config, deps Deps) (*Server, error) {
	if deps.Broker == nil {
		return nil, fmt.Errorf("grpc: no broker to front")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	g, err := newGuard(deps.Auth, cfg.MaxClockSkew)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, b: deps.Broker, pop: deps.Pop, log: log.With("component", "grpc"), auth: g,
		done: make(chan struct{}), clients: map[string]*client{}, tx: deps.Transaction,
		sched: deps.Schedule,
	}
	s.recvHeld.limit = int64(cfg.ReceiveBuffer)
	s.recvWaits.limit = int64(cfg.MaxReceiveWaits)
	if s.tx != nil {
		if s.txKey, err = loadTxKey(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// The transport buffers of one connection: grpc-go's defaults are 32KiB
// each, held for the connection's life.
const (
	connReadBuffer  = 8 << 10
	connWriteBuffer = 32 << 10 // pooled: held only while writing
)

// minPingInterval is the shortest interval between a client's keepalive
// pings the endpoint accepts; a client pinging faster is sent a GOAWAY.
const minPingInterval = 10 * time.Second

// Start binds cfg.Listen and serves in a goroutine.
func (s *Server) Start(ctx context.Context) error {
	opts, err := s.transportOptions()
	if err != nil {
		return err
	}
	// Namespaces are put into names before anything reads them, the
	// auth check included (namespace.go).
	opts = append(opts, grpclib.ChainUnaryInterceptor(namespaceUnary), grpclib.ChainStreamInterceptor(namespaceStream))
	if s.auth != nil {
		refused := func(method string, r *refusal) {
			s.log.Debug("grpc: refused", "method", method, "code", r.code, "reason", r.msg)
		}
		opts = append(opts, grpclib.ChainUnaryInterceptor(s.auth.unaryInterceptor(refused)),
			grpclib.ChainStreamInterceptor(s.auth.streamInterceptor(refused)))
	}
	if err := s.startLite(ctx); err != nil { // lite.go: before serving
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.lim = netlimit.NewListener(ln, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerIP, "grpc", s.log)
	s.ln = s.lim
	s.listened.Do(func() { s.b.AddStoredListener(s.waiters.stored) })
	s.srv = grpclib.NewServer(opts...)
	grpcapi.RegisterMessagingServiceServer(s.srv, s)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(s.ln); err != nil {
			s.log.Error("grpc: serve", "err", err)
		}
	}()
	s.b.SetGroupClaim(s.claim) // groups.go: 4.x consumers keep out of 5.x groups
	if s.tx != nil && s.untx == nil {
		s.untx = s.tx.AddCheckTransport("grpc", txChecker{s})
	}
	s.log.Info("grpc: serving RocketMQ 5 clients", "addr", ln.Addr().String(), "tls", s.cfg.TLS.Enabled)
	return nil
}

// transportOptions are the endpoint's grpc-go options below its
// interceptors and handlers: TLS, codec, buffers and the per-connection
// bounds.
func (s *Server) transportOptions() ([]grpclib.ServerOption, error) {
	var opts []grpclib.ServerOption
	if s.cfg.TLS.Enabled {
		tc, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpclib.Creds(credentials.NewTLS(tc)))
	}
	opts = append(opts, grpclib.ForceServerCodecV2(newSendCodec()), // codec.go
		// Per-connection buffers (docs/SECURITY.md): grpc-go keeps a 32KiB
		// read and a 32KiB write buffer on every connection, idle or not;
		// the write buffer is pooled between writes and the read buffer
		// smaller (frames larger than it are read past it).
		grpclib.ReadBufferSize(connReadBuffer), grpclib.WriteBufferSize(connWriteBuffer),
		grpclib.SharedWriteBuffer(true),
		// Frames and messages read and written in the endpoint's
		// finer-tiered buffers (bufpool.go).
		experimental.BufferPool(endpointBuffers))
	opts = append(opts, grpclib.MaxRecvMsgSize(int(s.b.Config().MaxMessageSize)+1<<20),
		// Bounded like a remoting connection (docs/SECURITY.md): calls at
		// once per connection, idle connections closed. Clients may ping
		// as often as every 10s, with or without a call open.
		grpclib.MaxConcurrentStreams(uint32(s.cfg.MaxConcurrentStreams)),
		grpclib.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.IdleTimeout}),
		grpclib.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true}))
	return opts, nil
}

// tlsConfig is the endpoint's TLS: the configured certificate, read
// again when its files change (tlsconf.Reloader), or a generated
// self-signed one.
func (s *Server) tlsConfig() (*tls.Config, error) {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if s.cfg.TLS.CertFile == "" {
		host, _, _ := net.SplitHostPort(s.cfg.Listen)
		cert, err := tlsconf.SelfSigned(host)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		s.log.Warn("grpc: TLS with a generated self-signed certificate", "sha256", tlsconf.Fingerprint(cert.Certificate[0]))
		base.Certificates = []tls.Certificate{cert}
		return base, nil
	}
	r, err := tlsconf.NewReloader(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile, "", s.log)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return r.Server(base), nil
}

// Addr is the bound address (nil before Start).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop ends the Telemetry streams, lets unary calls finish until ctx ends
// and then closes every connection.
func (s *Server) Stop(ctx context.Context) error {
	s.once.Do(func() { close(s.done) })
	if s.srv == nil {
		return nil
	}
	s.b.SetGroupClaim(nil)
	if s.untx != nil {
		s.untx()
		s.untx = nil
	}
	stopped := make(chan struct{})
	go func() { s.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.srv.Stop()
		<-stopped
	}
	s.wg.Wait()
	return s.stopLite(ctx)
}

// endpoints is what routes answer as this broker's address.
func (s *Server) endpoints() *grpcapi.Endpoints {
	addr := s.cfg.Advertise
	if addr == "" {
		addr = s.cfg.Listen
		if s.ln != nil {
			addr = s.ln.Addr().String()
		}
	}
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		if sh := s.b.StoreHost(); sh.IsValid() {
			host = sh.Addr().String()
		}
	}
	scheme := grpcapi.AddressScheme_DOMAIN_NAME
	if ip, err := netip.ParseAddr(host); err == nil {
		scheme = grpcapi.AddressScheme_IPv4
		if ip.Is6() && !ip.Is4In6() {
			scheme = grpcapi.AddressScheme_IPv6
		}
	}
	return &grpcapi.Endpoints{Scheme: scheme, Addresses: []*grpcapi.Address{{Host: host, Port: int32(port)}}}
}
