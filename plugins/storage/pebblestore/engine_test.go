package pebblestore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// TestPhysicalOffsets: the physical offset is a running byte offset, as
// in the commit log, and survives reopening.
func TestPhysicalOffsets(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	pos, err := s.Append(bg, []store.Message{msg("Phys", 0, "a"), msg("Phys", 1, "bb"), msg("Other", 0, "ccc")})
	require.NoError(t, err)
	for i := 1; i < len(pos); i++ {
		assert.Equal(t, pos[i-1].CommitLogOffset+int64(pos[i-1].Size), pos[i].CommitLogOffset)
	}
	require.NoError(t, s.Close())
	s = openStore(t, NewConfig(), set)
	defer s.Close()
	next, err := s.Append(bg, []store.Message{msg("Phys", 0, "d")})
	require.NoError(t, err)
	last := pos[len(pos)-1]
	assert.Equal(t, last.CommitLogOffset+int64(last.Size), next[0].CommitLogOffset)
	assert.GreaterOrEqual(t, next[0].StoreTimestamp, last.StoreTimestamp)
}

func TestAppendRawKeepsRecords(t *testing.T) {
	src := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer src.Close()
	pads, err := src.Append(bg, []store.Message{msg("Pad", 0, "p1"), msg("Pad", 0, "p2")})
	require.NoError(t, err)
	pos, err := src.Append(bg, []store.Message{
		storetest.Msg("Raw", 2, "one", map[string]string{"TAGS": "A", "KEYS": "k1"}),
		storetest.Msg("Raw", 2, "two", nil),
	})
	require.NoError(t, err)
	lookup := func(p store.Position) []byte {
		rec, err := src.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
		return rec
	}
	var recs [][]byte
	for _, p := range pos {
		recs = append(recs, lookup(p))
	}
	dst := openStore(t, NewConfig(), settings(t, store.FlushSync))
	defer dst.Close()
	// One pad record instead of two: the physical offsets differ.
	_, err = dst.AppendRaw(bg, [][]byte{lookup(pads[0])}, []int64{0})
	require.NoError(t, err)
	require.NoError(t, dst.SetQueueStart(store.Queue{Topic: "Raw", ID: 2}, 40))
	got, err := dst.AppendRaw(bg, recs, []int64{11, 22})
	require.NoError(t, err)
	for i, p := range got {
		assert.Equal(t, int64(40+i), p.QueueOffset)
		assert.Equal(t, pos[i].StoreTimestamp, p.StoreTimestamp, "store time kept")
		assert.NotEqual(t, pos[i].CommitLogOffset, p.CommitLogOffset)
		rec, err := dst.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
		assert.Equal(t, recs[i][36:], rec[36:], "only the queue and physical offsets change")
		m := storetest.Decode(t, rec)
		assert.Equal(t, p.QueueOffset, m.QueueOffset)
		assert.Equal(t, p.CommitLogOffset, m.CommitLogOffset)
	}
	var codes []int64
	var r store.ReadResult
	require.NoError(t, dst.Read(bg, store.Queue{Topic: "Raw", ID: 2}, 40, store.ReadOptions{Filter: func(c int64) bool { codes = append(codes, c); return true }}, &r))
	assert.Equal(t, []int64{11, 22}, codes)
	keyed, err := dst.QueryByKey(bg, "Raw", "k1", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Len(t, keyed, 1)
	assert.Equal(t, "one", string(storetest.Decode(t, keyed[0]).Body))

	t.Run("set start of a queue with messages", func(t *testing.T) {
		assert.NoError(t, dst.SetQueueStart(store.Queue{Topic: "Raw", ID: 2}, 40), "its own start")
		assert.ErrorIs(t, dst.SetQueueStart(store.Queue{Topic: "Raw", ID: 2}, 0), store.ErrBadArgument)
	})
	t.Run("bad records", func(t *testing.T) {
		_, err := dst.AppendRaw(bg, [][]byte{[]byte("not a record")}, []int64{0})
		assert.ErrorIs(t, err, store.ErrBadArgument)
		_, err = dst.AppendRaw(bg, recs, []int64{0})
		assert.ErrorIs(t, err, store.ErrBadArgument)
	})
}

// TestRetentionDropsKeyBuckets: DeleteBefore range-deletes the key index
// of whole buckets, and QueryByKey never answers with deleted messages.
func TestRetentionDropsKeyBuckets(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	old := storetest.Msg("Ret", 0, "old", map[string]string{"KEYS": "k"})
	pos, err := s.Append(bg, []store.Message{old})
	require.NoError(t, err)
	for time.Now().UnixMilli() <= pos[0].StoreTimestamp {
		time.Sleep(time.Millisecond)
	}
	cut := time.Now()
	for time.Now().UnixMilli() <= cut.UnixMilli() {
		time.Sleep(time.Millisecond)
	}
	_, err = s.Append(bg, []store.Message{storetest.Msg("Ret", 0, "new", map[string]string{"KEYS": "k"})})
	require.NoError(t, err)
	freed, err := s.DeleteBefore(bg, cut)
	require.NoError(t, err)
	assert.Equal(t, int64(pos[0].Size), freed)
	recs, err := s.QueryByKey(bg, "Ret", "k", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "new", string(storetest.Decode(t, recs[0]).Body))
	// A cut an hour ahead empties the queue and every bucket before it.
	_, err = s.DeleteBefore(bg, time.Now().Add(2*time.Hour))
	require.NoError(t, err)
	mn, mx, err := s.Offsets(store.Queue{Topic: "Ret"})
	require.NoError(t, err)
	assert.Equal(t, [2]int64{2, 2}, [2]int64{mn, mx})
	it, err := s.db.NewIter(nil)
	require.NoError(t, err)
	var left []string
	for valid := it.First(); valid; valid = it.Next() {
		left = append(left, fmt.Sprintf("%c", it.Key()[0]))
	}
	require.NoError(t, it.Close())
	assert.Equal(t, []string{"Q", "S", "S"}, left, "only the queue's start and the store state remain")
	_, err = s.Lookup(bg, pos[0].CommitLogOffset)
	assert.ErrorIs(t, err, store.ErrOffsetOutOfRange)
}

// TestDeletedTopicLookup: the records of a deleted topic are gone, even
// when the topic is written again with the same queue offsets.
func TestDeletedTopicLookup(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	pos, err := s.Append(bg, []store.Message{storetest.Msg("Del", 0, "first", map[string]string{"KEYS": "k"})})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTopic(bg, "Del"))
	again, err := s.Append(bg, []store.Message{storetest.Msg("Del", 0, "second", map[string]string{"KEYS": "k"})})
	require.NoError(t, err)
	require.Equal(t, int64(0), again[0].QueueOffset)
	_, err = s.Lookup(bg, pos[0].CommitLogOffset)
	assert.ErrorIs(t, err, store.ErrNotFound)
	recs, err := s.QueryByKey(bg, "Del", "k", 0, time.Now().UnixMilli()+1000, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "second", string(storetest.Decode(t, recs[0]).Body))
}

