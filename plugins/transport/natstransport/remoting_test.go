package natstransport_test

// core/remoting over NATS: the shared suite (remotingtest) through an
// embedded nats-server, a NATS server restart under traffic, and the
// round-trip benchmark against QUIC and TCP.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/remotingtest"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const codeEcho = remotingtest.CodeEcho

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

func logger(t testing.TB) *slog.Logger { return remotingtest.Logger(t) }

func ctxFor(t testing.TB, d time.Duration) context.Context { return remotingtest.Context(t, d) }

// natsTransport is NATS through the server cfg names, for remotingtest.
func natsTransport(cfg *natstransport.Config, withLog bool) remotingtest.Transport {
	deps := func(t testing.TB) transport.Deps {
		if !withLog {
			return transport.Deps{}
		}
		return transport.Deps{Logger: logger(t)}
	}
	return remotingtest.Transport{
		Listen: func(t testing.TB) transport.Listener {
			ln, err := natstransport.NewProvider().Listen(context.Background(), "127.0.0.1:0", cfg, deps(t))
			require.NoError(t, err)
			return ln
		},
		Dial: func(t testing.TB) remoting.DialFunc {
			p, d := natstransport.NewProvider(), deps(t)
			return func(ctx context.Context, addr string) (transport.Conn, error) {
				return p.Dial(ctx, addr, cfg, d)
			}
		},
		LargeBody: 2 << 20, // above the default max_payload (1 MiB): split frames
	}
}

// TestRemoting runs the remoting suite through an embedded nats-server.
func TestRemoting(t *testing.T) {
	s := startNATS(t, -1)
	remotingtest.Run(t, natsTransport(natsConfig(s), true))
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
	return remotingtest.Echo(context.TODO(), nil, req)
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
	tr := natsTransport(cfg, true)
	_, addr := remotingtest.StartServer(t, tr, led, remoting.ServerOptions{})
	c := remotingtest.NewClient(t, tr, nil)

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
			// came after, with the transport's reason. One that found its
			// connection already gone dials, and the dialer's NATS
			// connection, closed with its last connection, cannot
			// connect while the server is down.
			assert.True(t, errors.Is(r.err, remoting.ErrPeerClosed) || errors.Is(r.err, natstransport.ErrConnLost) || errors.Is(r.err, nats.ErrNoServers), "in flight at the outage: %v", r.err)
		}
	}
	t.Logf("%d requests answered, %d failed (%d of them in flight at the shutdown), %d answered after the restart", ok, failed, inFlight, okAfter())
	assert.Greater(t, failed, 0, "the outage went unnoticed")
}

// BenchmarkRoundTrip compares remoting Invoke of a 1 KiB send-like request
// over NATS (an embedded server on loopback: two hops), QUIC and TCP
// (remotingtest.BenchmarkRoundTrip).
func BenchmarkRoundTrip(b *testing.B) {
	s := startNATS(b, -1)
	qcfg := quictransport.NewConfig()
	qcfg.InsecureSkipVerify = true
	tcfg := tcp.NewConfig()
	b.Run("nats", func(b *testing.B) { remotingtest.BenchmarkRoundTrip(b, natsTransport(natsConfig(s), false)) })
	b.Run("quic", func(b *testing.B) {
		remotingtest.BenchmarkRoundTrip(b, remotingtest.Transport{
			Listen: func(t testing.TB) transport.Listener {
				ln, err := quictransport.Listen(context.Background(), "127.0.0.1:0", qcfg, transport.Deps{})
				require.NoError(t, err)
				return ln
			},
			Dial: func(testing.TB) remoting.DialFunc {
				return func(ctx context.Context, addr string) (transport.Conn, error) {
					return quictransport.Dial(ctx, addr, qcfg, transport.Deps{})
				}
			},
		})
	})
	b.Run("tcp", func(b *testing.B) {
		remotingtest.BenchmarkRoundTrip(b, remotingtest.Transport{
			Listen: func(t testing.TB) transport.Listener {
				ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcfg, 0)
				require.NoError(t, err)
				return ln
			},
			Dial: func(testing.TB) remoting.DialFunc {
				return func(ctx context.Context, addr string) (transport.Conn, error) { return tcp.Dial(ctx, addr, tcfg, 0) }
			},
		})
	})
}
