package remoting_test

// The end-to-end tests run over real TCP on 127.0.0.1:0 through the tcp
// transport plugin. Only these tests import it; the remoting package itself
// depends on core/transport alone.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	codeEcho  int32 = 1000
	codeSleep int32 = 1001
	codePanic int32 = 1002
	codeBlock int32 = 1003
	codeLong  int32 = 1004
	codeOne   int32 = 1005
	codePing  int32 = 2000
)

// testLogger logs to t.Log until the test's cleanups have run; goroutines
// still logging after that write nowhere instead of panicking.
func testLogger(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(b, "\n")))
	}
	return len(b), nil
}

func tcpConfig() *tcp.Config {
	cfg := tcp.NewConfig()
	cfg.IdleTimeout = 30 * time.Second
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 5 * time.Second
	return cfg
}

func startServer(t testing.TB, h remoting.Handler, opts remoting.ServerOptions) (*remoting.Server, string) {
	t.Helper()
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	srv := remoting.NewServer(h, testLogger(t), opts)
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Close(ctx), "server close")
	})
	return srv, ln.Addr()
}

func dialTCP(ctx context.Context, addr string) (transport.Conn, error) {
	return tcp.Dial(ctx, addr, tcpConfig(), 0)
}

func newClient(t testing.TB, h remoting.Handler) *remoting.Client {
	c := remoting.NewClient(dialTCP, h, testLogger(t), remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkFor polls cond until it holds or d passes.
func checkFor(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", d, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testRouter serves the test codes. release unblocks codeBlock handlers.
type testRouter struct {
	*remoting.Router
	release  chan struct{}
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	blocked  atomic.Int32 // codeBlock requests received
	oneway   chan *remoting.Command
	long     chan longPoll
}

type longPoll struct {
	p   *remoting.Peer
	req *remoting.Command
}

func newTestRouter(t testing.TB) *testRouter {
	r := &testRouter{Router: remoting.NewRouter(), release: make(chan struct{}),
		oneway: make(chan *remoting.Command, 16), long: make(chan longPoll, 16)}
	t.Cleanup(func() { close(r.release) })
	echo := func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.ExtFields = req.ExtFields
		resp.Body = req.Body
		return resp
	}
	r.Register(codeEcho, echo)
	r.Register(codeSleep, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		n := r.inFlight.Add(1)
		for {
			m := r.maxSeen.Load()
			if n <= m || r.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		defer r.inFlight.Add(-1)
		d, _ := strconv.Atoi(req.Ext("sleepMicros"))
		select {
		case <-time.After(time.Duration(d) * time.Microsecond):
		case <-ctx.Done():
		}
		return echo(ctx, p, req)
	})
	r.Register(codePanic, func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		panic("handler bug")
	})
	r.Register(codeBlock, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		r.blocked.Add(1)
		select {
		case <-r.release:
		case <-ctx.Done():
		}
		return echo(ctx, p, req)
	})
	r.Register(codeLong, func(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		r.long <- longPoll{p, req}
		return nil
	})
	r.Register(codeOne, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		r.oneway <- req
		return echo(ctx, p, req) // must not be sent: the request is oneway
	})
	return r
}

