package grpc_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/core/transport/tlsconf/tlsconftest"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// TestTLSCertificateRotation: the endpoint serves gRPC over TLS with its
// certificate files, and a certificate rewritten on disk is served to new
// connections without a restart (h2 negotiated either way).
func TestTLSCertificateRotation(t *testing.T) {
	ca := tlsconftest.NewCA(t, "CA")
	a, b := ca.Issue(t, "a", "127.0.0.1"), ca.Issue(t, "b", "127.0.0.1")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	a.InstallAt(t, certFile, keyFile)
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) {
		c.TLS = grpcmod.TLSConfig{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	}))
	pool, err := tlsconf.CertPool(ca.File)
	require.NoError(t, err)
	addr := n.srv.Addr().String()
	served := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
		require.NoError(t, err)
		defer c.Close()
		assert.Equal(t, "h2", c.ConnectionState().NegotiatedProtocol)
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	heartbeat := func() {
		t.Helper()
		conn, err := grpclib.NewClient(addr, grpclib.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(n.ctx(), 10*time.Second)
		defer cancel()
		resp, err := grpcapi.NewMessagingServiceClient(conn).Heartbeat(ctx, &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
		require.NoError(t, err)
		assert.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	}
	assert.Equal(t, "a", served())
	heartbeat()
	b.InstallAt(t, certFile, keyFile)
	assert.Eventually(t, func() bool { return served() == "b" }, 10*time.Second, 100*time.Millisecond,
		"the rotated certificate is served (looked at every %s)", tlsconf.ReloadEvery)
	heartbeat()
}
