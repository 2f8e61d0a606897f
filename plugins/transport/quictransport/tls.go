package quictransport

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// ALPN is the application protocol both ends negotiate.
const ALPN = "quiver-remoting"

// serverTLS builds the listener's TLS configuration: the configured
// certificate, or a generated self-signed one when none is configured.
// host is the listen host, added to the generated certificate's names.
// The certificate and client CA files are read again when they change
// (tlsconf.Reloader).
func serverTLS(cfg *Config, host string, log *slog.Logger) (*tls.Config, error) {
	base := &tls.Config{NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	var err error
	if base.ClientAuth, err = tlsconf.ClientAuth(cfg.ClientAuth); err != nil {
		return nil, fmt.Errorf("quictransport: %w", err)
	}
	if cfg.CertFile == "" && cfg.KeyFile == "" {
		cert, err := tlsconf.SelfSigned(host)
		if err != nil {
			return nil, fmt.Errorf("quictransport: %w", err)
		}
		leaf := cert.Leaf
		log.Warn("no cert_file/key_file configured: serving QUIC with a generated self-signed certificate; clients need insecure_skip_verify or ca_file",
			"sha256", tlsconf.Fingerprint(leaf.Raw), "dns", leaf.DNSNames, "ips", leaf.IPAddresses, "not_after", leaf.NotAfter.Format(time.RFC3339))
		base.Certificates = []tls.Certificate{cert}
	}
	r, err := tlsconf.NewReloader(cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, log)
	if err != nil {
		return nil, fmt.Errorf("quictransport: %w", err)
	}
	return r.Server(base), nil
}

// clientTLS builds a dialler's TLS configuration for a server at host.
func clientTLS(cfg *Config, host string) (*tls.Config, error) {
	tc := &tls.Config{
		NextProtos: []string{ALPN},
		MinVersion: tls.VersionTLS13,
		ServerName: cfg.ServerName,
		// TLS session tickets: a reconnect resumes the session (no
		// certificate chain to send and verify), and with zero_rtt its
		// first requests go out in the first flight.
		ClientSessionCache: scopedCache(cfg),
	}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	var err error
	switch {
	case cfg.CAFile != "":
		if tc.RootCAs, err = tlsconf.CertPool(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("quictransport: ca_file: %w", err)
		}
	case cfg.InsecureSkipVerify:
		tc.InsecureSkipVerify = true
	}
	if cfg.ClientCertFile != "" {
		cert, err := tlsconf.LoadKeyPair(cfg.ClientCertFile, cfg.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("quictransport: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// scopedCache is cfg's session cache with its keys scoped to the client
// identity and trust settings: a resumed session keeps the identity it was
// made with, so a dialler whose client certificate (or trust) differs must
// not resume another's session. Nil when cfg has no cache.
func scopedCache(cfg *Config) tls.ClientSessionCache {
	if cfg.sessions == nil {
		return nil
	}
	return scoped{c: cfg.sessions, scope: fmt.Sprintf("%q|%q|%q|%t|", cfg.ClientCertFile, cfg.ClientKeyFile, cfg.CAFile, cfg.InsecureSkipVerify)}
}

type scoped struct {
	c     tls.ClientSessionCache
	scope string
}

func (s scoped) Get(key string) (*tls.ClientSessionState, bool) { return s.c.Get(s.scope + key) }
func (s scoped) Put(key string, cs *tls.ClientSessionState)     { s.c.Put(s.scope+key, cs) }
