// Package transports builds the dialer most applications pass to
// client.WithDialer: a transport.Set with TCP and QUIC, chosen by the
// address scheme ("tcp://", "quic://", plain "host:port" = TCP).
//
// It is the only part of the client library that links transport plugins.
package transports

import (
	"context"
	"log/slog"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// Option configures the set.
type Option func(*options)

type options struct {
	tcp      *tcp.Config
	quic     *quictransport.Config
	nats     *natstransport.Config
	maxFrame int
	log      *slog.Logger
}

// WithTCP sets the TCP transport's configuration (default tcp.NewConfig()).
func WithTCP(cfg *tcp.Config) Option { return func(o *options) { o.tcp = cfg } }

// WithQUIC sets the QUIC transport's configuration, including its TLS
// trust: CAFile, ServerName or InsecureSkipVerify (default
// quictransport.NewConfig(), which trusts the system roots).
func WithQUIC(cfg *quictransport.Config) Option { return func(o *options) { o.quic = cfg } }

// WithInsecureQUIC accepts any QUIC server certificate, e.g. the
// self-signed one of `mq dev`. Never in production.
func WithInsecureQUIC() Option {
	return func(o *options) {
		if o.quic == nil {
			o.quic = quictransport.NewConfig()
		}
		o.quic.InsecureSkipVerify = true
	}
}

// WithMaxFrameSize bounds frames (default 16 MiB).
func WithMaxFrameSize(n int) Option { return func(o *options) { o.maxFrame = n } }

// WithNATS enables the NATS transport (nats:// addresses) with cfg.
func WithNATS(cfg *natstransport.Config) Option { return func(o *options) { o.nats = cfg } }

// WithLogger sets the transports' logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// NewSet returns a transport.Set with TCP and QUIC enabled, and NATS with
// WithNATS.
func NewSet(opts ...Option) *transport.Set {
	o := options{tcp: tcp.NewConfig(), quic: quictransport.NewConfig(), maxFrame: transport.DefaultMaxFrameSize}
	for _, f := range opts {
		f(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	providers := []transport.Provider{tcp.NewProvider(), quictransport.NewProvider()}
	cfgs := map[string]any{"tcp": o.tcp, "quic": o.quic}
	if o.nats != nil {
		providers = append(providers, natstransport.NewProvider())
		cfgs["nats"] = o.nats
	}
	return transport.NewSet(providers, cfgs, transport.Deps{Logger: o.log, MaxFrameSize: o.maxFrame})
}

// Dialer returns a client.DialFunc over NewSet(opts...).
func Dialer(opts ...Option) client.DialFunc {
	s := NewSet(opts...)
	return func(ctx context.Context, addr string) (transport.Conn, error) { return s.Dial(ctx, addr) }
}

// WithDialer is client.WithDialer(Dialer(opts...)).
func WithDialer(opts ...Option) client.Option { return client.WithDialer(Dialer(opts...)) }
