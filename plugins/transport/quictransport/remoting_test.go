package quictransport_test

// core/remoting over QUIC: the shared suite (remotingtest), a transport
// set serving TCP and QUIC on one port number, and the round-trip
// benchmark against TCP.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/remotingtest"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const codeEcho = remotingtest.CodeEcho

func quicConfig() *quictransport.Config {
	cfg := quictransport.NewConfig()
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.InsecureSkipVerify = true
	return cfg
}

// quicTransport is QUIC on 127.0.0.1 for remotingtest.
func quicTransport(cfg *quictransport.Config, withLog bool) remotingtest.Transport {
	deps := func(t testing.TB) transport.Deps {
		if !withLog {
			return transport.Deps{}
		}
		return transport.Deps{Logger: remotingtest.Logger(t)}
	}
	return remotingtest.Transport{
		Listen: func(t testing.TB) transport.Listener {
			ln, err := quictransport.Listen(context.Background(), "127.0.0.1:0", cfg, deps(t))
			require.NoError(t, err)
			return ln
		},
		Dial: func(t testing.TB) remoting.DialFunc {
			d := deps(t)
			return func(ctx context.Context, addr string) (transport.Conn, error) {
				return quictransport.Dial(ctx, addr, cfg, d)
			}
		},
	}
}

func TestRemoting(t *testing.T) {
	remotingtest.Run(t, quicTransport(quicConfig(), true))
}

// TestTransportSetTCPAndQUIC listens with both transports on one port
// number, as the broker does with `transports: [tcp, quic]`, and dials each
// by scheme.
func TestTransportSetTCPAndQUIC(t *testing.T) {
	log := remotingtest.Logger(t)
	cfgs := map[string]any{"tcp": tcp.NewConfig(), "quic": quicConfig()}
	set := transport.NewSet([]transport.Provider{tcp.NewProvider(), quictransport.NewProvider()}, cfgs, transport.Deps{Logger: log})
	ctx := remotingtest.Context(t, 10*time.Second)
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
	r := remoting.NewRouter()
	r.Register(codeEcho, remotingtest.Echo)
	srv := remoting.NewServer(r, log, remoting.ServerOptions{})
	for _, ln := range lns {
		srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	assert.Equal(t, lns[0].Addr(), lns[1].Addr(), "tcp and quic share the port number")
	c := remoting.NewClient(set.Dial, nil, log, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	for _, addr := range []string{lns[0].Addr(), "tcp://" + lns[0].Addr(), "quic://" + lns[1].Addr()} {
		resp, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte(addr)))
		require.NoError(t, err, addr)
		assert.Equal(t, addr, string(resp.Body))
	}
}

// tcpTransport is TCP on 127.0.0.1, the baseline of the benchmark.
func tcpTransport() remotingtest.Transport {
	cfg := tcp.NewConfig()
	return remotingtest.Transport{
		Listen: func(t testing.TB) transport.Listener {
			ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", cfg, 0)
			require.NoError(t, err)
			return ln
		},
		Dial: func(testing.TB) remoting.DialFunc {
			return func(ctx context.Context, addr string) (transport.Conn, error) { return tcp.Dial(ctx, addr, cfg, 0) }
		},
	}
}

// BenchmarkRoundTrip compares remoting Invoke of a 1 KiB send-like request
// over QUIC and over TCP on loopback (remotingtest.BenchmarkRoundTrip).
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("quic", func(b *testing.B) { remotingtest.BenchmarkRoundTrip(b, quicTransport(quicConfig(), false)) })
	b.Run("tcp", func(b *testing.B) { remotingtest.BenchmarkRoundTrip(b, tcpTransport()) })
}
