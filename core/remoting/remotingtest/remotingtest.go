// Package remotingtest is the suite every transport plugin runs to show
// that core/remoting works over it end to end: concurrent requests matched
// by opaque and served out of order, oneway requests, multi-part bodies,
// requests the server sends to the client over the client's connection,
// and closing either side. transporttest checks the frame contract a
// transport promises; this suite checks what remoting builds on it.
//
//	func TestRemoting(t *testing.T) {
//		remotingtest.Run(t, remotingtest.Transport{
//			Listen: func(t testing.TB) transport.Listener { ... "127.0.0.1:0" ... },
//			Dial:   func(t testing.TB) remoting.DialFunc { ... },
//		})
//	}
//
// Everything the suite starts is stopped before a subtest ends, so callers
// can check for leaks with goleak.VerifyTestMain.
package remotingtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
)

// Request codes the suite's servers answer.
const (
	// CodeEcho answers with the request's extFields and body.
	CodeEcho int32 = 1000
	// CodeSleep echoes after sleepMicros microseconds.
	CodeSleep int32 = 1001
	// CodeOneway echoes and hands the request to the test.
	CodeOneway int32 = 1005
	// CodePing is what the server asks the client.
	CodePing int32 = 2000
)

// Transport is what the suite needs of a transport.
type Transport struct {
	// Listen binds a fresh listener on 127.0.0.1 (port 0). The suite
	// closes it (through the remoting server).
	Listen func(t testing.TB) transport.Listener
	// Dial returns the function a remoting client dials with.
	Dial func(t testing.TB) remoting.DialFunc
	// LargeBody, when positive, is a body size above the transport's own
	// unit (NATS's max_payload): every 50th concurrent request carries
	// one.
	LargeBody int
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, tr Transport) {
	require.NotNil(t, tr.Listen, "Transport.Listen")
	require.NotNil(t, tr.Dial, "Transport.Dial")
	tests := []struct {
		name string
		fn   func(t *testing.T, tr Transport)
	}{
		{"InvokeByOpaque", testInvokeByOpaque},
		{"OnewayAndBodyParts", testOnewayAndBodyParts},
		{"ServerInitiated", testServerInitiated},
		{"ServerClose", testServerClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, tr) })
	}
}

// Logger returns a logger writing to t.Log (silent once t has ended).
func Logger(t testing.TB) *slog.Logger {
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

// Context returns a context cancelled after d or when t ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Echo answers a request with its extFields and body.
func Echo(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

// router answers CodeEcho, CodeSleep (tracking how many run at once) and
// CodeOneway (delivered to oneway).
type router struct {
	*remoting.Router
	inFlight, maxSeen atomic.Int32
	oneway            chan *remoting.Command
}

func newRouter() *router {
	r := &router{Router: remoting.NewRouter(), oneway: make(chan *remoting.Command, 16)}
	r.Register(CodeEcho, Echo)
	r.Register(CodeSleep, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		n := r.inFlight.Add(1)
		defer r.inFlight.Add(-1)
		for m := r.maxSeen.Load(); n > m && !r.maxSeen.CompareAndSwap(m, n); m = r.maxSeen.Load() {
		}
		d, _ := strconv.Atoi(req.Ext("sleepMicros"))
		select {
		case <-time.After(time.Duration(d) * time.Microsecond):
		case <-ctx.Done():
		}
		return Echo(ctx, p, req)
	})
	r.Register(CodeOneway, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		select {
		case r.oneway <- req:
		case <-ctx.Done():
		}
		return Echo(ctx, p, req)
	})
	return r
}

// StartServer serves h over a listener of tr; the server is closed when
// the test ends.
func StartServer(t testing.TB, tr Transport, h remoting.Handler, opts remoting.ServerOptions) (*remoting.Server, string) {
	t.Helper()
	ln := tr.Listen(t)
	require.NotNil(t, ln, "Transport.Listen")
	srv := remoting.NewServer(h, Logger(t), opts)
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Close(ctx), "server close")
	})
	return srv, ln.Addr()
}

