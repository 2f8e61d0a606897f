package ha

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// BenchmarkCatchUp: a slave copies b.N 1 KiB messages written while it
// was away (catch-up throughput, MB/s).
func BenchmarkCatchUp(b *testing.B) {
	m, s := masterSlave(b, broker.RoleAsyncMaster)
	s.stop()
	body := []byte(strings.Repeat("x", 1024))
	batch := make([]*message.Ext, 0, 64)
	for i := 0; i < b.N; i++ {
		batch = append(batch, &message.Ext{Message: message.Message{Topic: "Bench", Body: body, Properties: message.Properties{}}, QueueID: int32(i % 4)})
		if len(batch) == cap(batch) || i == b.N-1 {
			_, err := m.b.Put(context.Background(), batch)
			require.NoError(b, err)
			batch = batch[:0]
		}
	}
	_, mx := m.st.LogOffsets()
	b.SetBytes(mx / int64(b.N))
	b.ResetTimer()
	s.start()
	for {
		_, sx := s.st.LogOffsets()
		if sx >= mx {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkSend compares the send round trip of an ASYNC_MASTER and a
// SYNC_MASTER (waits for the slave's confirmation), 16 senders.
func BenchmarkSend(b *testing.B) {
	for _, role := range []string{broker.RoleAsyncMaster, broker.RoleSyncMaster} {
		b.Run(role, func(b *testing.B) {
			m, s := masterSlave(b, role)
			require.Eventually(b, func() bool { return s.ha.Following() }, 10*time.Second, 10*time.Millisecond)
			c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
			defer c.Close()
			body := strings.Repeat("x", 1024)
			var wg sync.WaitGroup
			var next sync.Mutex
			i := 0
			// Sample the master's view of the lag while sending.
			var maxLag, sumLag, samples int64
			done := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				tk := time.NewTicker(time.Millisecond)
				defer tk.Stop()
				for {
					select {
					case <-done:
						return
					case <-tk.C:
						l := m.ha.Lag()
						maxLag = max(maxLag, l)
						sumLag += l
						samples++
					}
				}
			}()
			b.SetBytes(1024)
			b.ResetTimer()
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						next.Lock()
						if i >= b.N {
							next.Unlock()
							return
						}
						i++
						next.Unlock()
						if r := send(b, c, m.addr, "Bench", 0, body); r.Code != remoting.Success {
							b.Errorf("send: code %d %s", r.Code, r.Remark)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(done)
			<-sampled
			if samples > 0 {
				b.ReportMetric(float64(maxLag), "max_lag_bytes")
				b.ReportMetric(float64(sumLag/samples), "mean_lag_bytes")
			}
			_, mx := m.st.LogOffsets()
			require.Eventually(b, func() bool { _, sx := s.st.LogOffsets(); return sx == mx }, 10*time.Second, time.Millisecond)
		})
	}
}
