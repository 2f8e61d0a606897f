package natstransport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err = tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
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
