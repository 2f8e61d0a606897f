package remoting_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// lateAnswer answers req with body when the writer gets to it.
type lateAnswer struct {
	req   *remoting.Command
	body  []byte
	built *atomic.Int32
	panic bool
}

func (a *lateAnswer) MakeReply() *remoting.Command {
	if a.panic {
		panic("late reply bug")
	}
	a.built.Add(1)
	resp := remoting.NewResponse(a.req, remoting.Success, "")
	resp.Body = a.body
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
	c, err := remoting.Decode(frame)
	require.NoError(t, err)
	return c
}

// TestReplyLater: answers queued with ReplyLater to a client that reads
// nothing (32 MiB, far more than the socket buffers take) are all queued
// without the caller waiting; only those the writer got to are built
// (the rest wait unbuilt); once the client reads, they arrive in the
// order they were queued. A MakeReply that panics answers nothing and
// the connection goes on; on a closed connection ReplyLater fails and
// builds nothing.
func TestReplyLater(t *testing.T) {
	const n, size = 32, 1 << 20
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	var frames []byte
	for range n + 1 {
		frames = append(frames, remoting.EncodeWithLength(remoting.NewRequest(codeLong, nil, nil))...)
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
	var built atomic.Int32
	// Queued in reverse arrival order, with a panicking one in between.
	var want []int32
	for i := n; i >= 1; i-- {
		a := &lateAnswer{req: polls[i].req, body: make([]byte, size), built: &built}
		a.body[0] = byte(i)
		require.NoError(t, p.ReplyLater(a), "answer %d", i)
		want = append(want, polls[i].req.Opaque)
		if i == n/2 {
			require.NoError(t, p.ReplyLater(&lateAnswer{req: polls[0].req, panic: true, built: &built}))
		}
	}
	assert.Less(t, int(built.Load()), n, "answers built before the writer could write them")

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

	conn.Close()
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("server side of the connection not closed")
	}
	err = p.ReplyLater(&lateAnswer{req: polls[0].req, built: &built})
	assert.ErrorIs(t, err, remoting.ErrPeerClosed)
	assert.Equal(t, int32(n), built.Load())
}
