package metrics

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// countingStore counts Read calls.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) Read(ctx context.Context, q store.Queue, offset int64, o store.ReadOptions, into *store.ReadResult) error {
	c.reads.Add(1)
	return c.Store.Read(ctx, q, offset, o, into)
}

// TestDelayBoundedCost: a scrape reads one head record per lagging queue,
// at most the budget; an unmoved group costs no read at the next scrape;
// queues over the budget are counted and measured later.
func TestDelayBoundedCost(t *testing.T) {
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: t.TempDir(), Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	defer st.Close()
	born := time.Now().Add(-time.Minute)
	var msgs []store.Message
	for q := int32(0); q < 3; q++ {
		for i := 0; i < 2; i++ {
			msgs = append(msgs, store.Message{Ext: &message.Ext{Message: message.Message{Topic: "T", Body: []byte("x")}, QueueID: q, BornTimestamp: born.UnixMilli()}})
		}
	}
	_, err = st.Append(context.Background(), msgs)
	require.NoError(t, err)
	cs := &countingStore{Store: st}
	c := &delayCache{budget: 2}

	scrape := func(offset int64) (measured []time.Duration, unmeasured int) {
		d := c.begin(cs)
		for q := int32(0); q < 3; q++ {
			if v, ok := d.delay(store.Queue{Topic: "T", ID: q}, offset, 2); ok {
				measured = append(measured, v)
			}
		}
		return measured, d.end()
	}
	got, un := scrape(0)
	assert.Len(t, got, 2)
	assert.Equal(t, 1, un, "over budget")
	assert.EqualValues(t, 2, cs.reads.Load())
	for _, v := range got {
		assert.Greater(t, v, time.Duration(0))
		assert.Less(t, v, time.Minute, "store time, not born time")
	}

	got, un = scrape(0)
	assert.Len(t, got, 3, "the cached two cost nothing; the third is read now")
	assert.Equal(t, 0, un)
	assert.EqualValues(t, 3, cs.reads.Load())

	got, un = scrape(2)
	assert.Equal(t, []time.Duration{0, 0, 0}, got, "caught up")
	assert.Equal(t, 0, un)
	assert.EqualValues(t, 3, cs.reads.Load())
	assert.Empty(t, c.times, "cache keeps only lagging queues")
}
