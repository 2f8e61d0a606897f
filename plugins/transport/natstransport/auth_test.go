package natstransport

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// roundTrip listens and dials with cfg and moves one frame each way.
func roundTrip(t *testing.T, cfg *Config) {
	t.Helper()
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	c, s := pair(t, ln, NewProvider(), cfg)
	ctx := ctxFor(t, 5*time.Second)
	require.NoError(t, c.WriteFrame(ctx, []byte("ping")))
	got, err := s.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
	require.NoError(t, s.WriteFrame(ctx, []byte("pong")))
	got, err = c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "pong", string(got))
}

func TestNKeySeedFile(t *testing.T) {
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := user.PublicKey()
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	s := runNATS(t, -1, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	file := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(file, seed, 0o600))

	cfg := testConfig(s)
	cfg.NKeySeedFile = file
	roundTrip(t, cfg)

	// Without the seed the server refuses the connection.
	_, err = NewProvider().ListenNATS(context.Background(), "127.0.0.1:0", testConfig(s), deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "natstransport: connect to")

	// A missing seed file is reported as such.
	cfg.NKeySeedFile = filepath.Join(t.TempDir(), "absent.nk")
	_, err = NewProvider().ListenNATS(context.Background(), "127.0.0.1:0", cfg, deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nkey_seed_file")
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string, cert tls.Certificate) {
	cert, err := tlsconf.SelfSigned("127.0.0.1")
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, tlsconf.WritePEM(cert, certFile, keyFile))
	return certFile, keyFile, cert
}

func TestTLS(t *testing.T) {
	certFile, _, cert := selfSigned(t)
	s := runNATS(t, -1, func(o *server.Options) {
		o.TLS = true
		o.TLSTimeout = 2
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	})
	cfg := testConfig(s)
	cfg.TLS.CAFile = certFile
	roundTrip(t, cfg)

	insecure := testConfig(s)
	insecure.TLS.InsecureSkipVerify = true
	roundTrip(t, insecure)

	// Trusting only the system roots fails the handshake.
	plain := testConfig(s)
	plain.URL = "tls://" + s.Addr().String()
	_, err := NewProvider().ListenNATS(context.Background(), "127.0.0.1:0", plain, deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
}
