package tcp

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/core/transport/tlsconf/tlsconftest"
	"github.com/quivermq/quiver/core/transport/transporttest"
)

// pki writes a self-signed server certificate and a client certificate
// into dir and returns their file names.
func pki(t *testing.T) (serverCert, serverKey, clientCert, clientKey string) {
	dir := t.TempDir()
	sc, err := tlsconf.SelfSigned("127.0.0.1")
	require.NoError(t, err)
	serverCert, serverKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	require.NoError(t, tlsconf.WritePEM(sc, serverCert, serverKey))
	cc, err := tlsconf.SelfSigned("client")
	require.NoError(t, err)
	clientCert, clientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	require.NoError(t, tlsconf.WritePEM(cc, clientCert, clientKey))
	return
}

func TestConformanceTLS(t *testing.T) {
	sc, sk, _, _ := pki(t)
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		lcfg := testConfig()
		lcfg.TLS = TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk}
		ln, err := Listen(context.Background(), "127.0.0.1:0", lcfg, transporttest.MaxFrameSize)
		require.NoError(t, err)
		dcfg := testConfig()
		dcfg.TLS = TLSConfig{Enabled: true, CAFile: sc}
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return Dial(ctx, ln.Addr(), dcfg, transporttest.MaxFrameSize)
		}
	})
}

func roundTrip(t *testing.T, ln *Listener, dcfg *Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := Dial(ctx, ln.Addr(), dcfg, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.WriteFrame(ctx, []byte{0, 0, 0, 0, 'h', 'i'}); err != nil {
		return err
	}
	s, ok := <-accepted
	require.True(t, ok)
	defer s.Close()
	f, err := s.ReadFrame(ctx)
	if err != nil {
		return err
	}
	assert.Equal(t, "hi", string(f[4:]))
	return nil
}

func TestTLSTrustAndClientCertificates(t *testing.T) {
	sc, sk, cc, ck := pki(t)
	tests := []struct {
		name    string
		server  TLSConfig
		client  TLSConfig
		wantErr bool
	}{
		{"trusted CA", TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk}, TLSConfig{Enabled: true, CAFile: sc}, false},
		{"untrusted server", TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk}, TLSConfig{Enabled: true, CAFile: cc}, true},
		{"skip verify", TLSConfig{Enabled: true}, TLSConfig{Enabled: true, InsecureSkipVerify: true}, false},
		{"client cert required and given", TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk, ClientAuth: "require", ClientCAFile: cc},
			TLSConfig{Enabled: true, CAFile: sc, ClientCertFile: cc, ClientKeyFile: ck}, false},
		{"client cert required, none given", TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk, ClientAuth: "require", ClientCAFile: cc},
			TLSConfig{Enabled: true, CAFile: sc}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lcfg := testConfig()
			lcfg.TLS = tt.server
			require.NoError(t, lcfg.Validate())
			ln, err := Listen(context.Background(), "127.0.0.1:0", lcfg, 0)
			require.NoError(t, err)
			defer ln.Close()
			dcfg := testConfig()
			dcfg.TLS = tt.client
			err = roundTrip(t, ln, dcfg)
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// TestPlaintextToTLSPortFailsCleanly: a plaintext client gets its
// connection closed, and the listener keeps serving TLS clients.
func TestPlaintextToTLSPortFailsCleanly(t *testing.T) {
	sc, sk, _, _ := pki(t)
	lcfg := testConfig()
	lcfg.TLS = TLSConfig{Enabled: true, CertFile: sc, KeyFile: sk}
	ln, err := Listen(context.Background(), "127.0.0.1:0", lcfg, 0)
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			errs <- err
			return
		}
		defer c.Close()
		_, err = c.ReadFrame(ctx)
		errs <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr())
	require.NoError(t, err)
	_, err = raw.Write([]byte{0, 0, 0, 10, 0, 0, 0, 6, '{', '}', 1, 2, 3, 4})
	require.NoError(t, err)
	assert.Error(t, <-errs, "the server reads no frame from a plaintext client")
	raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _ := raw.Read(buf)
	assert.NotContains(t, string(buf[:n]), "{}", "nothing is echoed back")
	raw.Close()

	dcfg := testConfig()
	dcfg.TLS = TLSConfig{Enabled: true, CAFile: sc}
	assert.NoError(t, roundTrip(t, ln, dcfg))
}

func TestTLSConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give TLSConfig
	}{
		{"cert without key", TLSConfig{CertFile: "a"}},
		{"client cert without key", TLSConfig{ClientCertFile: "a"}},
		{"bad client auth", TLSConfig{ClientAuth: "maybe"}},
		{"require without CA", TLSConfig{ClientAuth: "require"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig()
			c.TLS = tt.give
			assert.Error(t, c.Validate())
		})
	}
}

// TestTLSCertificateRotation: a listener's certificate rewritten on disk
// is served to new connections without a restart; one already open keeps
// working.
func TestTLSCertificateRotation(t *testing.T) {
	ca := tlsconftest.NewCA(t, "CA")
	a, b := ca.Issue(t, "a", "127.0.0.1"), ca.Issue(t, "b", "127.0.0.1")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a.InstallAt(t, certFile, keyFile)
	lcfg := testConfig()
	lcfg.TLS = TLSConfig{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	ln, err := Listen(context.Background(), "127.0.0.1:0", lcfg, 0)
	require.NoError(t, err)
	defer ln.Close()
	dcfg := testConfig()
	dcfg.TLS = TLSConfig{Enabled: true, CAFile: ca.File}
	served := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		accepted := make(chan transport.Conn, 1)
		go func() {
			c, _ := ln.Accept(ctx)
			accepted <- c
		}()
		defer func() {
			if c := <-accepted; c != nil {
				c.Close()
			}
		}()
		pool, err := tlsconf.CertPool(ca.File)
		require.NoError(t, err)
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	assert.Equal(t, "a", served())
	require.NoError(t, roundTrip(t, ln, dcfg))
	b.InstallAt(t, certFile, keyFile)
	assert.Eventually(t, func() bool { return served() == "b" }, 10*time.Second, 100*time.Millisecond,
		"the rotated certificate is served (looked at every %s)", tlsconf.ReloadEvery)
	require.NoError(t, roundTrip(t, ln, dcfg), "dialers trusting the CA connect")
}
