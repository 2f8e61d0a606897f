package natstransport_test

// core/remoting over NATS: request/response, server-initiated requests,
// a NATS server restart under traffic, and the round-trip benchmark
// against TCP.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const (
	codeEcho  int32 = 1000
	codeSleep int32 = 1001
	codePing  int32 = 2000
)

func startNATS(t testing.TB, port int) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready")
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func natsConfig(s *server.Server) *natstransport.Config {
	cfg := natstransport.NewConfig()
	cfg.URL = "nats://" + s.Addr().String()
	cfg.ConnectTimeout = 5 * time.Second
	cfg.ReconnectWait = 20 * time.Millisecond
	return cfg
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

func logger(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func echo(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

func newRouter() *remoting.Router {
	r := remoting.NewRouter()
	r.RegisterFunc(codeEcho, echo)
	r.RegisterFunc(codeSleep, func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		d, _ := strconv.Atoi(req.Ext("sleepMicros"))
		select {
		case <-time.After(time.Duration(d) * time.Microsecond):
		case <-ctx.Done():
		}
		return echo(ctx, p, req)
	})
	return r
}

// startServer serves h over NATS on a fresh address.
func startServer(t testing.TB, cfg *natstransport.Config, h remoting.Handler, opts remoting.ServerOptions) (*remoting.Server, string) {
	t.Helper()
	p := natstransport.NewProvider()
	ln, err := p.Listen(context.Background(), "127.0.0.1:0", cfg, transport.Deps{Logger: logger(t)})
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

func newClient(t testing.TB, cfg *natstransport.Config, h remoting.Handler) *remoting.Client {
	p := natstransport.NewProvider()
	log := logger(t)
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return p.Dial(ctx, addr, cfg, transport.Deps{Logger: log})
	}, h, log, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRemotingInvoke sends 200 concurrent requests on one connection, some
// with bodies above NATS's max_payload; each caller gets its own answer.
func TestRemotingInvoke(t *testing.T) {
	s := startNATS(t, -1)
	cfg := natsConfig(s)
	_, addr := startServer(t, cfg, newRouter(), remoting.ServerOptions{})
	c := newClient(t, cfg, nil)
	ctx := ctxFor(t, 30*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			size := rand.IntN(8 << 10)
			if i%50 == 0 {
				size = 2<<20 + i
			}
			body := bytes.Repeat([]byte{byte(i)}, size)
			req := remoting.NewRequest(codeSleep, map[string]string{"i": strconv.Itoa(i), "sleepMicros": strconv.Itoa(rand.IntN(20000))}, body)
			resp, err := c.Invoke(ctx, addr, req)
			if err != nil {
				errs <- err
				return
			}
			if resp.Opaque != req.Opaque || resp.Ext("i") != strconv.Itoa(i) || !bytes.Equal(resp.Body, body) {
				errs <- fmt.Errorf("request %d got a wrong answer", i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

// TestRemotingServerInitiated: the server calls the client (transaction
// check-back, consumer ids changed) on the client's own subject.
func TestRemotingServerInitiated(t *testing.T) {
	s := startNATS(t, -1)
	cfg := natsConfig(s)
	peers := make(chan *remoting.Peer, 1)
	srv, addr := startServer(t, cfg, newRouter(), remoting.ServerOptions{OnConnect: func(p *remoting.Peer) { peers <- p }})
	ch := remoting.NewRouter()
	ch.RegisterFunc(codePing, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = append([]byte("pong:"), req.Body...)
		return resp
	})
	c := newClient(t, cfg, ch)
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
	// The client closing reaches the server as a goodbye.
	c.Close()
	select {
	case <-sp.Done():
	case <-ctx.Done():
		t.Fatal("server peer not closed after the client left")
	}
}

// ledger is an echo server that records every request it acknowledged.
type ledger struct {
	mu    sync.Mutex
	acked map[string]bool
}

func (l *ledger) Handle(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	l.mu.Lock()
	l.acked[req.Ext("id")] = true
	l.mu.Unlock()
	return echo(context.TODO(), nil, req)
}

// TestReconnectUnderTraffic restarts the NATS server (same port) while 8
// callers send without pause. Requests in flight then fail fast with a
// clear error, later ones succeed on new connections, and every answer a
// caller got is in the server's ledger.
func TestReconnectUnderTraffic(t *testing.T) {
	s := startNATS(t, -1)
	port := s.Addr().(*net.TCPAddr).Port
	cfg := natsConfig(s)
	led := &ledger{acked: map[string]bool{}}
	_, addr := startServer(t, cfg, led, remoting.ServerOptions{})
	c := newClient(t, cfg, nil)

	type result struct {
		id         string
		start, end time.Time
		err        error
	}
	var (
		mu      sync.Mutex
		results []result
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, map[string]string{"id": id}, []byte(id)))
				cancel()
				if err == nil && (resp.Ext("id") != id || string(resp.Body) != id) {
					err = fmt.Errorf("wrong answer for %s", id)
				}
				mu.Lock()
				results = append(results, result{id, start, time.Now(), err})
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // as a client backs off
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	down := time.Now()
	s.Shutdown()
	s.WaitForShutdown()
	time.Sleep(200 * time.Millisecond)
	up := time.Now()
	startNATS(t, port)
	// Traffic goes on after the restart.
	okAfter := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range results {
			if r.err == nil && r.start.After(up) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return okAfter() >= 200 }, 15*time.Second, 20*time.Millisecond, "no traffic after the NATS restart")
	stop.Store(true)
	wg.Wait()

	var ok, failed, inFlight int
	for _, r := range results {
		if r.err == nil {
			ok++
			led.mu.Lock()
			assert.True(t, led.acked[r.id], "answer for %s but the server never acknowledged it", r.id)
			led.mu.Unlock()
			continue
		}
		failed++
		// Failures belong to the outage: they started before the server
		// was back, plus a short settling time for reconnecting.
		assert.True(t, r.start.Before(up.Add(3*time.Second)), "request %s started %v after the restart and failed: %v", r.id, r.start.Sub(up), r.err)
		assert.Less(t, r.end.Sub(r.start), 3*time.Second, "request %s failed slowly: %v", r.id, r.err)
		assert.False(t, errors.Is(r.err, context.DeadlineExceeded), "request %s timed out instead of failing fast: %v", r.id, r.err)
		if r.start.Before(down) {
			inFlight++
			// The call fails with the peer (remoting) or, when its write
			// came after, with the transport's reason.
			assert.True(t, errors.Is(r.err, remoting.ErrPeerClosed) || errors.Is(r.err, natstransport.ErrConnLost), "in flight at the outage: %v", r.err)
		}
	}
	t.Logf("%d requests answered, %d failed (%d of them in flight at the shutdown), %d answered after the restart", ok, failed, inFlight, okAfter())
	assert.Greater(t, failed, 0, "the outage went unnoticed")
}

// BenchmarkRoundTrip compares remoting Invoke of a 1 KiB send-like request
// over NATS (an embedded server on loopback: two hops), QUIC and TCP, with
// GOMAXPROCS and 16×GOMAXPROCS parallel callers on one connection.
func BenchmarkRoundTrip(b *testing.B) {
	r := remoting.NewRouter()
	r.RegisterFunc(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	s := startNATS(b, -1)
	ncfg := natsConfig(s)
	tcfg := tcp.NewConfig()
	qcfg := quictransport.NewConfig()
	qcfg.InsecureSkipVerify = true
	for _, tt := range []struct {
		name   string
		listen func() (transport.Listener, error)
		dial   func() remoting.DialFunc
	}{
		{"nats", func() (transport.Listener, error) {
			return natstransport.NewProvider().Listen(context.Background(), "127.0.0.1:0", ncfg, transport.Deps{})
		}, func() remoting.DialFunc {
			p := natstransport.NewProvider()
			return func(ctx context.Context, addr string) (transport.Conn, error) {
				return p.Dial(ctx, addr, ncfg, transport.Deps{})
			}
		}},
		{"quic", func() (transport.Listener, error) {
			return quictransport.Listen(context.Background(), "127.0.0.1:0", qcfg, transport.Deps{})
		}, func() remoting.DialFunc {
			return func(ctx context.Context, addr string) (transport.Conn, error) {
				return quictransport.Dial(ctx, addr, qcfg, transport.Deps{})
			}
		}},
		{"tcp", func() (transport.Listener, error) {
			return tcp.Listen(context.Background(), "127.0.0.1:0", tcfg, 0)
		}, func() remoting.DialFunc {
			return func(ctx context.Context, addr string) (transport.Conn, error) {
				return tcp.Dial(ctx, addr, tcfg, 0)
			}
		}},
	} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%dxGOMAXPROCS", tt.name, par), func(b *testing.B) {
				ln, err := tt.listen()
				require.NoError(b, err)
				srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
				srv.Serve(ln)
				defer srv.Close(context.Background())
				c := remoting.NewClient(tt.dial(), nil, nil, remoting.PeerOptions{})
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
