package grpc

import (
	"fmt"
	"net"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// DevListen is grpc.listen's default.
const DevListen = "127.0.0.1:8081"

// Config is the grpc section: the RocketMQ 5 gRPC endpoint.
type Config struct {
	// Enabled serves the endpoint. Off by default for `mq broker`; `mq dev`
	// serves it unless grpc.enabled is set to false.
	Enabled bool `koanf:"enabled"`
	// Listen is the host:port of the endpoint; 5.x clients use it as their
	// access point and QueryRoute answers it as the broker's endpoint.
	Listen string `koanf:"listen"`
	// Advertise is the host:port answered in routes when it differs from
	// Listen (a wildcard listen, NAT); empty: Listen, with a wildcard host
	// replaced by the broker's own address.
	Advertise string `koanf:"advertise"`
	// TLS encrypts the endpoint (the official clients dial with TLS unless
	// told otherwise).
	TLS TLSConfig `koanf:"tls"`
	// MaxClockSkew bounds how far the x-mq-date-time a 5.x client signed
	// may be from this server's clock when an auth plugin is enabled
	// (RocketMQ does not bound it: a captured signature stays good). 0
	// turns the bound off. Default 15m.
	MaxClockSkew time.Duration `koanf:"max_clock_skew"`

	// MaxConcurrentStreams bounds the calls (HTTP/2 streams) served at
	// once on one connection; a client opens more only when one ends.
	// Default 1024, as remoting.max_in_flight.
	MaxConcurrentStreams int `koanf:"max_concurrent_streams"`
	// MaxConnections and MaxConnectionsPerIP bound the open connections
	// in all and per remote IP; more are closed at once. 0 means no
	// bound. Defaults 10000 and 1000, as remoting's.
	MaxConnections      int `koanf:"max_connections"`
	MaxConnectionsPerIP int `koanf:"max_connections_per_ip"`
	// IdleTimeout closes a connection that has had no call open for this
	// long (a GOAWAY first). Default 120s, as transport.tcp.idle_timeout.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxSendBytes bounds the message bodies of one SendMessage, inflated;
	// a larger request is refused whole. Its message count is bounded by
	// broker.MaxBatchMessages, as a SEND_BATCH_MESSAGE. Default 16MiB, as
	// remoting.max_frame_size.
	MaxSendBytes config.ByteSize `koanf:"max_send_bytes"`
	// ReceiveBuffer bounds the message bytes received for ReceiveMessage
	// calls and not yet written to their clients, in all;
	// ReceiveStreamBuffer bounds them per call (at least one message is
	// always taken). What does not fit is left to come back after its
	// invisible time, as any message a consumer did not ack. Defaults
	// 16MiB and 4MiB (storage.max_message_size's default): bytes are held
	// only until written to a client, so readers that keep up need little,
	// and consumers that stop reading pin at most 16MiB (issue 37).
	ReceiveBuffer       config.ByteSize `koanf:"receive_buffer"`
	ReceiveStreamBuffer config.ByteSize `koanf:"receive_stream_buffer"`
	// MaxReceiveWaits bounds the ReceiveMessage calls waiting for
	// messages at once (each holds a goroutine and its stream, about
	// 20KiB); beyond it a receive that finds nothing answers
	// TOO_MANY_REQUESTS at once, as RocketMQ's POLLING_FULL. Default
	// 10000 (about 200 MiB when all wait; RocketMQ's broker holds up to
	// 100,000): a low bound turns a crowd of long polls into a storm of
	// refused ones retried every 20 ms, which cost the other clients more
	// than the waits did (docs/lab/BENCHMARKS.md, issue 37).
	MaxReceiveWaits int `koanf:"max_receive_waits"`
	// MaxSettingsSize bounds one Telemetry settings command; a larger one
	// ends the stream. Default 256KiB.
	MaxSettingsSize config.ByteSize `koanf:"max_settings_size"`
	// Lite bounds lite topics (lite_config.go).
	Lite LiteConfig `koanf:"lite"`
}

// TLSConfig is the grpc.tls section.
type TLSConfig struct {
	// Enabled turns TLS on.
	Enabled bool `koanf:"enabled"`
	// CertFile and KeyFile are the server certificate (PEM). When both are
	// empty a self-signed certificate is generated and its fingerprint
	// logged.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// NewConfig returns the defaults: off, DevListen, no TLS, a 15m clock
// skew, and the limits documented on Config.
func NewConfig() *Config {
	return &Config{
		Listen: DevListen, MaxClockSkew: DefaultMaxClockSkew,
		MaxConcurrentStreams: 1024, MaxConnections: 10000, MaxConnectionsPerIP: 1000,
		IdleTimeout: 120 * time.Second, MaxSendBytes: 16 << 20,
		ReceiveBuffer: 16 << 20, ReceiveStreamBuffer: 4 << 20, MaxReceiveWaits: 10000, MaxSettingsSize: 256 << 10,
		Lite: defaultLiteConfig(),
	}
}

// DefaultMaxClockSkew is grpc.max_clock_skew's default.
const DefaultMaxClockSkew = 15 * time.Minute

// Validate checks the addresses and the TLS files.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: grpc.listen: %w", err)
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("config: grpc.advertise: %w", err)
		}
	}
	if c.MaxClockSkew < 0 {
		return fmt.Errorf("config: grpc.max_clock_skew: %v is negative (0 turns the bound off)", c.MaxClockSkew)
	}
	if c.MaxConcurrentStreams < 1 {
		return fmt.Errorf("config: grpc.max_concurrent_streams: %d must be positive", c.MaxConcurrentStreams)
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0 {
		return fmt.Errorf("config: grpc.max_connections and grpc.max_connections_per_ip must not be negative (0: no bound)")
	}
	if c.MaxReceiveWaits < 1 {
		return fmt.Errorf("config: grpc.max_receive_waits: %d must be positive", c.MaxReceiveWaits)
	}
	if c.IdleTimeout <= 0 {
		return fmt.Errorf("config: grpc.idle_timeout: %v must be positive", c.IdleTimeout)
	}
	for _, b := range []struct {
		key string
		v   config.ByteSize
	}{{"max_send_bytes", c.MaxSendBytes}, {"receive_buffer", c.ReceiveBuffer}, {"receive_stream_buffer", c.ReceiveStreamBuffer}, {"max_settings_size", c.MaxSettingsSize}} {
		if b.v < 1 {
			return fmt.Errorf("config: grpc.%s: %d must be positive", b.key, b.v)
		}
	}
	if err := c.Lite.validate(); err != nil {
		return err
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("config: grpc.tls.cert_file and grpc.tls.key_file go together")
	}
	return nil
}

// NewConfigFrom decodes the grpc section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("grpc", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}
