package e2e

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

func benchEnv(b *testing.B, s scheme) (*producer.Producer, string) {
	b.Helper()
	sets := []string{"log.level=warn"}
	if s == quicScheme {
		sets = append(sets, "transports=tcp,quic")
	}
	srv := testserver.StartDev(b, testserver.Options{Sets: sets})
	ns := srv.Namesrv
	if s == quicScheme {
		ns = "quic://" + ns
	}
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer(transports.WithInsecureQUIC()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	p, err := producer.New(c, uniq("BPG"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Shutdown(context.Background()) })
	topic := uniq("Bench")
	if _, err := p.SendSync(context.Background(), client.NewMessage(topic, []byte("warm-up"))); err != nil {
		b.Fatal(err)
	}
	return p, topic
}

var body1K = bytes.Repeat([]byte("x"), 1024)

// BenchmarkProduceSync: sync sends of 1 KiB, b.SetParallelism(4) callers
// per CPU in flight at once.
func BenchmarkProduceSync(b *testing.B) {
	for _, s := range []scheme{tcpScheme, quicScheme} {
		b.Run(string(s), func(b *testing.B) {
			p, topic := benchEnv(b, s)
			b.SetBytes(1024)
			b.SetParallelism(4)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.SendSync(context.Background(), client.NewMessage(topic, body1K)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu.report(b)
		})
	}
}

// BenchmarkProduceSyncSerial: one sync send at a time (latency bound).
func BenchmarkProduceSyncSerial(b *testing.B) {
	for _, s := range []scheme{tcpScheme, quicScheme} {
		b.Run(string(s), func(b *testing.B) {
			p, topic := benchEnv(b, s)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			defer cpu.report(b)
			for i := 0; i < b.N; i++ {
				if _, err := p.SendSync(context.Background(), client.NewMessage(topic, body1K)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceAsync: async sends of 1 KiB, at most 256 in flight,
// from one goroutine (one producer of bench/peers' workload 1). cpu-µs/op
// is this process's CPU per message: the client's, as the broker runs in
// its own process.
func BenchmarkProduceAsync(b *testing.B) {
	for _, s := range []scheme{tcpScheme, quicScheme} {
		b.Run(string(s), func(b *testing.B) {
			p, topic := benchEnv(b, s)
			b.SetBytes(1024)
			sem := make(chan struct{}, 256)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				sem <- struct{}{}
				wg.Add(1)
				err := p.SendAsync(context.Background(), func(_ context.Context, _ *client.SendResult, err error) {
					if err != nil {
						b.Error(err)
					}
					<-sem
					wg.Done()
				}, client.NewMessage(topic, body1K))
				if err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			b.StopTimer()
			cpu.report(b)
		})
	}
}
