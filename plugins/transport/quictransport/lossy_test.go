package quictransport_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// TestLossyCompare measures remoting Invoke over TCP and QUIC with 32
// callers in flight, 1 KiB bodies, for QUIVER_LOSSY_SECONDS each. It is
// meant to run in a network namespace whose loopback drops packets:
//
//	go test -c -o /tmp/qt.test ./plugins/transport/quictransport
//	unshare -n sh -c 'ip link set lo up &&
//	  iptables -A INPUT -m statistic --mode random --probability 0.05 -j DROP &&
//	  QUIVER_LOSSY_SECONDS=10 /tmp/qt.test -test.run TestLossyCompare -test.v'
func TestLossyCompare(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_LOSSY_SECONDS"))
	if secs <= 0 {
		t.Skip("set QUIVER_LOSSY_SECONDS to run (see the comment for the namespace set-up)")
	}
	r := remoting.NewRouter()
	r.Register(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	tcfg := tcp.NewConfig()
	qcfg := quicConfig()
	qcfg.WriteTimeout = time.Minute
	for _, tt := range []struct {
		name   string
		listen func() (transport.Listener, error)
		dial   remoting.DialFunc
	}{
		{"tcp", func() (transport.Listener, error) {
			return tcp.Listen(context.Background(), "127.0.0.1:0", tcfg, 0)
		}, func(ctx context.Context, addr string) (transport.Conn, error) {
			return tcp.Dial(ctx, addr, tcfg, 0)
		}},
		{"quic", func() (transport.Listener, error) {
			return quictransport.Listen(context.Background(), "127.0.0.1:0", qcfg, transport.Deps{})
		}, func(ctx context.Context, addr string) (transport.Conn, error) {
			return quictransport.Dial(ctx, addr, qcfg, transport.Deps{})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := tt.listen()
			require.NoError(t, err)
			srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
			srv.Serve(ln)
			defer srv.Close(context.Background())
			c := remoting.NewClient(tt.dial, nil, nil, remoting.PeerOptions{})
			defer c.Close()
			body := bytes.Repeat([]byte("m"), 1024)
			ext := map[string]string{"topic": "TopicA", "queueId": "1"}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body))
			cancel()
			require.NoError(t, err)
			const callers = 32
			stop := time.Now().Add(time.Duration(secs) * time.Second)
			var mu sync.Mutex
			var lat []time.Duration
			var fails atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					var mine []time.Duration
					for time.Now().Before(stop) {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						start := time.Now()
						_, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body))
						cancel()
						if err != nil {
							fails.Add(1)
							continue
						}
						mine = append(mine, time.Since(start))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			slices.Sort(lat)
			q := func(p float64) time.Duration {
				if len(lat) == 0 {
					return 0
				}
				return lat[min(len(lat)-1, int(p*float64(len(lat))))]
			}
			t.Logf("%s: %d ok, %d failed, %.0f req/s, p50 %v p99 %v p999 %v max %v", tt.name, len(lat), fails.Load(),
				float64(len(lat))/float64(secs), q(0.50), q(0.99), q(0.999), q(1))
		})
	}
}
