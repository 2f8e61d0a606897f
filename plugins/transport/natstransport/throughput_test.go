package natstransport_test

import (
	"context"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// TestBrokerThroughput (NATS_BENCH=1) measures synchronous sends of 1 KiB
// messages through one `mq dev` serving tcp, quic and nats at once, by 16
// producers for 5 s per transport: messages per second and latency
// percentiles. Figures: docs/lab/BENCHMARKS.md.
func TestBrokerThroughput(t *testing.T) {
	if os.Getenv("NATS_BENCH") == "" {
		t.Skip("set NATS_BENCH=1")
	}
	ns := startNATS(t, -1)
	url := "nats://" + ns.Addr().String()
	dev := startNATSDev(t, url, "transports=tcp,quic,nats")
	ncfg := natstransport.NewConfig()
	ncfg.URL = url
	qcfg := quictransport.NewConfig()
	qcfg.InsecureSkipVerify = true
	set := transport.NewSet([]transport.Provider{tcp.NewProvider(), quictransport.NewProvider(), natstransport.NewProvider()},
		map[string]any{"tcp": tcp.NewConfig(), "quic": qcfg, "nats": ncfg}, transport.Deps{Logger: logger(t)})
	dial := func(ctx context.Context, addr string) (transport.Conn, error) { return set.Dial(ctx, addr) }
	topic := uniq("Bench")
	dev.createTopic(t, topic, 8)
	body := make([]byte, 1024)
	const producers, dur = 16, 5 * time.Second
	for _, scheme := range []string{"tcp", "quic", "nats"} {
		c, err := client.New(client.WithNameServers(scheme+"://"+dev.ns), client.WithDialer(dial))
		require.NoError(t, err)
		p, err := producer.New(c, uniq("PG"))
		require.NoError(t, err)
		_, err = p.SendSync(ctxFor(t, 10*time.Second), client.NewMessage(topic, body)) // warm up: route, connection
		require.NoError(t, err)
		var mu sync.Mutex
		var lat []time.Duration
		var errs int
		var wg sync.WaitGroup
		end := time.Now().Add(dur)
		start := time.Now()
		for range producers {
			wg.Go(func() {
				var mine []time.Duration
				for time.Now().Before(end) {
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := p.SendSync(ctx, client.NewMessage(topic, body))
					cancel()
					if err != nil {
						mu.Lock()
						errs++
						mu.Unlock()
						continue
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		p.Shutdown(context.Background())
		c.Close()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Microsecond) }
		t.Logf("%-5s %8.0f msg/s  p50 %v  p99 %v  max %v  errors %d", scheme, float64(len(lat))/elapsed.Seconds(), q(0.5), q(0.99), q(1), errs)
	}
}
