package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

func TestBenchProduceAgainstLiveBroker(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	for _, mode := range []string{"sync", "async", "oneway"} {
		t.Run(mode, func(t *testing.T) {
			r, err := benchProduce(context.Background(), &produceFlags{
				namesrv: srv.Namesrv, topic: "BenchCmd" + mode, size: 128, concurrency: 2,
				count: 500, duration: 30 * time.Second, mode: mode,
			})
			require.NoError(t, err)
			assert.Equal(t, int64(500), r.Messages)
			assert.Zero(t, r.Errors)
			assert.Equal(t, int64(500*128), r.Bytes)
			if mode != "oneway" {
				assert.Positive(t, r.P50Micros)
				assert.GreaterOrEqual(t, r.P99Micros, r.P50Micros)
			}
		})
	}
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	l := newLatencies()
	for i := 1; i <= 1000; i++ {
		l.record(time.Duration(i) * time.Millisecond)
	}
	p50 := l.quantile(0.5)
	assert.InDelta(t, float64(500*time.Millisecond), float64(p50), float64(10*time.Millisecond))
	p99 := l.quantile(0.99)
	assert.InDelta(t, float64(990*time.Millisecond), float64(p99), float64(15*time.Millisecond))
	assert.Equal(t, time.Second, l.max)
}

func TestBenchDisk(t *testing.T) {
	r, err := benchDisk(t.TempDir(), 8<<20, 1<<20)
	require.NoError(t, err)
	assert.Positive(t, r.SeqWriteMBps)
	assert.Positive(t, r.FsyncP50Micros)
}