func TestInvokeOutOfOrder(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 20*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var mu sync.Mutex
	var order []int
	for i := range n {
		wg.Go(func() {
			req := remoting.NewRequest(codeSleep, map[string]string{
				"i": strconv.Itoa(i), "sleepMicros": strconv.Itoa(rand.IntN(20000)),
			}, []byte(fmt.Sprintf("body-%d", i)))
			resp, err := c.Invoke(ctx, addr, req)
			if err != nil {
				errs <- err
				return
			}
			if resp.Opaque != req.Opaque || resp.Ext("i") != strconv.Itoa(i) || string(resp.Body) != fmt.Sprintf("body-%d", i) {
				errs <- fmt.Errorf("request %d got the answer %+v", i, resp)
				return
			}
			if !resp.IsResponse() || resp.Code != remoting.Success {
				errs <- fmt.Errorf("request %d: flag %d code %d", i, resp.Flag, resp.Code)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Len(t, order, n)
	assert.Greater(t, r.maxSeen.Load(), int32(1), "requests on one connection were not served concurrently")
}

func TestBodyPartsResponse(t *testing.T) {
	r := remoting.NewRouter()
	r.Register(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.BodyParts = [][]byte{[]byte("record-1;"), {}, []byte("record-2;"), bytes.Repeat([]byte("z"), 100000)}
		return resp
	})
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(remoting.PullMessage, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, "record-1;record-2;"+string(bytes.Repeat([]byte("z"), 100000)), string(resp.Body))
}

// TestSentAfterWrite: a response's Sent runs once it is written, after
// which its parts may be reused: the answer read is what was sent even
// though the handler's buffer is overwritten in Sent.
func TestSentAfterWrite(t *testing.T) {
	var sent atomic.Int32
	r := remoting.NewRouter()
	r.Register(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		buf := bytes.Repeat([]byte("a"), 200000)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.BodyParts = [][]byte{buf[:100000], buf[100000:]}
		resp.Sent = func() {
			for i := range buf {
				buf[i] = 'X'
			}
			sent.Add(1)
		}
		return resp
	})
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	for i := 0; i < 3; i++ {
		resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(remoting.PullMessage, nil, nil))
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("a", 200000), string(resp.Body))
	}
	require.Eventually(t, func() bool { return sent.Load() == 3 }, 5*time.Second, time.Millisecond)
}

func TestInvokeBinaryHeader(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	req := remoting.NewRequest(codeEcho, map[string]string{"k": "v"}, []byte("b"))
	req.SerializeType = codec.SerializeRocketMQ
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, req)
	require.NoError(t, err)
	assert.Equal(t, codec.SerializeRocketMQ, resp.SerializeType, "the answer uses the request's header type")
	assert.Equal(t, "v", resp.Ext("k"))
	assert.Equal(t, "b", string(resp.Body))
}

func TestInvokeAsync(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	const n = 50
	type result struct {
		i    int
		resp *remoting.Command
		err  error
	}
	results := make(chan result, n)
	for i := range n {
		req := remoting.NewRequest(codeSleep, map[string]string{"i": strconv.Itoa(i), "sleepMicros": strconv.Itoa(rand.IntN(5000))}, nil)
		require.NoError(t, c.InvokeAsync(ctx, addr, req, func(resp *remoting.Command, err error) {
			results <- result{i, resp, err}
		}))
	}
	seen := map[int]bool{}
	for range n {
		select {
		case res := <-results:
			require.NoError(t, res.err)
			assert.Equal(t, strconv.Itoa(res.i), res.resp.Ext("i"))
			seen[res.i] = true
		case <-ctx.Done():
			t.Fatal("async callbacks did not all arrive")
		}
	}
	assert.Len(t, seen, n)
}

func TestInvokeAsyncTimeout(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	got := make(chan error, 1)
	require.NoError(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeBlock, nil, nil), func(_ *remoting.Command, err error) { got <- err }))
	select {
	case err := <-got:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("callback not called after the deadline")
	}
}

func TestInvokeOneway(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	req := remoting.NewRequest(codeOne, map[string]string{"x": "1"}, []byte("fire"))
	require.NoError(t, c.InvokeOneway(ctx, addr, req))
	select {
	case got := <-r.oneway:
		assert.True(t, got.IsOneway())
		assert.Equal(t, "fire", string(got.Body))
	case <-ctx.Done():
		t.Fatal("oneway request not delivered")
	}
}

// TestOnewayGetsNoAnswer speaks raw frames: after a oneway request and a
// normal one, the first frame back must answer the normal one.
func TestOnewayGetsNoAnswer(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	ctx := ctxFor(t, 10*time.Second)
	conn, err := dialTCP(ctx, addr)
	require.NoError(t, err)
	defer conn.Close()
	one := remoting.NewRequest(codeOne, nil, nil)
	one.Flag = codec.FlagOneway
	require.NoError(t, conn.WriteFrame(ctx, codec.Encode(one)))
	select {
	case <-r.oneway:
	case <-ctx.Done():
		t.Fatal("oneway request not delivered")
	}
	normal := remoting.NewRequest(codeEcho, nil, nil)
	require.NoError(t, conn.WriteFrame(ctx, codec.Encode(normal)))
	f, err := conn.ReadFrame(ctx)
	require.NoError(t, err)
	resp, err := codec.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, normal.Opaque, resp.Opaque, "a oneway request was answered")
}

