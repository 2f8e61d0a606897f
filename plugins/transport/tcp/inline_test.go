package tcp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// The reader-served requests of remoting.Mode.Inline over a real TCP
// connection: their answers are written together once the reader has
// drained what arrived.

var _ interface{ FrameBuffered() bool } = (*tcp.Conn)(nil)

// countingConn counts the write system calls made on the server's socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

const (
	codeInline   = 9001
	codeBlocking = 9002
	codeWorker   = 9003
)

// inlineServer serves r on one accepted connection and returns the client
// side (a raw socket) and the server socket's write counter.
func inlineServer(t *testing.T, r *remoting.Router) (net.Conn, *countingConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	raw, err := ln.Accept()
	require.NoError(t, err)
	cc := &countingConn{Conn: raw}
	p := remoting.NewPeer(tcp.NewConn(cc, tcp.NewConfig(), 0), r, nil, remoting.PeerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		client.Close()
		<-done
	})
	return client, cc
}

// requests encodes n requests of code, opaques from first on, as one
// byte stream.
func requests(code int32, first, n int) []byte {
	var b []byte
	for i := range n {
		req := remoting.NewRequest(code, map[string]string{"i": "x"}, []byte("body"))
		req.Opaque = int32(first + i)
		b = append(b, codec.EncodeWithLength(req)...)
	}
	return b
}

// readAnswers reads n answers and returns their opaques in arrival order.
func readAnswers(t *testing.T, r *bufio.Reader, n int) []int32 {
	t.Helper()
	var out []int32
	for range n {
		var lb [4]byte
		_, err := io.ReadFull(r, lb[:])
		require.NoError(t, err)
		frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
		_, err = io.ReadFull(r, frame)
		require.NoError(t, err)
		resp, err := codec.Decode(frame)
		require.NoError(t, err)
		require.True(t, resp.IsResponse())
		require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
		out = append(out, resp.Opaque)
	}
	return out
}

func echoRouter(inline bool) *remoting.Router {
	r := remoting.NewRouter()
	ok := func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	var m remoting.Mode
	if inline {
		m.Inline = remoting.Always
	}
	r.Register(codeInline, ok, m)
	r.Register(codeWorker, ok)
	return r
}

// TestInlineAnswersCoalesced: 32 requests that arrive together are
// answered with one write when their code is served on the reader; the
// same requests handed to worker goroutines take more.
func TestInlineAnswersCoalesced(t *testing.T) {
	const n = 32
	for _, tt := range []struct {
		name   string
		inline bool
	}{{"inline", true}, {"workers", false}} {
		t.Run(tt.name, func(t *testing.T) {
			client, cc := inlineServer(t, echoRouter(tt.inline))
			_, err := client.Write(requests(codeInline, 1, n))
			require.NoError(t, err)
			got := readAnswers(t, bufio.NewReader(client), n)
			assert.Len(t, got, n)
			if tt.inline {
				assert.Equal(t, int64(1), cc.writes.Load(), "answers of one burst in one write")
				for i, o := range got {
					assert.Equal(t, int32(i+1), o, "served in arrival order on the reader")
				}
			} else {
				t.Logf("worker path: %d writes for %d answers", cc.writes.Load(), n)
			}
		})
	}
}

// TestInlineAnswerBound: a burst longer than the queue's bound is answered
// in several writes, the first before the reader has drained the burst.
func TestInlineAnswerBound(t *testing.T) {
	const n = 200 // over remoting's 64 answers per write
	client, cc := inlineServer(t, echoRouter(true))
	_, err := client.Write(requests(codeInline, 1, n))
	require.NoError(t, err)
	got := readAnswers(t, bufio.NewReader(client), n)
	assert.Len(t, got, n)
	assert.GreaterOrEqual(t, cc.writes.Load(), int64(4), "at most 64 answers wait for one write")
	assert.Less(t, cc.writes.Load(), int64(n/2), "answers still share writes")
}

// TestInlineLoneRequestAnsweredAtOnce: a request whose frame arrives in
// pieces (as the official client writes them) is answered once it is
// whole; nothing waits for a further request.
func TestInlineLoneRequestAnsweredAtOnce(t *testing.T) {
	client, _ := inlineServer(t, echoRouter(true))
	b := requests(codeInline, 7, 1)
	br := bufio.NewReader(client)
	for i := range 3 {
		_, err := client.Write(b[:4])
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
		_, err = client.Write(b[4:])
		require.NoError(t, err)
		require.NoError(t, client.SetReadDeadline(time.Now().Add(10*time.Second)))
		assert.Equal(t, []int32{7}, readAnswers(t, br, 1), "round %d", i)
	}
}

// TestBlockingHandlerDoesNotStallInline: a request whose handler blocks
// (not declared inline) goes to a worker; inline requests sent after it
// on the same connection are answered while it waits, and it is answered
// once released.
func TestBlockingHandlerDoesNotStallInline(t *testing.T) {
	r := echoRouter(true)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	r.Register(codeBlocking, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return remoting.NewResponse(req, remoting.Success, "")
	})
	client, _ := inlineServer(t, r)
	br := bufio.NewReader(client)
	_, err := client.Write(append(requests(codeBlocking, 100, 1), requests(codeInline, 1, 5)...))
	require.NoError(t, err)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(10*time.Second)))
	assert.Equal(t, []int32{1, 2, 3, 4, 5}, readAnswers(t, br, 5), "inline answers while the blocking handler waits")
	once.Do(func() { close(release) })
	assert.Equal(t, []int32{100}, readAnswers(t, br, 1))
}

// TestInlineCondition: Inline's condition is asked per request; turned
// off, the code goes to workers again (answers still arrive).
func TestInlineCondition(t *testing.T) {
	var on atomic.Bool
	var asked atomic.Int64
	r := remoting.NewRouter()
	r.Register(codeInline, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	}, remoting.Mode{Inline: func() bool { asked.Add(1); return on.Load() }})
	client, cc := inlineServer(t, r)
	br := bufio.NewReader(client)
	on.Store(true)
	_, err := client.Write(requests(codeInline, 1, 16))
	require.NoError(t, err)
	assert.Len(t, readAnswers(t, br, 16), 16)
	assert.Equal(t, int64(1), cc.writes.Load())
	on.Store(false)
	_, err = client.Write(requests(codeInline, 17, 16))
	require.NoError(t, err)
	assert.Len(t, readAnswers(t, br, 16), 16)
	assert.Equal(t, int64(32), asked.Load(), "asked once per request")
}