func TestMetaNames(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	for _, n := range []string{"topics", "consumerOffset", "a.b"} {
		require.NoError(t, s.SaveMeta(n, []byte(n)))
	}
	names, err := s.MetaNames()
	require.NoError(t, err)
	assert.Equal(t, []string{"a.b", "consumerOffset", "topics"}, names)
	require.NoError(t, s.DeleteMeta("a.b"))
	require.NoError(t, s.DeleteMeta("absent"))
	_, err = s.LoadMeta("a.b")
	assert.ErrorIs(t, err, store.ErrNotFound)
	for _, bad := range []string{"", "..", "a/b", ".hidden", "nul\x00"} {
		assert.ErrorIs(t, s.SaveMeta(bad, nil), store.ErrBadArgument, "%q", bad)
	}
}

// TestSyncsAreShared: in sync mode, concurrent appends share WAL syncs.
func TestSyncsAreShared(t *testing.T) {
	cfg := NewConfig()
	fs := newCountingFS()
	cfg.FS = fs
	s := openStore(t, cfg, settings(t, store.FlushSync))
	defer s.Close()
	const writers, each = 8, 50
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				if _, err := s.Append(bg, []store.Message{msg("Sync", int32(w), "x")}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		require.NoError(t, <-errs)
	}
	t.Logf("%d appends, %d WAL sync requests, %d fsyncs", writers*each, s.syncs.Load(), fs.syncs.Load())
	assert.Less(t, fs.syncs.Load(), int64(writers*each), "fsyncs are shared")
	assert.LessOrEqual(t, s.syncs.Load(), int64(writers*each))
	assert.Equal(t, s.committed.Load(), s.synced.Load(), "every commit is synced")
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(NewConfig(), store.Deps{})
	assert.ErrorIs(t, err, store.ErrBadArgument)
	set := settings(t, "fast")
	_, err = Open(NewConfig(), store.Deps{Settings: set})
	assert.ErrorIs(t, err, store.ErrBadArgument)
	bad := NewConfig()
	bad.MaxOpenFiles = 1
	_, err = Open(bad, store.Deps{Settings: settings(t, store.FlushAsync)})
	assert.ErrorIs(t, err, store.ErrBadArgument)
	_ = message.MagicCode
}

// TestLargeBatches: batches above half the memtable are committed as
// flushable batches by Pebble; they must read back like any other.
func TestLargeBatches(t *testing.T) {
	set := settings(t, store.FlushSync)
	cfg := NewConfig()
	cfg.MemTableSize = 1 << 20
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Large", ID: 0}
	big := string(make([]byte, 3<<19))
	var batch []store.Message
	for i := 0; i < 4; i++ {
		batch = append(batch, msg(q.Topic, q.ID, fmt.Sprintf("%d%s", i, big[:(i+1)<<18])))
	}
	for round := 0; round < 2; round++ {
		_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, big)})
		require.NoError(t, err)
		_, err = s.Append(bg, batch)
		require.NoError(t, err)
	}
	check := func(s *Store) {
		var r store.ReadResult
		n := 0
		for off := int64(0); ; off = r.NextOffset {
			require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxBytes: 1}, &r))
			if r.Status != store.Found {
				break
			}
			m := storetest.Decode(t, r.Records[0])
			assert.Equal(t, off, m.QueueOffset)
			assert.True(t, m.VerifyCRC())
			n++
		}
		assert.Equal(t, 10, n)
	}
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	check(s)
}
