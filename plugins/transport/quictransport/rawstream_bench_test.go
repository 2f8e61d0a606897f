package quictransport

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"
	"github.com/stretchr/testify/require"
)

// BenchmarkRawStream is the pull pattern of BenchmarkPullConn on one
// long-lived quic-go stream with length-prefixed frames, as TCP carries
// them: 4 requests in flight, 33 KiB answers written in one Write, no
// stream pool, no budget, no goroutine per stream. It bounds what any
// framing over quic-go could reach on this machine.
func BenchmarkRawStream(b *testing.B) {
	cfg := testConfig()
	stc, err := serverTLS(cfg, "127.0.0.1", slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	ln, err := quic.ListenAddr("127.0.0.1:0", stc, quicConfig(cfg))
	require.NoError(b, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	answer := append(binary.BigEndian.AppendUint32(nil, 33<<10), bytes.Repeat([]byte{'a'}, 33<<10)...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		qc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer qc.CloseWithError(0, "")
		str, err := qc.AcceptStream(ctx)
		if err != nil {
			return
		}
		req := make([]byte, 200)
		for {
			if _, err := io.ReadFull(str, req); err != nil {
				return
			}
			if _, err := str.Write(answer); err != nil {
				return
			}
		}
	}()
	ctc, err := clientTLS(cfg, "127.0.0.1")
	require.NoError(b, err)
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), ctc, quicConfig(cfg))
	require.NoError(b, err)
	str, err := qc.OpenStream()
	require.NoError(b, err)
	req := make([]byte, 200)
	buf := make([]byte, len(answer))
	pull := func(n int) {
		const pullers = 4
		for range min(n, pullers) {
			_, err := str.Write(req)
			require.NoError(b, err)
		}
		for i := range n {
			_, err := io.ReadFull(str, buf)
			require.NoError(b, err)
			if i+pullers < n {
				_, err := str.Write(req)
				require.NoError(b, err)
			}
		}
	}
	pull(100)
	b.SetBytes(33 << 10)
	b.ResetTimer()
	pull(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "msg/s")
	qc.CloseWithError(0, "")
	<-done
}
