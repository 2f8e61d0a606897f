package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// peerTLS is the raft port's mutual TLS (namesrv.controller.tls): the
// server side asks every connection for a certificate the cluster's CA
// signed, the client side checks the peer's certificate against the CA
// and the address dialled, and presents its own. The files are read
// again when they change (tlsconf.Reloader). Both are nil when TLS is
// off.
type peerTLS struct {
	srv    *tls.Config
	reload *tlsconf.Reloader
}

// newPeerTLS reads cfg.TLS's files.
func newPeerTLS(cfg *Config, log *slog.Logger) (peerTLS, error) {
	if !cfg.TLS.Enabled {
		return peerTLS{}, nil
	}
	r, err := tlsconf.NewReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.CAFile, log)
	if err != nil {
		return peerTLS{}, fmt.Errorf("controller: tls: %w", err)
	}
	return peerTLS{
		srv:    r.Server(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}),
		reload: r,
	}, nil
}

// server wraps an accepted connection; its handshake runs on the first
// read (sniff's, under its deadline).
func (p peerTLS) server(conn net.Conn) net.Conn {
	if p.srv == nil {
		return conn
	}
	return tls.Server(conn, p.srv)
}

// client wraps a dialled connection to address and completes the
// handshake within timeout; on failure it closes conn.
func (p peerTLS) client(conn net.Conn, address string, timeout time.Duration) (net.Conn, error) {
	if p.reload == nil {
		return conn, nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := p.reload.Client(&tls.Config{MinVersion: tls.VersionTLS13, ServerName: host})
	tc := tls.Client(conn, c)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("controller: tls handshake with %s: %w", address, err)
	}
	return tc, nil
}
