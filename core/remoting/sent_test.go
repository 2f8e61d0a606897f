package remoting_test

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// Command.Sent fires exactly once on every path that writes a command,
// after the frame was handed to the transport, and never when the write
// failed or did not happen. Each test drives one path over real TCP on
// 127.0.0.1.

// bigBody is over the size enqueue writes from the caller (64 KiB): such
// a request always goes through the connection's writer goroutine.
const bigBody = 100 << 10

// plainConn hides the transport's optional interfaces (FrameBatcher,
// FrameDeliverer, FrameRecycler): the peer then writes every command with
// Send.
type plainConn struct{ transport.Conn }

// dialPeer dials addr and runs a client Peer on it (no handler) until
// the test ends.
func dialPeer(t *testing.T, addr string, maxFrame int, plain bool) *remoting.Peer {
	t.Helper()
	conn, err := tcp.Dial(ctxFor(t, 5*time.Second), addr, tcpConfig(), maxFrame)
	require.NoError(t, err)
	var tc transport.Conn = conn
	if plain {
		tc = plainConn{conn}
	}
	p := remoting.NewPeer(tc, nil, testLogger(t), remoting.PeerOptions{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = p.Run(context.Background())
	}()
	t.Cleanup(func() {
		p.Close()
		wg.Wait()
	})
	return p
}

// counted returns a request whose Sent counts its calls.
func counted(code int32, body []byte, n *atomic.Int32) *remoting.Command {
	req := remoting.NewRequest(code, nil, body)
	req.Sent = func() { n.Add(1) }
	return req
}

// settle checks n reaches want and stays there across one more round
// trip on p (a second call would have shown by then).
func settle(t *testing.T, p *remoting.Peer, n *atomic.Int32, want int32) {
	t.Helper()
	checkFor(t, 5*time.Second, func() bool { return n.Load() >= want }, "Sent not called")
	_, err := p.Invoke(ctxFor(t, 5*time.Second), remoting.NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, want, n.Load(), "Sent called more than once")
}

func TestSentSend(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	var n atomic.Int32
	req := counted(codeOne, []byte("x"), &n)
	req.Flag |= codec.FlagOneway
	require.NoError(t, p.Send(ctxFor(t, 5*time.Second), req))
	assert.Equal(t, int32(1), n.Load(), "Send calls Sent before it returns")
	got := <-r.oneway
	assert.Equal(t, "x", string(got.Body))
	settle(t, p, &n, 1)
}

func TestSentOneway(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	var n atomic.Int32
	require.NoError(t, p.InvokeOneway(ctxFor(t, 5*time.Second), counted(codeOne, bytes.Repeat([]byte("o"), bigBody), &n)))
	assert.Equal(t, int32(1), n.Load(), "InvokeOneway calls Sent before it returns")
	got := <-r.oneway
	assert.Len(t, got.Body, bigBody)
	settle(t, p, &n, 1)
}

// TestSentResponse: a handler's answer (the server's Send) and a
// long-polled answer sent later with Reply.
func TestSentResponse(t *testing.T) {
	var n atomic.Int32
	held := make(chan *remoting.Command, 1)
	var heldPeer atomic.Pointer[remoting.Peer]
	rt := remoting.NewRouter()
	rt.Register(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = req.Body
		resp.Sent = func() { n.Add(1) }
		return resp
	})
	rt.Register(codeLong, func(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		heldPeer.Store(p)
		held <- req
		return nil
	})
	_, addr := startServer(t, rt, remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	for i := int32(1); i <= 3; i++ {
		resp, err := p.Invoke(ctxFor(t, 5*time.Second), remoting.NewRequest(codeEcho, nil, []byte("r")))
		require.NoError(t, err)
		assert.Equal(t, "r", string(resp.Body))
		// The server calls Sent right after its write returns; the
		// answer can arrive here first.
		checkFor(t, 5*time.Second, func() bool { return n.Load() == i }, "Sent of the answer")
	}

	var replied atomic.Int32
	done := make(chan error, 1)
	require.NoError(t, p.InvokeAsync(ctxFor(t, 5*time.Second), remoting.NewRequest(codeLong, nil, nil), func(_ *remoting.Command, err error) { done <- err }))
	req := <-held
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Opaque = req.Opaque
	resp.Sent = func() { replied.Add(1) }
	require.NoError(t, heldPeer.Load().Reply(ctxFor(t, 5*time.Second), resp))
	assert.Equal(t, int32(1), replied.Load(), "Reply calls Sent before it returns")
	require.NoError(t, <-done)
	assert.Equal(t, int32(3), n.Load())
}

// TestSentInvokeDirect: a small request on an idle connection is written
// by the caller (writer.enqueue).
func TestSentInvokeDirect(t *testing.T) {
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	var n atomic.Int32
	for i := int32(1); i <= 3; i++ {
		_, err := p.Invoke(ctxFor(t, 5*time.Second), counted(codeEcho, []byte("d"), &n))
		require.NoError(t, err)
		assert.Equal(t, i, n.Load(), "written by the caller: Sent before the answer")
	}
	settle(t, p, &n, 3)
}

// TestSentInvokeBatched: large requests, and requests queued behind each
// other, go through the writer goroutine's batches.
func TestSentInvokeBatched(t *testing.T) {
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	var n atomic.Int32
	const callers = 16
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := p.Invoke(ctxFor(t, 10*time.Second), counted(codeEcho, bytes.Repeat([]byte("b"), bigBody), &n))
			if assert.NoError(t, err) {
				assert.Len(t, resp.Body, bigBody)
			}
		}()
	}
	wg.Wait()
	settle(t, p, &n, callers)
}

