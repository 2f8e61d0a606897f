package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/core/transport/tlsconf/tlsconftest"
)

// testClock is a clock a test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// copyFile replaces dst's content with src's (as a rotation in place).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o600))
}

// serve accepts TLS connections with cfg until the test ends, completing
// each handshake (and dropping the connection).
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte{1}) // the client's read waits for the server's verdict
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// dial handshakes with addr and returns the server certificate's common
// name, or the error.
func dial(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return "", err // TLS 1.3: a refused client certificate shows here
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// TestReloaderServesRotatedCertificate: a listener's certificate rewritten
// on disk is served from the first handshake a second after; before that
// the previous one; a rewrite that does not load keeps the previous one
// (logged), and the next good one is served.
func TestReloaderServesRotatedCertificate(t *testing.T) {
	ca := tlsconftest.NewCA(t, "CA")
	a, b, c := ca.Issue(t, "a", "127.0.0.1"), ca.Issue(t, "b", "127.0.0.1"), ca.Issue(t, "c", "127.0.0.1")
	dir := t.TempDir()
	certFile, keyFile := dir+"/tls.crt", dir+"/tls.key"
	a.InstallAt(t, certFile, keyFile)
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))
	r, err := tlsconf.NewReloader(certFile, keyFile, "", log)
	require.NoError(t, err)
	clk := &testClock{t: time.Now()}
	tlsconf.SetClock(r, clk.now)
	addr := serve(t, r.Server(&tls.Config{MinVersion: tls.VersionTLS12}))
	pool, err := tlsconf.CertPool(ca.File)
	require.NoError(t, err)
	cli := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	cn := func() string {
		t.Helper()
		name, err := dial(addr, cli)
		require.NoError(t, err)
		return name
	}
	assert.Equal(t, "a", cn())

	b.InstallAt(t, certFile, keyFile)
	assert.Equal(t, "a", cn(), "not looked at again within ReloadEvery")
	clk.add(tlsconf.ReloadEvery)
	assert.Equal(t, "b", cn(), "rotated")

	require.NoError(t, os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nhalf"), 0o600))
	clk.add(tlsconf.ReloadEvery)
	assert.Equal(t, "b", cn(), "a rewrite that does not load keeps the previous certificate")
	logMu.Lock()
	assert.Contains(t, logs.String(), "do not load")
	logMu.Unlock()

	c.InstallAt(t, certFile, keyFile)
	clk.add(tlsconf.ReloadEvery)
	assert.Equal(t, "c", cn())
	assert.Equal(t, "c", r.Client(&tls.Config{}).Certificates[0].Leaf.Subject.CommonName, "and to dialers")
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestReloaderRotatesClientCAs: a listener requiring client certificates
// trusts a CA file rewritten on disk from a second after, on both sides:
// the server's ClientCAs and a dialler's RootCAs.
func TestReloaderRotatesClientCAs(t *testing.T) {
	oldCA, newCA := tlsconftest.NewCA(t, "old CA"), tlsconftest.NewCA(t, "new CA")
	srvLeaf := newCA.Issue(t, "server", "127.0.0.1")
	cliLeaf := newCA.Issue(t, "client")
	caFile := t.TempDir() + "/ca.pem"
	copyFile(t, oldCA.File, caFile)
	r, err := tlsconf.NewReloader(srvLeaf.CertFile, srvLeaf.KeyFile, caFile, nil)
	require.NoError(t, err)
	clk := &testClock{t: time.Now()}
	tlsconf.SetClock(r, clk.now)
	addr := serve(t, r.Server(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}))

	cliCert, err := tlsconf.LoadKeyPair(cliLeaf.CertFile, cliLeaf.KeyFile)
	require.NoError(t, err)
	newPool, err := tlsconf.CertPool(newCA.File)
	require.NoError(t, err)
	cli := &tls.Config{RootCAs: newPool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cliCert}}
	_, err = dial(addr, cli)
	require.Error(t, err, "a client of the new CA, before the CA file changes")

	// A dialler whose Reloader still has the old CA does not trust the
	// server (of the new CA) either.
	dr, err := tlsconf.NewReloader(cliLeaf.CertFile, cliLeaf.KeyFile, caFile, nil)
	require.NoError(t, err)
	tlsconf.SetClock(dr, clk.now)
	_, err = dial(addr, dr.Client(&tls.Config{ServerName: "127.0.0.1"}))
	var uae x509.UnknownAuthorityError
	require.True(t, errors.As(err, &uae), "%v", err)

	copyFile(t, newCA.File, caFile)
	clk.add(tlsconf.ReloadEvery)
	name, err := dial(addr, cli)
	require.NoError(t, err, "the server trusts the new CA")
	assert.Equal(t, "server", name)
	name, err = dial(addr, dr.Client(&tls.Config{ServerName: "127.0.0.1"}))
	require.NoError(t, err, "the dialler trusts the new CA")
	assert.Equal(t, "server", name)
}

// TestNewReloaderRefusesBadFiles: the first reading must load.
func TestNewReloaderRefusesBadFiles(t *testing.T) {
	ca := tlsconftest.NewCA(t, "CA")
	l := ca.Issue(t, "x")
	_, err := tlsconf.NewReloader(l.CertFile, "", "", nil)
	assert.Error(t, err, "a certificate without its key")
	_, err = tlsconf.NewReloader(l.CertFile, l.KeyFile, l.KeyFile, nil)
	assert.Error(t, err, "a CA file without a certificate")
	_, err = tlsconf.NewReloader(l.CertFile, ca.File, "", nil)
	assert.Error(t, err, "a key that is not the certificate's")
	r, err := tlsconf.NewReloader("", "", ca.File, nil)
	require.NoError(t, err, "a CA alone")
	cc := r.Client(&tls.Config{})
	assert.Empty(t, cc.Certificates)
	assert.NotNil(t, cc.RootCAs)
}

// TestReloaderWarnsBeforeExpiry: a certificate expiring within
// ExpiryWarning is logged when read, then once a day (as expired once it
// has), not at every look.
func TestReloaderWarnsBeforeExpiry(t *testing.T) {
	ca := tlsconftest.NewCA(t, "CA")
	l := ca.Issue(t, "short", "127.0.0.1") // valid for an hour
	var logs bytes.Buffer
	var mu sync.Mutex
	r, err := tlsconf.NewReloader(l.CertFile, l.KeyFile, "", slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil)))
	require.NoError(t, err)
	count := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Count(logs.Bytes(), []byte(s))
	}
	assert.Equal(t, 1, count("expires soon"), "warned when read")
	clk := &testClock{t: time.Now()}
	tlsconf.SetClock(r, clk.now)
	for range 5 {
		clk.add(tlsconf.ReloadEvery)
		r.Client(&tls.Config{})
	}
	assert.Equal(t, 1, count("expires soon"), "not at every look")
	clk.add(24 * time.Hour)
	r.Client(&tls.Config{})
	assert.Equal(t, 1, count("has expired"), "a day later, expired")

	// A certificate valid for a year is not warned about.
	year, err := tlsconf.SelfSigned("127.0.0.1")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, tlsconf.WritePEM(year, dir+"/c.pem", dir+"/k.pem"))
	mu.Lock()
	logs.Reset()
	mu.Unlock()
	_, err = tlsconf.NewReloader(dir+"/c.pem", dir+"/k.pem", "", slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil)))
	require.NoError(t, err)
	assert.Zero(t, count("tls: certificate"), "a year left")
}