// TestStrayResponseIgnored: a response nobody waits for is dropped and the
// connection keeps serving.
func TestStrayResponseIgnored(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	ctx := ctxFor(t, 10*time.Second)
	conn, err := dialTCP(ctx, addr)
	require.NoError(t, err)
	defer conn.Close()
	stray := &remoting.Command{Code: 0, Opaque: 99999, Flag: codec.FlagResponse}
	require.NoError(t, conn.WriteFrame(ctx, codec.Encode(stray)))
	// A panicking oneway request gets no answer either.
	one := remoting.NewRequest(codePanic, nil, nil)
	one.Flag = codec.FlagOneway
	require.NoError(t, conn.WriteFrame(ctx, codec.Encode(one)))
	req := remoting.NewRequest(codeEcho, nil, []byte("after"))
	require.NoError(t, conn.WriteFrame(ctx, codec.Encode(req)))
	f, err := conn.ReadFrame(ctx)
	require.NoError(t, err)
	resp, err := codec.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, req.Opaque, resp.Opaque)
	assert.Equal(t, "after", string(resp.Body))
	assert.Len(t, srv.Peers(), 1)
}

func TestServerInitiatedRequest(t *testing.T) {
	peers := make(chan *remoting.Peer, 1)
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	clientHandler := remoting.NewRouter()
	clientHandler.Register(codePing, func(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = append([]byte("pong:"), req.Body...)
		return resp
	})
	c := newClient(t, clientHandler)
	ctx := ctxFor(t, 10*time.Second)
	cp, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	var sp *remoting.Peer
	select {
	case sp = <-peers:
	case <-ctx.Done():
		t.Fatal("OnConnect not called")
	}
	assert.Len(t, srv.Peers(), 1)
	assert.Equal(t, cp.LocalAddr(), sp.RemoteAddr())
	assert.Equal(t, []string{addr}, srv.Addrs())

	for i := range 10 {
		resp, err := sp.Invoke(ctx, remoting.NewRequest(codePing, nil, []byte(strconv.Itoa(i))))
		require.NoError(t, err)
		assert.Equal(t, "pong:"+strconv.Itoa(i), string(resp.Body))
	}
	// The client also answers unknown codes.
	resp, err := sp.Invoke(ctx, remoting.NewRequest(4321, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
	// Client requests still work alongside.
	resp, err = c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("x")))
	require.NoError(t, err)
	assert.Equal(t, "x", string(resp.Body))
}

func TestNilHandlerAnswersNotSupported(t *testing.T) {
	peers := make(chan *remoting.Peer, 1)
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	_, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	sp := <-peers
	resp, err := sp.Invoke(ctx, remoting.NewRequest(codePing, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
	assert.Equal(t, " request type 2000 not supported", resp.Remark)
}

func TestLongPollReply(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	done := make(chan *remoting.Command, 1)
	go func() {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeLong, map[string]string{"q": "1"}, nil))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	var lp longPoll
	select {
	case lp = <-r.long:
	case <-ctx.Done():
		t.Fatal("long poll not received")
	}
	// While the poll is parked, the connection serves other requests.
	for range 5 {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("meanwhile")))
		require.NoError(t, err)
		assert.Equal(t, "meanwhile", string(resp.Body))
	}
	select {
	case <-done:
		t.Fatal("long poll answered before Reply")
	default:
	}
	resp := remoting.NewResponse(lp.req, remoting.Success, "")
	resp.Body = []byte("messages")
	require.NoError(t, lp.p.Reply(ctx, resp))
	select {
	case got := <-done:
		require.NotNil(t, got)
		assert.Equal(t, "messages", string(got.Body))
		assert.Equal(t, remoting.Success, got.Code)
	case <-ctx.Done():
		t.Fatal("long poll reply not delivered")
	}
}

