package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

func TestBenchStoreEngines(t *testing.T) {
	for _, eng := range []string{"commitlog", "pebble"} {
		t.Run(eng, func(t *testing.T) {
			row, err := benchStoreRun(context.Background(), t.TempDir(), eng, store.FlushSync, 1<<20, 256, 4, 300*time.Millisecond)
			require.NoError(t, err)
			assert.Positive(t, row.Messages)
			assert.Equal(t, eng, row.Engine)
			assert.Positive(t, row.P50Micros, "sync appends take measurable time")
			secs, err := benchStartup(context.Background(), t.TempDir(), eng, 1<<20, 2000)
			require.NoError(t, err)
			assert.Positive(t, secs)
		})
	}
	_, err := openEngine("nope", t.TempDir(), store.FlushAsync, 1<<20, time.Second)
	assert.ErrorContains(t, err, "unknown engine")
}

func TestBenchConcurrentSync(t *testing.T) {
	res, err := benchConcurrentSync(t.TempDir(), []int{1, 2}, 50*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		assert.Positive(t, r.SyncsPerSec)
	}
}

func TestLatenciesMerge(t *testing.T) {
	a, b := newLatencies(), newLatencies()
	a.record(10 * time.Microsecond)
	b.record(1000 * time.Microsecond)
	b.record(1000 * time.Microsecond)
	a.merge(b)
	assert.Equal(t, int64(3), a.n)
	assert.InDelta(t, 1000, float64(a.quantile(0.5).Microseconds()), 20)
	assert.Equal(t, 1000*time.Microsecond, a.max)
}
