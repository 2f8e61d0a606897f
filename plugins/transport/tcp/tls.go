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
// self-signed certificate when none is configured.
func serverTLS(c *TLSConfig, addr string, log *slog.Logger) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if c.CertFile != "" {
		cert, err = tlsconf.LoadKeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
	} else {
		host, _, _ := net.SplitHostPort(addr)
		cert, err = tlsconf.SelfSigned(host)
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		if log != nil {
			log.Warn("TLS without transport.tcp.tls.cert_file: serving a generated self-signed certificate",
				"addr", addr, "sha256", tlsconf.Fingerprint(cert.Certificate[0]), "not_after", cert.Leaf.NotAfter.Format(time.RFC3339))
		}
	}
	auth, err := tlsconf.ClientAuth(c.ClientAuth)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: auth, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		if tc.ClientCAs, err = tlsconf.CertPool(c.ClientCAFile); err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
	}
	return tc, nil
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
