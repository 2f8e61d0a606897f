package quictransport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/core/transport/tlsconf/tlsconftest"
)

// logBuffer collects log output.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// roundTrip checks that a frame goes from client to server.
func roundTrip(t *testing.T, client, server transport.Conn) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, client.WriteFrame(ctx, []byte("hello")))
	f, err := server.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(f))
}

// dialAccept dials ln with cfg; on success it returns both ends.
func dialAccept(t *testing.T, ln *Listener, addr string, cfg *Config) (*Conn, transport.Conn, error) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	c, err := Dial(ctx, addr, cfg, deps(t, 0))
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return c, s, nil
}

func peerCert(c *Conn) *x509.Certificate {
	return c.qc.ConnectionState().TLS.PeerCertificates[0]
}

func TestSelfSignedCertificate(t *testing.T) {
	var logs logBuffer
	d := transport.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ln, err := Listen(context.Background(), "127.0.0.1:0", NewConfig(), d)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })

	// Insecure clients connect, over TLS 1.3 with our ALPN.
	cfg := NewConfig()
	cfg.InsecureSkipVerify = true
	c, s, err := dialAccept(t, ln, ln.Addr(), cfg)
	require.NoError(t, err)
	roundTrip(t, c, s)
	st := c.qc.ConnectionState().TLS
	assert.Equal(t, uint16(tls.VersionTLS13), st.Version)
	assert.Equal(t, ALPN, st.NegotiatedProtocol)

	// The certificate and its fingerprint were logged at Warn.
	cert := peerCert(c)
	out := logs.String()
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "self-signed")
	assert.Contains(t, out, "sha256="+tlsconf.Fingerprint(cert.Raw))
	assert.Contains(t, cert.DNSNames, "localhost")
	assert.Len(t, tlsconf.Fingerprint(cert.Raw), 32*3-1)
	for _, ip := range []string{"127.0.0.1", "::1"} {
		assert.NoError(t, cert.VerifyHostname(ip))
	}

	// A verifying client refuses it.
	_, _, err = dialAccept(t, ln, ln.Addr(), NewConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")

	// Exported and trusted through ca_file, it verifies, for localhost too.
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600))
	cfg = NewConfig()
	cfg.CAFile = caFile
	_, port, _ := net.SplitHostPort(ln.Addr())
	for _, addr := range []string{ln.Addr(), net.JoinHostPort("localhost", port)} {
		c, s, err = dialAccept(t, ln, addr, cfg)
		require.NoError(t, err, addr)
		roundTrip(t, c, s)
	}
}

// pki is a CA's files, a server certificate it signed for quiver.test
// and 127.0.0.1, and a client certificate it signed (client-1).
type pki struct {
	caFile, certFile, keyFile     string
	clientCertFile, clientKeyFile string
	ca                            *tlsconftest.CA
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca := tlsconftest.NewCA(t, "test CA")
	srv := ca.Issue(t, "quiver.test", "quiver.test", "127.0.0.1")
	cli := ca.Issue(t, "client-1")
	return pki{ca.File, srv.CertFile, srv.KeyFile, cli.CertFile, cli.KeyFile, ca}
}

func TestCertificateFiles(t *testing.T) {
	good := newPKI(t)
	other := newPKI(t)
	var logs logBuffer
	scfg := NewConfig()
	scfg.CertFile, scfg.KeyFile = good.certFile, good.keyFile
	ln, err := Listen(context.Background(), "127.0.0.1:0", scfg, transport.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	assert.NotContains(t, logs.String(), "self-signed")

	client := func(mod func(*Config)) *Config {
		c := NewConfig()
		c.CAFile = good.caFile
		mod(c)
		return c
	}
	tests := []struct {
		name    string
		give    *Config
		wantErr string // "" when the handshake succeeds
	}{
		{"trusted CA", client(func(*Config) {}), ""},
		{"server name", client(func(c *Config) { c.ServerName = "quiver.test" }), ""},
		{"wrong server name", client(func(c *Config) { c.ServerName = "other.test" }), "certificate is valid for quiver.test, not other.test"},
		{"wrong CA", client(func(c *Config) { c.CAFile = other.caFile }), "certificate signed by unknown authority"},
		{"system roots", client(func(c *Config) { c.CAFile = "" }), "certificate signed by unknown authority"},
		{"insecure", client(func(c *Config) { c.CAFile, c.InsecureSkipVerify = "", true }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s, err := dialAccept(t, ln, ln.Addr(), tt.give)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "quictransport: dial "+ln.Addr())
				return
			}
			require.NoError(t, err)
			roundTrip(t, c, s)
			assert.Equal(t, "quiver.test", peerCert(c).Subject.CommonName)
		})
	}
}

