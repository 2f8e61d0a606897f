package controller

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/modules/namesrv"
)

// dialRaft connects to addr from local IP ip and says whether the
// controller kept the connection (a refused one is closed at accept).
func dialRaft(t *testing.T, addr, ip string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestRaftPortPeersOnly: the raft port keeps a connection from a peer's
// address and closes one from any other (counted), unless allow_from
// names it; the controllers keep their leader meanwhile.
func TestRaftPortPeersOnly(t *testing.T) {
	cs := startControllers(t, 3) // peers on 127.0.0.1
	l := leaderOf(t, cs)
	addr := cs[0].cfg.Listen
	assert.True(t, dialRaft(t, addr, "127.0.0.1"), "a peer's address")
	assert.False(t, dialRaft(t, addr, "127.0.0.2"), "not a peer's address")
	assert.False(t, dialRaft(t, addr, "127.0.0.3"))
	assert.EqualValues(t, 2, cs[0].allow.refused.Load())
	assert.Equal(t, l, leaderOf(t, cs), "the refusals disturbed raft")

	// allow_from: an IP and a CIDR.
	cfg := *cs[0].cfg
	cfg.AllowFrom = []string{"127.0.0.2", "127.0.9.0/24"}
	a, err := newAllowList(t.Context(), &cfg, cs[0].log)
	require.NoError(t, err)
	for ip, want := range map[string]bool{"127.0.0.1": true, "127.0.0.2": true, "127.0.9.77": true, "127.0.0.3": false, "10.0.0.1": false, "::1": false} {
		assert.Equal(t, want, a.allows(&net.TCPAddr{IP: net.ParseIP(ip), Port: 5}), ip)
	}
}

// TestAllowFromValidated: an allow_from entry that is neither an IP nor
// a CIDR fails the configuration, under its key.
func TestAllowFromValidated(t *testing.T) {
	cfg := namesrv.NewControllerConfig()
	cfg.Enabled = true
	cfg.AllowFrom = []string{"10.0.0.0/8", "192.168.1.7", "not-an-ip", "10.0.0.0/99"}
	err := cfg.Validate()
	require.Error(t, err)
	var ce config.Errors
	if errors.As(err, &ce) {
		assert.Len(t, ce, 2)
	}
	assert.Contains(t, err.Error(), "allow_from")
	assert.Contains(t, err.Error(), "not-an-ip")
}
