package commitlog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// follow copies src's log to dst from dst's end in batches of maxBytes,
// as the replication module does.
func follow(t *testing.T, src, dst *Store, maxBytes int) {
	t.Helper()
	_, from := dst.LogOffsets()
	for {
		_, end := src.LogOffsets()
		if from >= end {
			return
		}
		recs, next, err := src.ReadLog(bg, from, maxBytes)
		require.NoError(t, err)
		require.NoError(t, dst.AppendReplica(bg, recs))
		_, got := dst.LogOffsets()
		if got != next {
			// The read ended past a segment's end padding, which the
			// replica writes only with the next segment's first record.
			require.Zero(t, next%int64(src.cfg.SegmentSize), "the replica ends where the read did")
			require.Less(t, got, next)
		}
		from = got
	}
}

func TestReplicaFollowsAcrossSegments(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := smallConfig(8 << 10)
			src := openStore(t, cfg, settings(t, mode))
			defer src.Close()
			dstSet := settings(t, mode)
			dst := openStore(t, cfg, dstSet)
			var pos []store.Position
			put := func(from, to int) {
				for i := from; i < to; i++ {
					m := msg(fmt.Sprintf("T%d", i%2), int32(i%3), fmt.Sprintf("body-%04d-%0300d", i, i))
					m.Properties["KEYS"] = fmt.Sprintf("k%d", i)
					p, err := src.Append(bg, []store.Message{m})
					require.NoError(t, err)
					pos = append(pos, p...)
				}
			}
			put(0, 40)
			follow(t, src, dst, 1000)
			// Reopen the replica: it resumes from its own end.
			require.NoError(t, dst.Close())
			dst = openStore(t, cfg, dstSet)
			defer dst.Close()
			put(40, 90)
			follow(t, src, dst, 3000)

			smin, smax := src.LogOffsets()
			dmin, dmax := dst.LogOffsets()
			assert.Equal(t, smin, dmin)
			assert.Equal(t, smax, dmax)
			for _, p := range pos {
				a, err := src.Lookup(bg, p.CommitLogOffset)
				require.NoError(t, err)
				b, err := dst.Lookup(bg, p.CommitLogOffset)
				require.NoError(t, err)
				assert.Equal(t, a, b, "record at %d", p.CommitLogOffset)
			}
			for _, q := range src.Queues() {
				m1, x1, _ := src.Offsets(q)
				m2, x2, _ := dst.Offsets(q)
				assert.Equal(t, [2]int64{m1, x1}, [2]int64{m2, x2}, "queue %s", q)
				var r1, r2 store.ReadResult
				require.NoError(t, src.Read(bg, q, 0, store.ReadOptions{MaxMessages: 100, MaxBytes: 1 << 20}, &r1))
				require.NoError(t, dst.Read(bg, q, 0, store.ReadOptions{MaxMessages: 100, MaxBytes: 1 << 20}, &r2))
				assert.Equal(t, r1.QueueOffsets, r2.QueueOffsets)
				assert.Equal(t, r1.Records, r2.Records)
			}
			got, err := dst.QueryByKey(bg, "T1", "k41", 0, 1<<62, 10)
			require.NoError(t, err)
			assert.Len(t, got, 1, "the key index is rebuilt")
		})
	}
}

func TestReplicaRejectsMisplacedRecords(t *testing.T) {
	cfg := smallConfig(8 << 10)
	src := openStore(t, cfg, settings(t, store.FlushAsync))
	defer src.Close()
	dst := openStore(t, cfg, settings(t, store.FlushAsync))
	defer dst.Close()
	for i := 0; i < 5; i++ {
		_, err := src.Append(bg, []store.Message{msg("T", 0, fmt.Sprint("b", i))})
		require.NoError(t, err)
	}
	recs, _, err := src.ReadLog(bg, 0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 5)
	tests := []struct {
		name string
		give [][]byte
	}{
		{"gap", recs[1:2]},
		{"garbage", [][]byte{[]byte("not a record")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, dst.AppendReplica(bg, tt.give), store.ErrBadArgument)
			_, end := dst.LogOffsets()
			assert.Zero(t, end, "nothing written")
		})
	}
	require.NoError(t, dst.AppendReplica(bg, recs[:2]))
	assert.ErrorIs(t, dst.AppendReplica(bg, recs[1:2]), store.ErrBadArgument, "a record already there")
	require.NoError(t, dst.AppendReplica(bg, recs[2:]))
	_, mx, err := dst.Offsets(store.Queue{Topic: "T", ID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(5), mx)
	_, _, err = src.ReadLog(bg, 1<<40, 10)
	assert.ErrorIs(t, err, store.ErrOffsetOutOfRange)
}
