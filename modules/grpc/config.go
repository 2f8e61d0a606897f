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

// NewConfig returns the defaults: off, DevListen, no TLS, a 15m clock skew.
func NewConfig() *Config { return &Config{Listen: DevListen, MaxClockSkew: DefaultMaxClockSkew} }

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
