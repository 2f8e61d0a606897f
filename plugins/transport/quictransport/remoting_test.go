package quictransport_test

// End-to-end tests of core/remoting over QUIC, like core/remoting's own
// tests over TCP, and the round-trip benchmark against TCP.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const (
	codeEcho  int32 = 1000
	codeSleep int32 = 1001
	codeOne   int32 = 1005
	codePing  int32 = 2000
)

func logger(t testing.TB) *slog.Logger {
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

func quicConfig() *quictransport.Config {
	cfg := quictransport.NewConfig()
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.InsecureSkipVerify = true
	return cfg
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// router answers codeEcho, codeSleep (after sleepMicros, tracking how many
// run at once) and codeOne (oneway, delivered to oneway).
type router struct {
	*remoting.Router
	inFlight, maxSeen atomic.Int32
	oneway            chan *remoting.Command
}

func echo(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

func newRouter() *router {
	r := &router{Router: remoting.NewRouter(), oneway: make(chan *remoting.Command, 16)}
	r.RegisterFunc(codeEcho, echo)
	r.RegisterFunc(codeSleep, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		n := r.inFlight.Add(1)
		defer r.inFlight.Add(-1)
		for m := r.maxSeen.Load(); n > m && !r.maxSeen.CompareAndSwap(m, n); m = r.maxSeen.Load() {
		}
		d, _ := strconv.Atoi(req.Ext("sleepMicros"))
		select {
		case <-time.After(time.Duration(d) * time.Microsecond):
		case <-ctx.Done():
		}
		return echo(ctx, p, req)
	})
	r.RegisterFunc(codeOne, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		r.oneway <- req
		return echo(ctx, p, req)
	})
	return r
}

func startServer(t testing.TB, h remoting.Handler, opts remoting.ServerOptions) (*remoting.Server, string) {
	t.Helper()
	ln, err := quictransport.Listen(context.Background(), "127.0.0.1:0", quicConfig(), transport.Deps{Logger: logger(t)})
	require.NoError(t, err)
	srv := remoting.NewServer(h, logger(t), opts)
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Close(ctx), "server close")
	})
	return srv, ln.Addr()
}

func dialQUIC(t testing.TB) remoting.DialFunc {
	log := logger(t)
	return func(ctx context.Context, addr string) (transport.Conn, error) {
		return quictransport.Dial(ctx, addr, quicConfig(), transport.Deps{Logger: log})
	}
}

func newClient(t testing.TB, h remoting.Handler) *remoting.Client {
	c := remoting.NewClient(dialQUIC(t), h, logger(t), remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRemotingInvokeByOpaque sends 200 concurrent requests on one
// connection; the server answers them out of order and each caller gets
// its own answer.
func TestRemotingInvokeByOpaque(t *testing.T) {
	r := newRouter()
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			body := bytes.Repeat([]byte{byte(i)}, rand.IntN(8<<10))
			req := remoting.NewRequest(codeSleep, map[string]string{"i": strconv.Itoa(i), "sleepMicros": strconv.Itoa(rand.IntN(20000))}, body)
			resp, err := c.Invoke(ctx, addr, req)
			if err != nil {
				errs <- err
				return
			}
			if resp.Opaque != req.Opaque || resp.Ext("i") != strconv.Itoa(i) || !bytes.Equal(resp.Body, body) || !resp.IsResponse() {
				errs <- fmt.Errorf("request %d got the answer %+v", i, resp)
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

func TestRemotingOnewayAndBodyParts(t *testing.T) {
	r := newRouter()
	big := bytes.Repeat([]byte("z"), 3<<20)
	r.RegisterFunc(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.BodyParts = [][]byte{[]byte("record-1;"), {}, big}
		return resp
	})
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, c.InvokeOneway(ctx, addr, remoting.NewRequest(codeOne, nil, []byte("fire"))))
	select {
	case got := <-r.oneway:
		assert.True(t, got.IsOneway())
		assert.Equal(t, "fire", string(got.Body))
	case <-ctx.Done():
		t.Fatal("oneway request not delivered")
	}
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, nil, nil))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(append([]byte("record-1;"), big...), resp.Body))
}

