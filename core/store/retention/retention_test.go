package retention

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a store whose DeleteBefore records its cuts and frees a
// fixed amount; everything else is irrelevant to the cleaner.
type recorder struct {
	store.Store
	mu    sync.Mutex
	cuts  []time.Time
	freed int64
}

func (r *recorder) DeleteBefore(_ context.Context, t time.Time) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cuts = append(r.cuts, t)
	return r.freed, nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cuts)
}

func TestParseHours(t *testing.T) {
	got, err := ParseHours("04;16")
	require.NoError(t, err)
	assert.Equal(t, []int{4, 16}, got)
	got, err = ParseHours("")
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = ParseHours("25")
	assert.Error(t, err)
	_, err = ParseHours("x")
	assert.Error(t, err)
}

func TestExpiredOnlyAtCleanHours(t *testing.T) {
	r := &recorder{freed: 10}
	c := New(r, Config{Retention: 72 * time.Hour, CleanAt: []int{4}}, nil)
	at3 := time.Date(2026, 12, 2, 3, 30, 0, 0, time.Local)
	c.now = func() time.Time { return at3 }
	assert.Zero(t, c.RunOnce(context.Background()))
	assert.Empty(t, r.cuts)
	at4 := at3.Add(time.Hour)
	c.now = func() time.Time { return at4 }
	assert.Equal(t, int64(10), c.RunOnce(context.Background()))
	require.Len(t, r.cuts, 1)
	assert.Equal(t, at4.Add(-72*time.Hour), r.cuts[0])
}

func TestDiskAboveLimitDeletesOldestFirst(t *testing.T) {
	r := &recorder{freed: 1}
	c := New(r, Config{Retention: 8 * time.Hour, CleanAt: []int{99 % 24}, MaxUsedRatio: 0.75, Dir: "/x"}, nil)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.Local)
	c.now = func() time.Time { return now }
	ratios := []float64{0.9, 0.85, 0.7}
	c.usage = func(string) (float64, error) {
		v := ratios[0]
		if len(ratios) > 1 {
			ratios = ratios[1:]
		}
		return v, nil
	}
	c.RunOnce(context.Background())
	require.Len(t, r.cuts, 2, "deletes until the disk is below the limit")
	assert.Equal(t, now.Add(-4*time.Hour), r.cuts[0], "oldest first: the first cut is the oldest")
	assert.Equal(t, now.Add(-2*time.Hour), r.cuts[1])
}

func TestLoopStops(t *testing.T) {
	r := &recorder{}
	c := New(r, Config{Retention: time.Hour, CheckInterval: 5 * time.Millisecond}, nil)
	c.Start()
	require.Eventually(t, func() bool { return r.count() > 0 }, 5*time.Second, 5*time.Millisecond)
	c.Stop()
}

func TestDiskUsage(t *testing.T) {
	u, err := DiskUsage(t.TempDir())
	require.NoError(t, err)
	assert.True(t, u >= 0 && u <= 1)
	_, err = DiskUsage("/definitely/not/here")
	assert.Error(t, err)
}

// TestUsedRatioAsJava: the used share is Java's and df's (used over used
// plus available, rounded up to a whole percent); blocks reserved for
// root are not counted as used. The first case is the statfs of the
// machine where counting the reserve as used read 0.77 and retention
// deleted every message older than half a minute.
func TestUsedRatioAsJava(t *testing.T) {
	tests := []struct {
		name                string
		blocks, free, avail uint64
		want                float64
	}{
		{"large root reserve", 66053021, 57065973, 14888268, 0.38},
		{"no reserve", 1000, 250, 250, 0.75},
		{"rounded up", 1000, 749, 749, 0.26},
		{"full for users, reserve left", 1000, 50, 0, 1},
		{"empty", 1000, 1000, 1000, 0},
		{"nothing known", 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, UsedRatio(tt.blocks, tt.free, tt.avail), 1e-9)
		})
	}
}