// TestCertificateRotation: a listener's certificate rewritten on disk is
// served to new connections without a restart.
func TestCertificateRotation(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	tlsconftest.Leaf{CertFile: p.certFile, KeyFile: p.keyFile}.InstallAt(t, certFile, keyFile)
	scfg := NewConfig()
	scfg.CertFile, scfg.KeyFile = certFile, keyFile
	ln, err := Listen(context.Background(), "127.0.0.1:0", scfg, transport.Deps{})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	served := func() string {
		t.Helper()
		ccfg := NewConfig()
		ccfg.CAFile = p.caFile
		c, s, err := dialAccept(t, ln, ln.Addr(), ccfg)
		require.NoError(t, err)
		roundTrip(t, c, s)
		return peerCert(c).Subject.CommonName
	}
	assert.Equal(t, "quiver.test", served())
	next := p.ca.Issue(t, "next.quiver.test", "127.0.0.1")
	next.InstallAt(t, certFile, keyFile)
	assert.Eventually(t, func() bool { return served() == "next.quiver.test" }, 10*time.Second, 100*time.Millisecond,
		"the rotated certificate is served (looked at every %s)", tlsconf.ReloadEvery)
}

func TestBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not pem"), 0o600))
	cfg := NewConfig()
	cfg.CertFile, cfg.KeyFile = filepath.Join(dir, "missing.pem"), junk
	_, err := Listen(context.Background(), "127.0.0.1:0", cfg, transport.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.pem")

	ln := listen(t, testConfig(), 0)
	ctx := ctxFor(t, 10*time.Second)
	for _, ca := range []string{filepath.Join(dir, "missing.pem"), junk} {
		cfg := NewConfig()
		cfg.CAFile = ca
		_, err := Dial(ctx, ln.Addr(), cfg, transport.Deps{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ca_file")
	}
}

func TestALPNMismatch(t *testing.T) {
	ln := listen(t, testConfig(), 0)
	ctx := ctxFor(t, 10*time.Second)
	_, err := quic.DialAddr(ctx, ln.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h3"}}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "application protocol")
	// The listener is unaffected.
	client, server := pair(t, ln, testConfig(), 0)
	roundTrip(t, client, server)
}

// TestClientCertificates: with client_auth require, only clients that
// present a certificate of client_ca_file get through Accept.
func TestClientCertificates(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	scfg := NewConfig()
	scfg.CertFile, scfg.KeyFile = p.certFile, p.keyFile
	scfg.ClientAuth, scfg.ClientCAFile = "require", p.caFile
	ln := listen(t, scfg, 0)

	ccfg := NewConfig()
	ccfg.CAFile = p.caFile
	ccfg.ClientCertFile, ccfg.ClientKeyFile = p.clientCertFile, p.clientKeyFile
	c, s, err := dialAccept(t, ln, ln.Addr(), ccfg)
	require.NoError(t, err)
	roundTrip(t, c, s)
	assert.Equal(t, "client-1", s.(*Conn).qc.ConnectionState().TLS.PeerCertificates[0].Subject.CommonName)

	for name, mod := range map[string]func(*Config){
		"no certificate":       func(c *Config) { c.ClientCertFile, c.ClientKeyFile = "", "" },
		"certificate of other": func(c *Config) { c.ClientCertFile, c.ClientKeyFile = other.clientCertFile, other.clientKeyFile },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := *ccfg
			mod(&cfg)
			ctx := ctxFor(t, 10*time.Second)
			c, err := Dial(ctx, ln.Addr(), &cfg, transport.Deps{})
			if err == nil {
				// TLS 1.3 clients finish first; the server refuses after.
				defer c.Close()
				_, err = c.ReadFrame(ctx)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "certificate")
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err = ln.Accept(short)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "a refused client reached Accept")
		})
	}
}