// TestRemotingServerInitiated: the server calls the client (transaction
// check-back, consumer ids changed) over the client's QUIC connection.
func TestRemotingServerInitiated(t *testing.T) {
	peers := make(chan *remoting.Peer, 1)
	srv, addr := startServer(t, newRouter(), remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	ch := remoting.NewRouter()
	ch.RegisterFunc(codePing, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = append([]byte("pong:"), req.Body...)
		return resp
	})
	c := newClient(t, ch)
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
	assert.Equal(t, cp.RemoteAddr(), sp.LocalAddr())

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			resp, err := sp.Invoke(ctx, remoting.NewRequest(codePing, nil, []byte(strconv.Itoa(i))))
			if assert.NoError(t, err) {
				assert.Equal(t, "pong:"+strconv.Itoa(i), string(resp.Body))
			}
		})
		wg.Go(func() {
			resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte(strconv.Itoa(i))))
			if assert.NoError(t, err) {
				assert.Equal(t, strconv.Itoa(i), string(resp.Body))
			}
		})
	}
	wg.Wait()
	resp, err := sp.Invoke(ctx, remoting.NewRequest(4321, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
}

// TestRemotingServerClose: closing the server fails the client's pending
// calls and the client redials a new server.
func TestRemotingServerClose(t *testing.T) {
	r := newRouter()
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	_, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, nil))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, addr, remoting.NewRequest(codeSleep, map[string]string{"sleepMicros": "5000000"}, nil))
		done <- err
	}()
	for r.inFlight.Load() == 0 { // the request reached its handler
		require.NoError(t, ctx.Err(), "request not served")
		time.Sleep(time.Millisecond)
	}
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

// TestTransportSetTCPAndQUIC listens with both transports on one port
// number, as the broker does with `transports: [tcp, quic]`, and dials each
// by scheme.
func TestTransportSetTCPAndQUIC(t *testing.T) {
	cfgs := map[string]any{"tcp": tcp.NewConfig(), "quic": quicConfig()}
	set := transport.NewSet([]transport.Provider{tcp.NewProvider(), quictransport.NewProvider()}, cfgs, transport.Deps{Logger: logger(t)})
	ctx := ctxFor(t, 10*time.Second)
	var lns []transport.Listener
	for range 5 { // the free TCP port may be taken on UDP; try another
		probe, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := probe.Addr().String()
		probe.Close()
		if lns, err = set.Listen(ctx, addr); err == nil {
			break
		}
	}
	require.Len(t, lns, 2)
	srv := remoting.NewServer(newRouter(), logger(t), remoting.ServerOptions{})
	for _, ln := range lns {
		srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	assert.Equal(t, lns[0].Addr(), lns[1].Addr(), "tcp and quic share the port number")
	c := remoting.NewClient(set.Dial, nil, logger(t), remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	for _, addr := range []string{lns[0].Addr(), "tcp://" + lns[0].Addr(), "quic://" + lns[1].Addr()} {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte(addr)))
		require.NoError(t, err, addr)
		assert.Equal(t, addr, string(resp.Body))
	}
}

// BenchmarkRoundTrip compares remoting Invoke of a 1 KiB send-like request
// over QUIC and over TCP on loopback, with GOMAXPROCS and 16×GOMAXPROCS
// parallel callers on one connection.
func BenchmarkRoundTrip(b *testing.B) {
	r := remoting.NewRouter()
	r.RegisterFunc(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	tcfg := tcp.NewConfig()
	qcfg := quicConfig()
	for _, tt := range []struct {
		name   string
		listen func() (transport.Listener, error)
		dial   remoting.DialFunc
	}{
		{"quic", func() (transport.Listener, error) {
			return quictransport.Listen(context.Background(), "127.0.0.1:0", qcfg, transport.Deps{})
		}, func(ctx context.Context, addr string) (transport.Conn, error) {
			return quictransport.Dial(ctx, addr, qcfg, transport.Deps{})
		}},
		{"tcp", func() (transport.Listener, error) {
			return tcp.Listen(context.Background(), "127.0.0.1:0", tcfg, 0)
		}, func(ctx context.Context, addr string) (transport.Conn, error) {
			return tcp.Dial(ctx, addr, tcfg, 0)
		}},
	} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%dxGOMAXPROCS", tt.name, par), func(b *testing.B) {
				ln, err := tt.listen()
				require.NoError(b, err)
				srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
				srv.Serve(ln)
				defer srv.Close(context.Background())
				c := remoting.NewClient(tt.dial, nil, nil, remoting.PeerOptions{})
				defer c.Close()
				body := bytes.Repeat([]byte("m"), 1024)
				ext := map[string]string{"topic": "TopicA", "queueId": "1", "properties": "TAGS\x01TagA\x02"}
				ctx := context.Background()
				_, err = c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body))
				require.NoError(b, err)
				b.ReportAllocs()
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
