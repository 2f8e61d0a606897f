package tcp

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// serverTLS builds the listener's TLS configuration, generating a
// self-signed certificate when none is configured. The certificate and
// client CA files are read again when they change (tlsconf.Reloader).
func serverTLS(c *TLSConfig, addr string, log *slog.Logger) (*tls.Config, error) {
	auth, err := tlsconf.ClientAuth(c.ClientAuth)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	base := &tls.Config{ClientAuth: auth, MinVersion: tls.VersionTLS12}
	if c.CertFile == "" {
		host, _, _ := net.SplitHostPort(addr)
		cert, err := tlsconf.SelfSigned(host)
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		if log != nil {
			log.Warn("TLS without transport.tcp.tls.cert_file: serving a generated self-signed certificate",
				"addr", addr, "sha256", tlsconf.Fingerprint(cert.Certificate[0]), "not_after", cert.Leaf.NotAfter.Format(time.RFC3339))
		}
		base.Certificates = []tls.Certificate{cert}
	}
	r, err := tlsconf.NewReloader(c.CertFile, c.KeyFile, c.ClientCAFile, log)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	return r.Server(base), nil
}

// clientTLS builds a dialer's TLS configuration for addr.
func clientTLS(c *TLSConfig, addr string) (*tls.Config, error) {
	host, _, _ := net.SplitHostPort(addr)
	tc := &tls.Config{ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	var err error
	if c.CAFile != "" {
		if tc.RootCAs, err = tlsconf.CertPool(c.CAFile); err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
	}
	if c.ClientCertFile != "" {
		cert, err := tlsconf.LoadKeyPair(c.ClientCertFile, c.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
