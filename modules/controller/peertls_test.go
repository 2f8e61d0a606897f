package controller

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/transport/tlsconf"
	"github.com/quivermq/quiver/core/transport/tlsconf/tlsconftest"
	"github.com/quivermq/quiver/modules/namesrv"
)

// TestRaftPortMutualTLS: controllers with namesrv.controller.tls elect a
// leader, replicate a group and confirm it through read indexes (every
// connection of the raft port over TLS); a connection from a peer's
// address is refused without a certificate of the cluster's CA — plain
// TCP, TLS without a certificate, or a certificate of another CA — and
// a controller is refused a peer whose certificate is not for the
// address it dialled.
func TestRaftPortMutualTLS(t *testing.T) {
	ca := tlsconftest.NewCA(t, "cluster CA")
	leaf := ca.Issue(t, "controller", "127.0.0.1")
	cs := startControllersWith(t, 3, func(_ int, cfg *Config) {
		cfg.TLS = namesrv.ControllerTLS{Enabled: true, CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: ca.File}
	})
	leaderOf(t, cs)
	master := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 0, Addr: "10.0.0.1:1", Founder: true, Offset: 100, Sync: true, FailoverTimeout: time.Second}
	require.Eventually(t, func() bool { return beatAll(cs, master) != nil }, 5*time.Second, 20*time.Millisecond)
	for i, c := range cs {
		// A follower vouches only after a read index over the raft port.
		require.Eventually(t, func() bool { return c.fsm.Group("b") != nil && c.Vouch("b", master.Addr) }, 10*time.Second, 5*time.Millisecond,
			"controller %d applied the group and vouches for it", i)
	}

	addr := cs[0].cfg.Listen
	layer := cs[0].layer
	refused := layer.tlsRefused.Load()
	assert.False(t, dialRaftPlain(t, addr), "plain TCP from a peer's address")
	other := tlsconftest.NewCA(t, "another CA")
	stranger := other.Issue(t, "stranger", "127.0.0.1")
	cert, err := tlsconf.LoadKeyPair(stranger.CertFile, stranger.KeyFile)
	require.NoError(t, err)
	pool, err := tlsconf.CertPool(ca.File)
	require.NoError(t, err)
	for name, cc := range map[string]*tls.Config{
		"no certificate": {RootCAs: pool, ServerName: "127.0.0.1"},
		"another CA's":   {RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}},
	} {
		assert.False(t, dialRaftTLS(t, addr, cc), name)
	}
	assert.Eventually(t, func() bool { return layer.tlsRefused.Load() == refused+3 }, 5*time.Second, 10*time.Millisecond,
		"three handshakes refused and counted (%d)", layer.tlsRefused.Load()-refused)

	// The client side checks the peer's certificate names the address:
	// this one is the CA's but for another host.
	wrong := ca.Issue(t, "wrong host", "10.9.9.9")
	cfg := *cs[0].cfg
	cfg.TLS.CertFile, cfg.TLS.KeyFile = wrong.CertFile, wrong.KeyFile
	pt, err := newPeerTLS(&cfg, cs[0].log)
	require.NoError(t, err)
	srv, err := newMuxLayer("127.0.0.1:0", nil, func(c net.Conn) { c.Close() }, nil, pt, cs[0].log)
	require.NoError(t, err)
	defer srv.Close()
	_, err = layer.Dial(raft.ServerAddress(srv.Addr().String()), 5*time.Second)
	require.Error(t, err, "a peer certified for another address")
	assert.Contains(t, err.Error(), "tls handshake")
}

// dialRaftTLS connects to addr over TLS with cc and says whether the
// controller kept the connection.
func dialRaftTLS(t *testing.T, addr string, cc *tls.Config) bool {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cc)
	if err != nil {
		return false // the server's verdict reached the handshake (TLS 1.2)
	}
	defer c.Close()
	// TLS 1.3: the client's handshake ends before the server checked the
	// client's certificate; the server's alert comes with the first read.
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{'x'}); err != nil {
		return false
	}
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialRaftPlain connects to addr without TLS, sends the start of a raft
// request (an AppendEntries) and says whether the controller kept the
// connection.
func dialRaftPlain(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(append([]byte{0, 0x85, 0xa5}, "Entry\x00\x00\x00\x00"...)); err != nil {
		return false
	}
	_, err = io.ReadAll(c)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestControllerTLSValidated: TLS on needs all three files, readable.
func TestControllerTLSValidated(t *testing.T) {
	cfg := namesrv.NewControllerConfig()
	cfg.Enabled = true
	cfg.TLS = namesrv.ControllerTLS{Enabled: true, CertFile: "c.pem"}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "namesrv.controller.tls")
	assert.Contains(t, err.Error(), "ca_file")

	cfg.TLS = namesrv.ControllerTLS{Enabled: true, CertFile: "missing-cert.pem", KeyFile: "missing-key.pem", CAFile: "missing-ca.pem"}
	err = cfg.Validate()
	require.Error(t, err)
	var ce config.Errors
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.True(t, strings.Contains(err.Error(), "missing-cert.pem"), "%v", err)
}
