package remoting_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

func echoHandler() remoting.Handler {
	return remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// TestConnectionLimits: connections beyond max_connections_per_ip are
// closed at once, counted, and a slot frees when a connection closes.
func TestConnectionLimits(t *testing.T) {
	srv, addr := startServer(t, echoHandler(), remoting.ServerOptions{MaxConnsPerHost: 3})
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
	}
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 3 }, "three connections served")
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = extra.Read(make([]byte, 1))
	assert.Error(t, err, "the fourth connection is closed")
	extra.Close()
	assert.Equal(t, int64(1), srv.Refused())

	held[0].Close()
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 2 }, "a slot frees")
	c := newClient(t, nil)
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(remoting.HeartBeat, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.Success, resp.Code)
	for _, h := range held[1:] {
		h.Close()
	}
}

func TestTotalConnectionLimit(t *testing.T) {
	srv, addr := startServer(t, echoHandler(), remoting.ServerOptions{MaxConns: 2})
	var held []net.Conn
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
	}
	checkFor(t, 5*time.Second, func() bool { return srv.Refused() == 3 }, "three refused")
	assert.Len(t, srv.Peers(), 2)
	for _, h := range held {
		h.Close()
	}
}
