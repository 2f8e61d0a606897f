package remoting_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// rawJSONFrame is a frame with a hand-written JSON header, as it travels
// (total length first).
func rawJSONFrame(hdr string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, body...)
}

// TestWrongShapedHeaderAnswered: a request whose header is well-formed JSON
// of the wrong shape gets a SYSTEM_ERROR answer with its opaque and a
// remark naming the field, and the same connection keeps serving; a oneway
// one gets nothing; a header the server cannot read (malformed JSON, no
// readable opaque) still closes the connection.
func TestWrongShapedHeaderAnswered(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	ctx := ctxFor(t, 10*time.Second)
	conn, err := dialTCP(ctx, addr)
	require.NoError(t, err)
	defer conn.Close()
	read := func() *remoting.Command {
		t.Helper()
		f, err := conn.ReadFrame(ctx)
		require.NoError(t, err)
		c, err := codec.Decode(f)
		require.NoError(t, err)
		return c
	}
	tests := []struct {
		hdr    string
		opaque int32
		field  string
	}{
		{fmt.Sprintf(`{"code":%d,"opaque":71,"flag":0,"extFields":[1,2]}`, codeEcho), 71, "extFields"},
		{`{"code":{"x":1},"opaque":72}`, 72, "code"},
		{fmt.Sprintf(`{"code":%d,"opaque":73,"extFields":{"topic":"T","queueId":{"n":1}}}`, codeEcho), 73, "extFields.queueId"},
		{`{"flag":"99999999999","opaque":"74"}`, 74, "flag"},
	}
	for _, tt := range tests {
		w := rawJSONFrame(tt.hdr, []byte("body"))
		require.NoError(t, conn.WriteFrame(ctx, w[4:]))
		resp := read()
		assert.Equal(t, tt.opaque, resp.Opaque, tt.hdr)
		assert.True(t, resp.IsResponse())
		assert.Equal(t, remoting.SystemError, resp.Code)
		assert.Contains(t, resp.Remark, "field "+tt.field, tt.hdr)
	}
	// A oneway request with a bad header: no answer (the next frame read
	// is the echo's).
	require.NoError(t, conn.WriteFrame(ctx, rawJSONFrame(fmt.Sprintf(`{"code":%d,"opaque":75,"flag":2,"extFields":[]}`, codeEcho), nil)[4:]))
	// Numbers and booleans in extFields are no error at all.
	require.NoError(t, conn.WriteFrame(ctx, rawJSONFrame(fmt.Sprintf(`{"code":%d,"opaque":"76","flag":0,"extFields":{"queueId":3,"f":true,"x":1.50,"n":null}}`, codeEcho), []byte("ok"))[4:]))
	resp := read()
	assert.Equal(t, int32(76), resp.Opaque)
	assert.Equal(t, remoting.Success, resp.Code)
	assert.Equal(t, "ok", string(resp.Body))
	assert.Equal(t, map[string]string{"queueId": "3", "f": "true", "x": "1.50"}, resp.ExtFields)
	assert.Len(t, srv.Peers(), 1)

	// Unanswerable: the opaque is an object. The connection goes.
	require.NoError(t, conn.WriteFrame(ctx, rawJSONFrame(`{"code":1,"opaque":{},"extFields":[]}`, nil)[4:]))
	_, err = conn.ReadFrame(ctx)
	assert.Error(t, err, "the server answered a header without a readable opaque")
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 0 }, "connection not dropped")
}

// TestWrongShapedResponseFailsTheCall: a response whose header has the
// wrong shape completes the call waiting for it with SYSTEM_ERROR at once
// instead of leaving it to time out.
func TestWrongShapedResponseFailsTheCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var n [4]byte
		if _, err := readFull(conn, n[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := readFull(conn, frame); err != nil {
			return
		}
		req, err := codec.Decode(frame)
		if err != nil {
			return
		}
		conn.Write(rawJSONFrame(fmt.Sprintf(`{"code":0,"flag":1,"opaque":%d,"extFields":"oops"}`, req.Opaque), nil))
		readFull(conn, n[:]) // until the client goes
	}()
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	t0 := time.Now()
	resp, err := c.Invoke(ctx, ln.Addr().String(), remoting.NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "field extFields")
	assert.Less(t, time.Since(t0), 5*time.Second)
	c.Close()
	wg.Wait()
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// countingHandler counts log records by level.
type countingHandler struct {
	mu     sync.Mutex
	counts map[slog.Level]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Level]++
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[l]
}

// TestWrongShapedHeaderLogRateLimited: a client sending bad headers in a
// loop gets one answer each but one WARN line, not one per frame.
func TestWrongShapedHeaderLogRateLimited(t *testing.T) {
	h := &countingHandler{counts: map[slog.Level]int{}}
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	srv := remoting.NewServer(newTestRouter(t), slog.New(h), remoting.ServerOptions{})
	srv.Serve(ln)
	defer srv.Close(context.Background())
	ctx := ctxFor(t, 10*time.Second)
	conn, err := dialTCP(ctx, ln.Addr())
	require.NoError(t, err)
	defer conn.Close()
	const n = 200
	for i := 0; i < n; i++ {
		require.NoError(t, conn.WriteFrame(ctx, rawJSONFrame(fmt.Sprintf(`{"code":%d,"opaque":%d,"extFields":[]}`, codeEcho, i), nil)[4:]))
	}
	for i := 0; i < n; i++ {
		f, err := conn.ReadFrame(ctx)
		require.NoError(t, err)
		resp, err := codec.Decode(f)
		require.NoError(t, err)
		require.Equal(t, int32(i), resp.Opaque)
		require.Equal(t, remoting.SystemError, resp.Code)
	}
	assert.Equal(t, 1, h.count(slog.LevelWarn), "WARN lines for %d bad headers", n)
	assert.Equal(t, n-1, h.count(slog.LevelDebug))
}
