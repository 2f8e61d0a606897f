package remoting_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
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

// lateAnswer answers req with body when the writer gets to it, counting
// the answers built and (through their Sent) written.
type lateAnswer struct {
	req         *remoting.Command
	body        []byte
	built, sent *atomic.Int32
	panic       bool
}

func (a *lateAnswer) MakeReply() *remoting.Command {
	if a.panic {
		panic("late reply bug")
	}
	a.built.Add(1)
	resp := remoting.NewResponse(a.req, remoting.Success, "")
	resp.Body = a.body
	resp.Sent = func() { a.sent.Add(1) }
	return resp
}

// readRawFrame reads one length-prefixed frame from r and decodes it.
func readRawFrame(t *testing.T, r io.Reader) *remoting.Command {
	t.Helper()
	var lb [4]byte
	_, err := io.ReadFull(r, lb[:])
	require.NoError(t, err)
	frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
	_, err = io.ReadFull(r, frame)
	require.NoError(t, err)
	c, err := codec.Decode(frame)
	require.NoError(t, err)
	return c
}

// TestReplyLater: answers queued with ReplyLater to a client that reads
// nothing (32 MiB, far more than the socket buffers take) are all queued
// without the caller waiting; only those the writer got to are built
// (the rest wait unbuilt); once the client reads, they arrive in the
// order they were queued, each Sent run once written. A MakeReply that panics answers nothing and
// the connection goes on; on a closed connection ReplyLater fails and
// builds nothing.
// It runs over tcp and over tcp hidden behind a plain transport.Conn (no
// FrameBatcher: quic and nats), where the writer writes frame by frame.
func TestReplyLater(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plain bool
	}{{"batching", false}, {"plain", true}} {
		t.Run(tt.name, func(t *testing.T) { testReplyLater(t, tt.plain) })
	}
}

// plainListener hands out its connections as bare transport.Conns.
type plainListener struct{ transport.Listener }

func (l plainListener) Accept(ctx context.Context) (transport.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

func testReplyLater(t *testing.T, plain bool) {
	const n, size = 32, 1 << 20
	r := newTestRouter(t)
	var ln transport.Listener
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	if plain {
		ln = plainListener{ln}
	}
	srv := remoting.NewServer(r, testLogger(t), remoting.ServerOptions{})
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Close(ctx), "server close")
	})
	conn, err := net.Dial("tcp", ln.Addr())
	require.NoError(t, err)
	defer conn.Close()
	var frames []byte
	for range n + 1 {
		frames = append(frames, codec.EncodeWithLength(remoting.NewRequest(codeLong, nil, nil))...)
	}
	_, err = conn.Write(frames)
	require.NoError(t, err)
	var polls []longPoll
	ctx := ctxFor(t, 10*time.Second)
	for range n + 1 {
		select {
		case lp := <-r.long:
			polls = append(polls, lp)
		case <-ctx.Done():
			t.Fatal("long polls not received")
		}
	}
	p := polls[0].p
	var built, sent atomic.Int32
	// Queued in reverse arrival order, with a panicking one in between.
	var want []int32
	for i := n; i >= 1; i-- {
		a := &lateAnswer{req: polls[i].req, body: make([]byte, size), built: &built, sent: &sent}
		a.body[0] = byte(i)
		require.NoError(t, p.ReplyLater(a), "answer %d", i)
		want = append(want, polls[i].req.Opaque)
		if i == n/2 {
			require.NoError(t, p.ReplyLater(&lateAnswer{req: polls[0].req, panic: true, built: &built, sent: &sent}))
		}
	}
	assert.Less(t, int(built.Load()), n, "answers built before the writer could write them")
	assert.Less(t, int(sent.Load()), n, "answers counted as written before the client read them")

	rd := bufio.NewReaderSize(conn, 1<<20)
	for i, opaque := range want {
		c := readRawFrame(t, rd)
		require.Equal(t, opaque, c.Opaque, "answer %d out of queue order", i)
		assert.True(t, c.IsResponse())
		assert.Equal(t, remoting.Success, c.Code)
		require.Len(t, c.Body, size)
		assert.Equal(t, byte(n-i), c.Body[0])
	}
	assert.Equal(t, int32(n), built.Load())
	checkFor(t, 5*time.Second, func() bool { return sent.Load() == n }, "Sent not run for every answer written")

	conn.Close()
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("server side of the connection not closed")
	}
	err = p.ReplyLater(&lateAnswer{req: polls[0].req, built: &built, sent: &sent})
	assert.ErrorIs(t, err, remoting.ErrPeerClosed)
	assert.Equal(t, int32(n), built.Load())
}
