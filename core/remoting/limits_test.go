package remoting_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
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

// TestAnswerOverFrameLimit: a handler whose answer the frame limit cannot
// carry (a huge batch result, say) does not leave the client waiting for
// its timeout: the client gets SYSTEM_ERROR naming the limit, and the
// connection keeps serving.
func TestAnswerOverFrameLimit(t *testing.T) {
	const codeHuge, codeSmall = 9001, 9002
	h := remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		if req.Code == codeHuge {
			resp.Body = make([]byte, transport.DefaultMaxFrameSize+1)
		}
		return resp
	})
	_, addr := startServer(t, h, remoting.ServerOptions{})
	c := newClient(t, nil)
	resp, err := c.Invoke(ctxFor(t, 10*time.Second), addr, remoting.NewRequest(codeHuge, nil, nil))
	require.NoError(t, err, "an answer, not a timeout")
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "exceeds the frame limit")
	assert.Empty(t, resp.Body)
	resp, err = c.Invoke(ctxFor(t, 10*time.Second), addr, remoting.NewRequest(codeSmall, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.Success, resp.Code, "the connection keeps serving")
}