func TestPanickingHandler(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	for range 3 {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codePanic, nil, nil))
		require.NoError(t, err)
		assert.Equal(t, remoting.SystemError, resp.Code)
		assert.NotEmpty(t, resp.Remark)
		// The same connection keeps serving.
		resp, err = c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("ok")))
		require.NoError(t, err)
		assert.Equal(t, "ok", string(resp.Body))
	}
	// And so does the server, for new connections.
	c2 := newClient(t, nil)
	resp, err := c2.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("ok2")))
	require.NoError(t, err)
	assert.Equal(t, "ok2", string(resp.Body))
}

func TestRouterUnknownCode(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(4242, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
	assert.Equal(t, " request type 4242 not supported", resp.Remark)
}

func TestRouter(t *testing.T) {
	r := remoting.NewRouter()
	r.Register(30, func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command { return nil })
	r.Register(10, remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "ten")
	}))
	r.Register(20, func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command { return nil })
	assert.Equal(t, []int32{10, 20, 30}, r.Codes())
	assert.PanicsWithValue(t, "remoting: request code 20 registered twice", func() {
		r.Register(20, func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command { return nil })
	})

	ctx := context.Background()
	assert.Equal(t, "ten", r.Handle(ctx, nil, &remoting.Command{Code: 10}).Remark)
	assert.Equal(t, remoting.RequestCodeNotSupported, r.Handle(ctx, nil, &remoting.Command{Code: 99}).Code)

	// Interceptors run in order and the first answer wins.
	var calls []string
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		calls = append(calls, "first")
		return nil
	})
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		calls = append(calls, "second")
		if req.Ext("AccessKey") == "" {
			return remoting.NewResponse(req, remoting.NoPermission, "denied")
		}
		return nil
	})
	assert.Equal(t, remoting.NoPermission, r.Handle(ctx, nil, &remoting.Command{Code: 10}).Code)
	assert.Equal(t, []string{"first", "second"}, calls)
	assert.Equal(t, "ten", r.Handle(ctx, nil, &remoting.Command{Code: 10, ExtFields: map[string]string{"AccessKey": "ak"}}).Remark)
	// Unknown codes pass the interceptors too (authentication first).
	assert.Equal(t, remoting.NoPermission, r.Handle(ctx, nil, &remoting.Command{Code: 99}).Code)
}

func TestPendingFailOnDrop(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	const n = 10
	errs := make(chan error, 2*n)
	for range n {
		go func() {
			_, err := c.Invoke(ctx, addr, remoting.NewRequest(codeBlock, nil, nil))
			errs <- err
		}()
		require.NoError(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeBlock, nil, nil), func(_ *remoting.Command, err error) {
			errs <- err
		}))
	}
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 1 }, "client never connected")
	cp, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	// Wait until the server holds every request, then drop the connection
	// from its side.
	checkFor(t, 5*time.Second, func() bool { return r.blocked.Load() == 2*n }, "requests not all received")
	for _, p := range srv.Peers() {
		p.Close()
	}
	for range 2 * n {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, remoting.ErrPeerClosed)
		case <-ctx.Done():
			t.Fatal("pending calls did not fail when the connection dropped")
		}
	}
	select {
	case <-cp.Done():
	case <-ctx.Done():
		t.Fatal("client peer not done after the drop")
	}
	_, err = cp.Invoke(ctx, remoting.NewRequest(codeEcho, nil, nil))
	assert.ErrorIs(t, err, remoting.ErrPeerClosed)
	assert.ErrorIs(t, cp.InvokeAsync(ctx, remoting.NewRequest(codeEcho, nil, nil), func(*remoting.Command, error) {}), remoting.ErrPeerClosed)
	assert.Error(t, cp.InvokeOneway(ctx, remoting.NewRequest(codeEcho, nil, nil)))

	// The client redials on next use.
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("again")))
	require.NoError(t, err)
	assert.Equal(t, "again", string(resp.Body))
}

