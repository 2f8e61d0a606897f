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

func TestBenchConsumeDrainsBacklog(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	r, err := benchProduce(context.Background(), &produceFlags{
		namesrv: srv.Namesrv, topic: "BenchConsume", size: 100, concurrency: 2, count: 1000, duration: 30 * time.Second, mode: "sync",
	})
	require.NoError(t, err)
	require.Equal(t, int64(1000), r.Messages)
	// The broker registers the auto-created topic with the name server
	// asynchronously.
	a := newAdmin(srv.Namesrv, 5*time.Second)
	defer a.Close()
	require.Eventually(t, func() bool {
		_, ok, err := a.route(context.Background(), "BenchConsume")
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond)
	for _, tt := range []struct {
		concurrency int
		count, want int64
	}{{1, 0, 1000}, {3, 0, 1000}, {2, 300, 300}} {
		c, err := benchConsume(context.Background(), &consumeFlags{
			namesrv: srv.Namesrv, topic: "BenchConsume", group: "BENCH_CONSUMER", concurrency: tt.concurrency, count: tt.count, batch: 32, duration: 30 * time.Second,
		})
		require.NoError(t, err)
		if tt.count == 0 {
			assert.Equal(t, tt.want, c.Messages)
		} else {
			assert.GreaterOrEqual(t, c.Messages, tt.want)
			assert.Less(t, c.Messages, tt.want+int64(tt.concurrency)*32)
		}
		assert.Zero(t, c.Errors)
		assert.Positive(t, c.MsgsPerSec)
		assert.Greater(t, c.Bytes, c.Messages*100)
		assert.Positive(t, c.P50Micros)
	}
	_, err = benchConsume(context.Background(), &consumeFlags{namesrv: srv.Namesrv, topic: "NoSuchTopic", concurrency: 1, batch: 32, duration: time.Minute})
	assert.ErrorContains(t, err, "does not exist")
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

// TestBenchProduceOverQUIC: a quic:// name server makes mq bench reach the
// broker over QUIC as well.
func TestBenchProduceOverQUIC(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"transports=tcp,quic"}})
	r, err := benchProduce(context.Background(), &produceFlags{
		namesrv: "quic://" + srv.Namesrv, topic: "BenchQUIC", size: 256, concurrency: 2,
		count: 300, duration: 30 * time.Second, mode: "sync",
	})
	require.NoError(t, err)
	assert.Equal(t, int64(300), r.Messages)
	assert.Zero(t, r.Errors)
	assert.Equal(t, "quic://127.0.0.1:1", withScheme("quic://127.0.0.1:9876", "127.0.0.1:1"))
	assert.Equal(t, "127.0.0.1:1", withScheme("127.0.0.1:9876", "127.0.0.1:1"))
}