// NewClient returns a client dialling with tr, closed when the test ends.
func NewClient(t testing.TB, tr Transport, h remoting.Handler) *remoting.Client {
	c := remoting.NewClient(tr.Dial(t), h, Logger(t), remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// testInvokeByOpaque sends 200 concurrent requests on one connection; the
// server answers them out of order and each caller gets its own answer.
func testInvokeByOpaque(t *testing.T, tr Transport) {
	r := newRouter()
	_, addr := StartServer(t, tr, r, remoting.ServerOptions{})
	c := NewClient(t, tr, nil)
	ctx := Context(t, 30*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			size := rand.IntN(8 << 10)
			if tr.LargeBody > 0 && i%50 == 0 {
				size = tr.LargeBody + i
			}
			body := bytes.Repeat([]byte{byte(i)}, size)
			req := remoting.NewRequest(CodeSleep, map[string]string{"i": strconv.Itoa(i), "sleepMicros": strconv.Itoa(rand.IntN(20000))}, body)
			resp, err := c.Invoke(ctx, addr, req)
			if err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			if resp.Opaque != req.Opaque || resp.Ext("i") != strconv.Itoa(i) || !bytes.Equal(resp.Body, body) || !resp.IsResponse() {
				errs <- fmt.Errorf("request %d got another answer (opaque %d, i %q, %d-byte body)", i, resp.Opaque, resp.Ext("i"), len(resp.Body))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Greater(t, r.maxSeen.Load(), int32(1), "requests on one connection were not served concurrently")
}

// testOnewayAndBodyParts: a oneway request reaches its handler, and a
// response written from several body parts (a pull answer) arrives whole.
func testOnewayAndBodyParts(t *testing.T, tr Transport) {
	r := newRouter()
	big := bytes.Repeat([]byte("z"), 3<<20)
	r.Register(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.BodyParts = [][]byte{[]byte("record-1;"), {}, big}
		return resp
	})
	_, addr := StartServer(t, tr, r, remoting.ServerOptions{})
	c := NewClient(t, tr, nil)
	ctx := Context(t, 20*time.Second)
	require.NoError(t, c.InvokeOneway(ctx, addr, remoting.NewRequest(CodeOneway, nil, []byte("fire"))))
	select {
	case got := <-r.oneway:
		assert.True(t, got.IsOneway())
		assert.Equal(t, "fire", string(got.Body))
	case <-ctx.Done():
		t.Fatal("oneway request not delivered")
	}
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, nil, nil))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(append([]byte("record-1;"), big...), resp.Body), "body parts joined")
}

// testServerInitiated: the server calls the client (transaction
// check-back, consumer ids changed) over the client's own connection,
// while the client calls the server; a code the client does not serve is
// answered REQUEST_CODE_NOT_SUPPORTED; the client closing ends the
// server's peer.
func testServerInitiated(t *testing.T, tr Transport) {
	peers := make(chan *remoting.Peer, 1)
	srv, addr := StartServer(t, tr, newRouter(), remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	ch := remoting.NewRouter()
	ch.Register(CodePing, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = append([]byte("pong:"), req.Body...)
		return resp
	})
	c := NewClient(t, tr, ch)
	ctx := Context(t, 20*time.Second)
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
	assert.Equal(t, cp.RemoteAddr(), sp.LocalAddr())

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			resp, err := sp.Invoke(ctx, remoting.NewRequest(CodePing, nil, []byte(strconv.Itoa(i))))
			if assert.NoError(t, err) {
				assert.Equal(t, "pong:"+strconv.Itoa(i), string(resp.Body))
			}
		})
		wg.Go(func() {
			resp, err := c.Invoke(ctx, addr, remoting.NewRequest(CodeEcho, nil, []byte(strconv.Itoa(i))))
			if assert.NoError(t, err) {
				assert.Equal(t, strconv.Itoa(i), string(resp.Body))
			}
		})
	}
	wg.Wait()
	resp, err := sp.Invoke(ctx, remoting.NewRequest(4321, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)

	c.Close()
	select {
	case <-sp.Done():
	case <-ctx.Done():
		t.Fatal("the server's peer did not end after the client closed")
	}
}

// testServerClose: closing the server fails the client's pending call
// with remoting.ErrPeerClosed.
func testServerClose(t *testing.T, tr Transport) {
	r := newRouter()
	srv, addr := StartServer(t, tr, r, remoting.ServerOptions{})
	c := NewClient(t, tr, nil)
	ctx := Context(t, 20*time.Second)
	_, err := c.Invoke(ctx, addr, remoting.NewRequest(CodeEcho, nil, nil))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, addr, remoting.NewRequest(CodeSleep, map[string]string{"sleepMicros": "5000000"}, nil))
		done <- err
	}()
	require.Eventually(t, func() bool { return r.inFlight.Load() > 0 }, 10*time.Second, time.Millisecond, "request not served")
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Close(cctx))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, remoting.ErrPeerClosed)
	case <-ctx.Done():
		t.Fatal("pending call not failed")
	}
}

// BenchmarkRoundTrip measures remoting Invoke of a 1 KiB send-like request
// (answered with a header only) over tr, with GOMAXPROCS and
// 16×GOMAXPROCS parallel callers on one connection.
func BenchmarkRoundTrip(b *testing.B, tr Transport) {
	r := remoting.NewRouter()
	r.Register(CodeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%dxGOMAXPROCS", par), func(b *testing.B) {
			ln := tr.Listen(b)
			srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
			srv.Serve(ln)
			defer srv.Close(context.Background())
			c := remoting.NewClient(tr.Dial(b), nil, nil, remoting.PeerOptions{})
			defer c.Close()
			body := bytes.Repeat([]byte("m"), 1024)
			ext := map[string]string{"topic": "TopicA", "queueId": "1", "properties": "TAGS\x01TagA\x02"}
			ctx := context.Background()
			_, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(CodeEcho, ext, body))
			require.NoError(b, err)
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(CodeEcho, ext, body)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