func TestInvokeTimeout(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Invoke(ctx, addr, remoting.NewRequest(codeBlock, nil, nil))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	// The connection is still good and a late answer is dropped.
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(codeEcho, nil, []byte("later")))
	require.NoError(t, err)
	assert.Equal(t, "later", string(resp.Body))
}

func TestClientLifecycle(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	c := remoting.NewClient(dialTCP, nil, testLogger(t), remoting.PeerOptions{})
	ctx := ctxFor(t, 10*time.Second)

	// Concurrent first use dials once.
	var wg sync.WaitGroup
	peers := make([]*remoting.Peer, 8)
	for i := range peers {
		wg.Go(func() {
			p, err := c.Peer(ctx, addr)
			assert.NoError(t, err)
			peers[i] = p
		})
	}
	wg.Wait()
	for _, p := range peers {
		assert.Same(t, peers[0], p)
	}
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 1 }, "one connection")

	c.CloseAddr(addr)
	p, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	assert.NotSame(t, peers[0], p, "CloseAddr drops the connection")

	_, err = c.Invoke(ctx, "127.0.0.1:1", remoting.NewRequest(codeEcho, nil, nil))
	assert.Error(t, err, "dial error")

	require.NoError(t, c.Close())
	_, err = c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, nil))
	assert.ErrorIs(t, err, remoting.ErrPeerClosed)
	assert.ErrorIs(t, c.InvokeOneway(ctx, addr, remoting.NewRequest(codeEcho, nil, nil)), remoting.ErrPeerClosed)
	assert.ErrorIs(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeEcho, nil, nil), nil), remoting.ErrPeerClosed)
	require.NoError(t, c.Close(), "second Close")
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 0 }, "server saw the client go")
}

func TestServerClose(t *testing.T) {
	var connects, disconnects atomic.Int32
	r := newTestRouter(t)
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	srv := remoting.NewServer(r, testLogger(t), remoting.ServerOptions{
		OnConnect:    func(*remoting.Peer) { connects.Add(1) },
		OnDisconnect: func(*remoting.Peer) { disconnects.Add(1) },
	})
	srv.Serve(ln)
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	cp, err := c.Peer(ctx, ln.Addr())
	require.NoError(t, err)
	checkFor(t, 5*time.Second, func() bool { return connects.Load() == 1 }, "OnConnect")

	blocked := make(chan error, 1)
	go func() {
		_, err := cp.Invoke(ctx, remoting.NewRequest(codeBlock, nil, nil))
		blocked <- err
	}()
	checkFor(t, 5*time.Second, func() bool { return r.blocked.Load() == 1 }, "request not received")
	// Close cancels the handlers' ctx, so codeBlock returns and Close
	// finishes without waiting for release.
	require.NoError(t, srv.Close(ctx))
	assert.Equal(t, int32(1), disconnects.Load())
	assert.Empty(t, srv.Peers())
	select {
	case err := <-blocked:
		// The handler may answer as it is cancelled, or the drop wins.
		if err != nil {
			assert.ErrorIs(t, err, remoting.ErrPeerClosed)
		}
	case <-ctx.Done():
		t.Fatal("client call not finished after server close")
	}
	_, err = dialTCP(ctx, ln.Addr())
	assert.Error(t, err, "listener still open after Close")

	// Serve on a closed server closes the listener.
	ln2, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	srv.Serve(ln2)
	_, err = ln2.Accept(ctx)
	assert.ErrorIs(t, err, transport.ErrClosed)
}

func TestServerCloseTimeout(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	h := remoting.HandlerFunc(func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		close(entered)
		<-release // ignores ctx on purpose
		return nil
	})
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(t, err)
	srv := remoting.NewServer(h, testLogger(t), remoting.ServerOptions{})
	srv.Serve(ln)
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, c.InvokeOneway(ctx, ln.Addr(), remoting.NewRequest(1, nil, nil)))
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("handler not called")
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, srv.Close(short), context.DeadlineExceeded)
	close(release)
	require.NoError(t, srv.Close(ctx))
}

// failingListener fails every Accept with a non-closed error.
type failingListener struct{ accepts atomic.Int32 }

