package tcp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/remotingtest"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

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

// TestRemoting runs core/remoting's end-to-end suite over TCP.
func TestRemoting(t *testing.T) { remotingtest.Run(t, tcpTransport()) }

// BenchmarkRoundTrip: remoting Invoke of a 1 KiB send-like request over
// TCP on loopback.
func BenchmarkRoundTrip(b *testing.B) { remotingtest.BenchmarkRoundTrip(b, tcpTransport()) }
