package quictransport

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPullConn is BenchmarkPull below remoting: 4 pullers each write
// a small request frame and wait for a 33 KiB answer (a header and 32
// parts of 1 KiB) on one connection, and the connection's packet
// counters are reported per answer: packets sent by the server, lost
// (declared lost by its loss detection), and received by it (ACKs mostly),
// with the server's congestion window and smoothed RTT at the end, and
// the process's CPU time per message (both ends).
func BenchmarkPullConn(b *testing.B) {
	ln := listen(b, testConfig(), 0)
	client, server := pair(b, ln, testConfig(), 0)
	ctx := ctxFor(b, 5*time.Minute)
	parts := [][]byte{bytes.Repeat([]byte{'h'}, 200)}
	for i := range 32 {
		parts = append(parts, bytes.Repeat([]byte{byte(i)}, 1024))
	}
	req := bytes.Repeat([]byte{'r'}, 200)
	var wg sync.WaitGroup
	wg.Go(func() { // the server answers every request
		for {
			if _, err := server.ReadFrame(ctx); err != nil {
				return
			}
			if err := server.WriteFrame(ctx, parts...); err != nil {
				return
			}
		}
	})
	// Replies match no request: 4 requests in flight, each answer
	// releases the next request.
	pull := func(n int) {
		const pullers = 4
		for range min(n, pullers) {
			require.NoError(b, client.WriteFrame(ctx, req))
		}
		for i := range n {
			_, err := client.ReadFrame(ctx)
			require.NoError(b, err)
			if i+pullers < n {
				require.NoError(b, client.WriteFrame(ctx, req))
			}
		}
	}
	pull(100) // warm up: handshake done, MTU probed, window grown
	before := server.qc.ConnectionStats()
	b.SetBytes(33 << 10)
	b.ResetTimer()
	cpu0 := processCPU()
	pull(b.N)
	b.StopTimer()
	cpu := processCPU() - cpu0
	after := server.qc.ConnectionStats()
	// Both ends run in this process: its CPU time per 1 KiB message is
	// the sum of the client's and the broker's side of QUIC.
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(b.N*32), "cpu-µs/msg")
	b.ReportMetric(float64(after.PacketsSent-before.PacketsSent)/float64(b.N), "pkts/answer")
	b.ReportMetric(float64(after.PacketsLost-before.PacketsLost)/float64(b.N), "lost/answer")
	b.ReportMetric(float64(after.PacketsReceived-before.PacketsReceived)/float64(b.N), "rcvd/answer")
	b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "msg/s")
	// The server's congestion window and smoothed RTT at the end: under
	// loss (see TestLossyCompare for a lossy namespace) they show whether
	// answers wait for the window rather than for loss recovery.
	b.ReportMetric(float64(after.CongestionWindow)/1200, "cwnd-1200B-pkts")
	b.ReportMetric(float64(after.SmoothedRTT.Microseconds()), "srtt-µs")
	client.Close()
	server.Close()
	wg.Wait()
}