func (l *failingListener) Accept(ctx context.Context) (transport.Conn, error) {
	l.accepts.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("accept: too many open files")
}
func (l *failingListener) Addr() string { return "127.0.0.1:1" }
func (l *failingListener) Close() error { return nil }

func TestServerAcceptErrorBacksOff(t *testing.T) {
	srv := remoting.NewServer(nil, testLogger(t), remoting.ServerOptions{})
	ln := &failingListener{}
	srv.Serve(ln)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, srv.Close(ctxFor(t, 5*time.Second)))
	// 5+10+20+40+80 ms fit in 200 ms: about six attempts, not thousands.
	assert.Less(t, ln.accepts.Load(), int32(20), "accept errors spin")
	assert.Greater(t, ln.accepts.Load(), int32(1))
}

func TestMaxInFlight(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{Peer: remoting.PeerOptions{MaxInFlight: 2}})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	done := make(chan error, 3)
	for range 2 {
		require.NoError(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeBlock, nil, nil), func(_ *remoting.Command, err error) { done <- err }))
	}
	time.Sleep(50 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := c.Invoke(short, addr, remoting.NewRequest(codeEcho, nil, nil))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a third request was served past MaxInFlight")
}

// TestGarbageRobustness sends garbage on raw connections; the server drops
// each of them and keeps serving well-behaved clients.
func TestGarbageRobustness(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	garbage := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	garbage[0] = 0x7F // a huge declared length, whatever follows
	tests := []struct {
		name      string
		give      []byte
		halfClose bool // close our side after writing
	}{
		{"random bytes", garbage, false},
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false},
		{"2 GiB declared length", be32(0x7FFFFFFF), false},
		{"negative length", be32(0xFFFFFFFF), false},
		{"length below 4", append(be32(2), 0, 0), false},
		{"undecodable header", append(be32(12), append(be32(8), "not json"...)...), false},
		{"unknown serialize type", append(be32(6), append(be32(7<<24|2), "{}"...)...), false},
		{"truncated frame", append(be32(1000), "partial"...), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
			require.NoError(t, err)
			defer raw.Close()
			_, err = raw.Write(tt.give)
			require.NoError(t, err)
			if tt.halfClose {
				require.NoError(t, raw.(*net.TCPConn).CloseWrite())
			}
			// The server closes the connection without answering.
			raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := io.Copy(io.Discard, raw)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("server kept a connection that sent garbage")
			}
			assert.Zero(t, n, "server answered garbage")
		})
	}
	checkFor(t, 5*time.Second, func() bool { return len(srv.Peers()) == 0 }, "garbage connections not dropped")
	c := newClient(t, nil)
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(codeEcho, nil, []byte("still here")))
	require.NoError(t, err)
	assert.Equal(t, "still here", string(resp.Body))
}

func TestRemoteError(t *testing.T) {
	err := &remoting.RemoteError{Code: 17, Remark: "topic not exist"}
	assert.Equal(t, "remoting: CODE: 17 DESC: topic not exist", err.Error())
}

func TestPeerValues(t *testing.T) {
	peers := make(chan *remoting.Peer, 1)
	_, addr := startServer(t, newTestRouter(t), remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	c := newClient(t, nil)
	ctx := ctxFor(t, 5*time.Second)
	cp, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	sp := <-peers
	sp.SetValue("clientID", "c1")
	v, ok := sp.Value("clientID")
	assert.True(t, ok)
	assert.Equal(t, "c1", v)
	_, ok = sp.Value("nope")
	assert.False(t, ok)
	assert.NotEqual(t, cp.ID, sp.ID)
	assert.NotEmpty(t, sp.LocalAddr())
}

func BenchmarkInvoke(b *testing.B) {
	r := remoting.NewRouter()
	r.Register(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(b, err)
	srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	defer srv.Close(context.Background())
	c := remoting.NewClient(dialTCP, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	body := bytes.Repeat([]byte("m"), 1024)
	ext := map[string]string{"topic": "TopicA", "queueId": "1", "properties": "TAGS\x01TagA\x02"}
	ctx := context.Background()
	_, err = c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body))
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
