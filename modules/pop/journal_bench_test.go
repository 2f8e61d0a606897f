package pop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkJournalAck acks b.N received messages from c goroutines at
// once (the gRPC AckMessage path without the network) on a real journal
// file with its fsyncs, and reports acks/s and journal fsyncs per ack.
func BenchmarkJournalAck(b *testing.B) {
	for _, c := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", c), func(b *testing.B) {
			n := newNode(b, engines[0])
			n.topic("T", 4)
			for i := 0; i < b.N; i++ {
				n.put("T", int32(i%4), "", fmt.Sprint("m", i))
			}
			var handles []string
			for len(handles) < b.N {
				got := n.receive("G", "T", nil, 32, time.Hour)
				require.NotEmpty(b, got)
				for _, r := range got {
					handles = append(handles, r.Handle)
				}
			}
			ctx := context.Background()
			syncs0 := n.s.j.syncs.Load()
			work := make(chan string, len(handles))
			for _, h := range handles {
				work <- h
			}
			close(work)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < c; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for h := range work {
						if err := n.s.Ack(ctx, "G", "T", h); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "acks/s")
			b.ReportMetric(float64(n.s.j.syncs.Load()-syncs0)/float64(b.N), "fsyncs/ack")
			require.Equal(b, 0, n.s.InFlight("G", "T"))
		})
	}
}