func TestSentInvokeAsync(t *testing.T) {
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, false)
	var n atomic.Int32
	done := make(chan error, 2)
	cb := func(_ *remoting.Command, err error) { done <- err }
	require.NoError(t, p.InvokeAsync(ctxFor(t, 5*time.Second), counted(codeEcho, []byte("small"), &n), cb))
	require.NoError(t, p.InvokeAsync(ctxFor(t, 5*time.Second), counted(codeEcho, bytes.Repeat([]byte("a"), bigBody), &n), cb))
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	settle(t, p, &n, 2)
}

// TestSentWithoutBatcher: on a transport that cannot batch, Invoke and
// InvokeAsync write with Send.
func TestSentWithoutBatcher(t *testing.T) {
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{})
	p := dialPeer(t, addr, 0, true)
	var n atomic.Int32
	_, err := p.Invoke(ctxFor(t, 5*time.Second), counted(codeEcho, bytes.Repeat([]byte("p"), bigBody), &n))
	require.NoError(t, err)
	assert.Equal(t, int32(1), n.Load())
	done := make(chan error, 1)
	require.NoError(t, p.InvokeAsync(ctxFor(t, 5*time.Second), counted(codeEcho, []byte("a"), &n), func(_ *remoting.Command, err error) { done <- err }))
	require.NoError(t, <-done)
	settle(t, p, &n, 2)
}

// TestSentNotOnFailure: a frame over the transport's limit, on both the
// Send and the queued paths, and a command sent on a closed peer.
func TestSentNotOnFailure(t *testing.T) {
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{})
	const limit = 4 << 10
	var n atomic.Int32
	for _, plain := range []bool{false, true} {
		p := dialPeer(t, addr, limit, plain)
		big := bytes.Repeat([]byte("x"), 2*limit)
		_, err := p.Invoke(ctxFor(t, 5*time.Second), counted(codeEcho, big, &n))
		require.ErrorIs(t, err, transport.ErrFrameTooLarge, "plain=%v", plain)
		err = p.InvokeAsync(ctxFor(t, 5*time.Second), counted(codeEcho, big, &n), func(*remoting.Command, error) {})
		require.ErrorIs(t, err, transport.ErrFrameTooLarge, "plain=%v", plain)
		one := counted(codeOne, big, &n)
		require.ErrorIs(t, p.InvokeOneway(ctxFor(t, 5*time.Second), one), transport.ErrFrameTooLarge)
		// The connection is still usable.
		settle(t, p, &n, 0)

		p.Close()
		require.ErrorIs(t, p.Send(ctxFor(t, 5*time.Second), counted(codeOne, []byte("x"), &n)), remoting.ErrPeerClosed)
		_, err = p.Invoke(ctxFor(t, 5*time.Second), counted(codeEcho, []byte("x"), &n))
		require.Error(t, err)
		assert.Equal(t, int32(0), n.Load(), "plain=%v", plain)
	}
}
