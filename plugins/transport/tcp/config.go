package tcp

import (
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// Config is the transport.tcp section.
type Config struct {
	// IdleTimeout closes a connection that received nothing for this long
	// (RocketMQ closes idle channels after 120 s), or up to an eighth
	// longer: the deadline is renewed once per eighth, not per frame.
	// 0 disables it.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// ReadTimeout bounds how long one frame may take to arrive once its
	// first bytes have (slow senders are dropped). 0 disables it.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// DialTimeout bounds connection set-up.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// WriteTimeout bounds one frame write (or up to an eighth more, as
	// IdleTimeout); a peer that stops reading is dropped instead of
	// blocking its writers forever.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// ReadBuffer and WriteBuffer size the per-connection buffers.
	ReadBuffer  int `koanf:"read_buffer"`
	WriteBuffer int `koanf:"write_buffer"`
	// NoDelay sets TCP_NODELAY.
	NoDelay bool `koanf:"no_delay"`
	// TLS encrypts every TCP connection of the process, listening and
	// dialling (the official client's WithTls option speaks it).
	TLS TLSConfig `koanf:"tls"`
}

// TLSConfig is the transport.tcp.tls section.
type TLSConfig struct {
	// Enabled turns TLS on for listeners and dialers.
	Enabled bool `koanf:"enabled"`
	// CertFile and KeyFile are the server certificate (PEM). When both are
	// empty a self-signed certificate is generated and its fingerprint
	// logged.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ClientAuth is none, request (verify a client certificate if one is
	// presented) or require; ClientCAFile holds the CAs client certificates
	// must chain to.
	ClientAuth   string `koanf:"client_auth"`
	ClientCAFile string `koanf:"client_ca_file"`
	// CAFile is what dialers trust (default: the system roots);
	// InsecureSkipVerify trusts any server (development only).
	CAFile             string `koanf:"ca_file"`
	InsecureSkipVerify bool   `koanf:"insecure_skip_verify"`
	// ServerName overrides the name dialers verify.
	ServerName string `koanf:"server_name"`
	// ClientCertFile and ClientKeyFile are presented when dialling a server
	// that asks for a client certificate.
	ClientCertFile string `koanf:"client_cert_file"`
	ClientKeyFile  string `koanf:"client_key_file"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{IdleTimeout: 120 * time.Second, ReadTimeout: 30 * time.Second, DialTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second,
		ReadBuffer: 64 << 10, WriteBuffer: 64 << 10, NoDelay: true}
}

// Validate checks the values.
func (c *Config) Validate() error {
	if c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.DialTimeout < 0 || c.WriteTimeout < 0 {
		return fmt.Errorf("timeouts must not be negative")
	}
	if c.ReadBuffer < 512 || c.WriteBuffer < 512 {
		return fmt.Errorf("read_buffer and write_buffer must be at least 512 bytes")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("tls.cert_file and tls.key_file go together")
	}
	if (c.TLS.ClientCertFile == "") != (c.TLS.ClientKeyFile == "") {
		return fmt.Errorf("tls.client_cert_file and tls.client_key_file go together")
	}
	if _, err := tlsconf.ClientAuth(c.TLS.ClientAuth); err != nil {
		return fmt.Errorf("tls.client_auth: %w", err)
	}
	if c.TLS.ClientAuth == "require" && c.TLS.ClientCAFile == "" {
		return fmt.Errorf("tls.client_auth=require needs tls.client_ca_file")
	}
	return nil
}
