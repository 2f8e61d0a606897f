package mirror

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/modules/broker"
)

func TestTranslate(t *testing.T) {
	pairs := []pair{{Src: 10, Dst: 100}, {Src: 20, Dst: 130}, {Src: 35, Dst: 150}}
	tests := []struct {
		give   int64
		want   int64
		wantOK bool
	}{
		{give: 5, wantOK: false},              // before the first write: unknown
		{give: 10, want: 100, wantOK: true},   // exactly a batch start
		{give: 15, want: 100, wantOK: true},   // inside a batch: re-read its start
		{give: 20, want: 130, wantOK: true},   // next batch
		{give: 1000, want: 150, wantOK: true}, // ahead of the mirror: its last batch
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(tt.give, 10), func(t *testing.T) {
			got, ok := translate(pairs, tt.give)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// TestAddPairThins: the pairs stay bounded and ordered, keep the first
// and the newest, and translation of any offset never moves past the
// true target position (thinning only coarsens).
func TestAddPairThins(t *testing.T) {
	q := &queueState{}
	for i := int64(0); i < 10_000; i++ {
		q.addPair(pair{Src: i * 10, Dst: i*10 + 7})
	}
	q.addPair(pair{Src: 5, Dst: 1}) // older than the last: ignored
	require.LessOrEqual(t, len(q.pairs), maxPairs)
	assert.Equal(t, pair{Src: 0, Dst: 7}, q.pairs[0])
	assert.Equal(t, pair{Src: 99_990, Dst: 99_997}, q.pairs[len(q.pairs)-1])
	for i := 1; i < len(q.pairs); i++ {
		assert.Less(t, q.pairs[i-1].Src, q.pairs[i].Src)
	}
	for c := int64(0); c < 100_000; c += 997 {
		got, ok := translate(q.pairs, c)
		require.True(t, ok)
		assert.LessOrEqual(t, got, c+7, "translation of %d skips messages", c)
	}
}

func TestMirroredMessage(t *testing.T) {
	born := time.UnixMilli(1_700_000_000_123)
	stored := time.UnixMilli(1_700_000_060_000)
	base := func(p map[string]string) *client.MessageExt {
		m := &client.MessageExt{Message: client.Message{Topic: "t", Body: []byte("b"), Properties: p}, OffsetMsgID: "OFFSETID",
			BornHost: "10.0.0.1:5000", BornTimestamp: born, StoreTimestamp: stored}
		return m
	}
	t.Run("plain", func(t *testing.T) {
		it, ok := mirrored(base(map[string]string{"UNIQ_KEY": "U1", "CLUSTER": "east", "MIN_OFFSET": "0", "k": "v"}), "east", "west", "l")
		require.True(t, ok)
		assert.Equal(t, "U1", it.Properties[message.PropertyUniqKey])
		assert.Equal(t, "east", it.Properties[broker.PropertyMirrorOrigin])
		assert.Equal(t, "10.0.0.1:5000", it.Properties[broker.PropertyMirrorBornHost])
		assert.Equal(t, "1700000000123", it.Properties[broker.PropertyMirrorBornTS])
		assert.Equal(t, "v", it.Properties["k"])
		assert.NotContains(t, it.Properties, "CLUSTER")
		assert.NotContains(t, it.Properties, "MIN_OFFSET")
	})
	t.Run("no id keeps the offset id", func(t *testing.T) {
		it, ok := mirrored(base(map[string]string{}), "east", "west", "l")
		require.True(t, ok)
		assert.Equal(t, "OFFSETID", it.Properties[message.PropertyUniqKey])
	})
	t.Run("origin kept along a chain", func(t *testing.T) {
		it, ok := mirrored(base(map[string]string{"CLUSTER": "middle", broker.PropertyMirrorOrigin: "east"}), "middle", "west", "l")
		require.True(t, ok)
		assert.Equal(t, "east", it.Properties[broker.PropertyMirrorOrigin])
	})
	t.Run("never home", func(t *testing.T) {
		_, ok := mirrored(base(map[string]string{"CLUSTER": "east", broker.PropertyMirrorOrigin: "west"}), "east", "west", "l")
		assert.False(t, ok)
	})
	t.Run("delay level keeps its due time", func(t *testing.T) {
		it, _ := mirrored(base(map[string]string{"DELAY": "3"}), "east", "west", "l")
		assert.NotContains(t, it.Properties, "DELAY")
		assert.Equal(t, "3", it.Properties[broker.PropertyMirrorDelay])
		assert.Equal(t, strconv.FormatInt(stored.UnixMilli(), 10), it.Properties[message.PropertyTimerDeliverMS])
	})
	t.Run("relative timer becomes absolute", func(t *testing.T) {
		it, _ := mirrored(base(map[string]string{"TIMER_DELAY_MS": "5000", "TIMER_OUT_MS": "1700000059000"}), "east", "west", "l")
		assert.Equal(t, "1700000059000", it.Properties[message.PropertyTimerDeliverMS])
	})
	t.Run("absolute timer untouched", func(t *testing.T) {
		it, _ := mirrored(base(map[string]string{"TIMER_DELIVER_MS": "1700000050000"}), "east", "west", "l")
		assert.Equal(t, "1700000050000", it.Properties[message.PropertyTimerDeliverMS])
	})
}

func TestConfigValidate(t *testing.T) {
	good := func() Link {
		return Link{Name: "a", Source: Cluster{Namesrv: []string{"h:1"}}, Target: Cluster{Namesrv: []string{"h:2"}}, Topics: []string{"t"}}
	}
	tests := []struct {
		name string
		give func(*Link)
		want string
	}{
		{"bad name", func(l *Link) { l.Name = "a b" }, "mirror.links.0.name"},
		{"no target", func(l *Link) { l.Target.Namesrv = nil }, "mirror.links.0.target.namesrv is empty: list"},
		{"no topics", func(l *Link) { l.Topics = nil }, "mirror.links.0.topics is empty and topic_pattern unset"},
		{"bad pattern", func(l *Link) { l.Topics, l.TopicPattern = nil, "(" }, "mirror.links.0.topic_pattern"},
		{"bad filter", func(l *Link) { l.Filter.Type = "XPATH" }, "mirror.links.0.filter.type"},
		{"same cluster", func(l *Link) { l.Source.Cluster, l.Target.Cluster = "x", "x" }, "mirror.links.0.target.cluster"},
		{"batch", func(l *Link) { l.BatchSize = 5000 }, "mirror.links.0.batch_size"},
		{"start", func(l *Link) { l.StartFrom = "middle" }, "mirror.links.0.start_from"},
		{"rate", func(l *Link) { l.RateLimit = -1 }, "mirror.links.0.rate_limit"},
		{"catch up", func(l *Link) { l.CatchUp = "random" }, "mirror.links.0.catch_up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := good()
			tt.give(&l)
			err := (&Config{Links: []Link{l}}).Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	c := &Config{Links: []Link{good()}}
	require.NoError(t, c.Validate())
	assert.Equal(t, time.Second, c.Links[0].CheckpointInterval, "defaults filled")
	assert.Equal(t, config.ByteSize(1<<20), c.Links[0].BatchBytes)
	assert.Equal(t, CatchUpOldestFirst, c.Links[0].CatchUp)
	dup := &Config{Links: []Link{good(), good()}}
	assert.ErrorContains(t, dup.Validate(), "names two links")
}

func TestConfigDecode(t *testing.T) {
	cfg := config.FromMap(map[string]any{"mirror.links": []any{map[string]any{
		"name": "e", "target": map[string]any{"namesrv": []any{"quic://c:9876"}}, "topics": []any{"t"}, "batch_bytes": "256KiB", "checkpoint_interval": "2s"}}})
	c, err := NewConfigFrom(cfg)
	require.NoError(t, err)
	require.Len(t, c.Links, 1)
	assert.Equal(t, config.ByteSize(256<<10), c.Links[0].BatchBytes)
	assert.Equal(t, 2*time.Second, c.Links[0].CheckpointInterval)
	assert.True(t, c.Links[0].CreateTopics, "create_topics defaults to true")
	_, err = NewConfigFrom(config.FromMap(map[string]any{"mirror.links": []any{map[string]any{"name": "e", "nope": 1}}}))
	assert.Error(t, err, "unknown keys are refused")
}

// TestBucketLiveFirst: with a live write waiting for tokens, a backfill
// (a newest-first link's gap) takes none: the live write gets the next
// tokens although the backfill asked at the same time.
func TestBucketLiveFirst(t *testing.T) {
	b := newBucket(20)
	require.True(t, b.take(context.Background(), 20, true)) // empty it
	order := make(chan string, 2)
	go func() {
		if b.take(context.Background(), 10, true) {
			order <- "live"
		}
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiting == 1
	}, 5*time.Second, time.Millisecond, "the live write waits")
	go func() {
		if b.take(context.Background(), 10, false) {
			order <- "backfill"
		}
	}()
	assert.Equal(t, "live", <-order)
	assert.Equal(t, "backfill", <-order)
	b.mu.Lock()
	assert.Zero(t, b.waiting)
	b.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, b.take(ctx, 20, false), "an ended context")
}
