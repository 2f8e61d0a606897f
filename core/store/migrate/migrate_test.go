package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/migrate"
	"github.com/quivermq/quiver/core/store/storetest"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The Pebble engine implements every optional interface of this package;
// the CommitLog engine none (its copies get new store timestamps, and its
// queues start at 0).
var (
	_ migrate.OffsetSetter   = (*pebblestore.Store)(nil)
	_ migrate.StoredAppender = (*pebblestore.Store)(nil)
	_ migrate.MetaLister     = (*pebblestore.Store)(nil)
	_ migrate.MetaDeleter    = (*pebblestore.Store)(nil)
)

func TestCommitLogInterfaces(t *testing.T) {
	var s any = (*commitlog.Store)(nil)
	_, setter := s.(migrate.OffsetSetter)
	_, raw := s.(migrate.StoredAppender)
	_, lister := s.(migrate.MetaLister)
	assert.False(t, setter || raw || lister, "update the package documentation")
}

var bg = context.Background()

func deps(t testing.TB, dir string) store.Deps {
	set := storetest.DefaultSettings(dir)
	return store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set}
}

func openCommitLog(t testing.TB, dir string) store.Store {
	t.Helper()
	c := commitlog.NewConfig()
	c.SegmentSize = config.ByteSize(64 << 10)
	c.CQEntriesPerFile = 50
	s, err := commitlog.Open(c, deps(t, dir))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPebble(t testing.TB, dir string) store.Store {
	t.Helper()
	s, err := pebblestore.Open(pebblestore.NewConfig(), deps(t, dir))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var metaDocs = map[string]string{
	"topics":            `{"topicConfigTable":{"Orders":{"readQueueNums":4}}}`,
	"consumerOffset":    `{"offsetTable":{"Orders@g1":{"0":7,"1":3}}}`,
	"subscriptionGroup": `{"subscriptionGroupTable":{"g1":{}}}`,
}

// fill writes several topics with tags and keys, delayed messages (their
// tag code is the delivery time) and retried ones, in interleaved batches.
func fill(t *testing.T, s store.Store, rounds int) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		var batch []store.Message
		for i := 0; i < 10; i++ {
			n := r*10 + i
			m := storetest.Msg("Orders", int32(n%4), fmt.Sprintf("order-%d-%s", n, make([]byte, n%300)),
				map[string]string{"TAGS": []string{"A", "B", "C"}[n%3], "KEYS": fmt.Sprintf("o%d user%d", n, n%5), "UNIQ_KEY": fmt.Sprintf("U%08d", n)})
			batch = append(batch, m)
		}
		batch = append(batch, storetest.Msg("Audit", 0, fmt.Sprintf("audit-%d", r), nil))
		d := storetest.Msg("SCHEDULE_TOPIC_XXXX", 2, fmt.Sprintf("delayed-%d", r), map[string]string{
			"DELAY": "3", "REAL_TOPIC": "Orders", "REAL_QID": "1", "TAGS": "A", "UNIQ_KEY": fmt.Sprintf("D%08d", r)})
		d.TagsCode = 1700000000000 + int64(r)*1000 // delivery time
		batch = append(batch, d)
		rt := storetest.Msg("%RETRY%g1", 0, fmt.Sprintf("retry-%d", r), map[string]string{
			"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "0A0102030000000000000001", "RECONSUME_TIME": "1"})
		rt.ReconsumeTimes = 1 + int32(r%3)
		batch = append(batch, rt)
		_, err := s.Append(bg, batch)
		require.NoError(t, err)
	}
	md := s.(store.Metadata)
	for name, doc := range metaDocs {
		require.NoError(t, md.SaveMeta(name, []byte(doc)))
	}
}

type entry struct {
	rec  []byte
	code int64
}

// dump reads every queue with the tag codes the entries carry.
func dump(t *testing.T, s store.Store) map[store.Queue][]entry {
	t.Helper()
	out := map[store.Queue][]entry{}
	for _, q := range s.(store.QueueLister).Queues() {
		mn, mx, err := s.Offsets(q)
		require.NoError(t, err)
		var r store.ReadResult
		for off := mn; off < mx; off = r.NextOffset {
			var codes []int64
			require.NoError(t, s.Read(bg, q, off, store.ReadOptions{Filter: func(c int64) bool { codes = append(codes, c); return true }}, &r))
			require.Equal(t, store.Found, r.Status)
			for i, rec := range r.Records {
				require.Equal(t, off+int64(i), r.QueueOffsets[i])
				out[q] = append(out[q], entry{append([]byte(nil), rec...), codes[i]})
			}
		}
	}
	return out
}

// same checks that b is a copy of a: same queues, offsets, tag codes and
// messages; store timestamps compared when keptTS.
func same(t *testing.T, a, b store.Store, keptTS bool) {
	t.Helper()
	da, db := dump(t, a), dump(t, b)
	require.Equal(t, slicesOf(maps.Keys(da)), slicesOf(maps.Keys(db)))
	for q, ea := range da {
		eb := db[q]
		require.Len(t, eb, len(ea), "%s", q)
		amn, amx, _ := a.Offsets(q)
		bmn, bmx, _ := b.Offsets(q)
		assert.Equal(t, [2]int64{amn, amx}, [2]int64{bmn, bmx}, "%s offsets", q)
		for i := range ea {
			ma, mb := storetest.Decode(t, ea[i].rec), storetest.Decode(t, eb[i].rec)
			assert.Equal(t, ea[i].code, eb[i].code, "%s %d tag code", q, i)
			assert.Equal(t, ma.Topic, mb.Topic)
			assert.Equal(t, ma.QueueID, mb.QueueID)
			assert.Equal(t, ma.QueueOffset, mb.QueueOffset)
			assert.Equal(t, string(ma.Body), string(mb.Body))
			assert.Equal(t, map[string]string(storetest.StripRecordCRC(ma.Properties)), map[string]string(storetest.StripRecordCRC(mb.Properties)))
			assert.Equal(t, ma.Flag, mb.Flag)
			assert.Equal(t, ma.SysFlag, mb.SysFlag)
			assert.Equal(t, ma.BornTimestamp, mb.BornTimestamp)
			assert.Equal(t, ma.BornHost, mb.BornHost)
			assert.Equal(t, ma.StoreHost, mb.StoreHost)
			assert.Equal(t, ma.ReconsumeTimes, mb.ReconsumeTimes)
			assert.True(t, mb.VerifyCRC())
			if keptTS {
				assert.Equal(t, ma.StoreTimestamp, mb.StoreTimestamp, "%s %d store timestamp", q, i)
				assert.Equal(t, string(ea[i].rec[36:]), string(eb[i].rec[36:]), "bytes after the physical offset are identical")
			}
			// Lookup by the new physical offset finds the copy.
			rec, err := b.Lookup(bg, mb.CommitLogOffset)
			require.NoError(t, err)
			assert.Equal(t, eb[i].rec, rec)
		}
	}
	for name, doc := range metaDocs {
		got, err := b.(store.Metadata).LoadMeta(name)
		require.NoError(t, err)
		assert.Equal(t, doc, string(got))
	}
	// Keys are indexed in the target.
	ka, kb := a.(store.KeyIndexer), b.(store.KeyIndexer)
	for _, key := range []string{"user3", "o17", "U00000042", "D00000003"} {
		for _, topic := range []string{"Orders", "SCHEDULE_TOPIC_XXXX"} {
			ra, err := ka.QueryByKey(bg, topic, key, 0, time.Now().Add(time.Hour).UnixMilli(), 100)
			require.NoError(t, err)
			rb, err := kb.QueryByKey(bg, topic, key, 0, time.Now().Add(time.Hour).UnixMilli(), 100)
			require.NoError(t, err)
			assert.Equal(t, bodies(t, ra), bodies(t, rb), "%s %s", topic, key)
		}
	}
}

func slicesOf(seq func(func(store.Queue) bool)) map[store.Queue]bool {
	out := map[store.Queue]bool{}
	for q := range seq {
		out[q] = true
	}
	return out
}

func bodies(t *testing.T, recs [][]byte) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(storetest.Decode(t, r).Body))
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	src := openCommitLog(t, t.TempDir())
	fill(t, src, 30)

	peb := openPebble(t, t.TempDir())
	var last migrate.Progress
	rep, err := migrate.Migrate(bg, src, peb, migrate.Options{Source: "commitlog:src", Verify: true, Progress: func(p migrate.Progress) { last = p }})
	require.NoError(t, err)
	assert.Equal(t, int64(30*13), rep.Messages)
	assert.Equal(t, rep.Messages, rep.Counted)
	assert.Equal(t, rep.Messages, rep.Verified)
	assert.True(t, rep.TimestampsKept)
	assert.Zero(t, rep.Raised)
	assert.Equal(t, 7, rep.Queues)
	assert.ElementsMatch(t, []string{"topics", "consumerOffset", "subscriptionGroup"}, rep.Meta)
	assert.Equal(t, "done", last.Phase)
	assert.Equal(t, rep.Messages, last.Total)
	same(t, src, peb, true)
	_, err = peb.(store.Metadata).LoadMeta(migrate.MarkerName)
	assert.ErrorIs(t, err, store.ErrNotFound, "the marker is removed")

	back := openCommitLog(t, t.TempDir())
	rep, err = migrate.Migrate(bg, peb, back, migrate.Options{Source: "pebble:peb", Verify: true})
	require.NoError(t, err)
	assert.False(t, rep.TimestampsKept, "the commit log stamps appends itself")
	assert.Equal(t, int64(30*13), rep.Verified)
	same(t, src, back, false)
	same(t, peb, back, false)

	t.Run("non-empty target", func(t *testing.T) {
		_, err := migrate.Migrate(bg, src, peb, migrate.Options{})
		assert.ErrorIs(t, err, migrate.ErrTargetNotEmpty)
		_, err = migrate.Migrate(bg, peb, back, migrate.Options{})
		assert.ErrorIs(t, err, migrate.ErrTargetNotEmpty, "a finished migration's marker")
		onlyMeta := openPebble(t, t.TempDir())
		require.NoError(t, onlyMeta.(store.Metadata).SaveMeta("topics", []byte("{}")))
		_, err = migrate.Migrate(bg, src, onlyMeta, migrate.Options{})
		assert.ErrorIs(t, err, migrate.ErrTargetNotEmpty)
	})
}

// TestResume interrupts a migration and runs it again, with the target
// reopened in between.
func TestResume(t *testing.T) {
	for _, kind := range []string{"pebble", "commitlog"} {
		t.Run(kind, func(t *testing.T) {
			src := openPebble(t, t.TempDir())
			fill(t, src, 40)
			dir := t.TempDir()
			open := openPebble
			if kind == "commitlog" {
				open = openCommitLog
			}
			dst := open(t, dir)
			ctx, cancel := context.WithCancel(bg)
			_, err := migrate.Migrate(ctx, src, dst, migrate.Options{Source: "s", BatchMessages: 16, Progress: func(p migrate.Progress) {
				if p.Messages >= 200 {
					cancel()
				}
			}})
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, dst.Close())
			dst = open(t, dir)
			_, err = migrate.Migrate(bg, src, dst, migrate.Options{Source: "other"})
			assert.ErrorIs(t, err, migrate.ErrTargetNotEmpty, "another source")
			rep, err := migrate.Migrate(bg, src, dst, migrate.Options{Source: "s", Verify: true})
			require.NoError(t, err)
			assert.True(t, rep.Resumed)
			assert.GreaterOrEqual(t, rep.Skipped, int64(200))
			assert.Equal(t, int64(40*13), rep.Skipped+rep.Messages)
			same(t, src, dst, kind == "pebble")
		})
	}
}

// TestMinOffsetAboveZero copies a store whose retention moved queue
// minimums: Pebble starts the queues there; the commit log cannot, so the
// migration is refused unless rebasing is allowed.
func TestMinOffsetAboveZero(t *testing.T) {
	src := openCommitLog(t, t.TempDir())
	fill(t, src, 30)
	time.Sleep(5 * time.Millisecond)
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	fill(t, src, 30)
	require.NoError(t, src.(store.Flusher).Flush(bg))
	_, err := src.DeleteBefore(bg, cut)
	require.NoError(t, err)
	q := store.Queue{Topic: "Orders", ID: 1}
	mn, _, err := src.Offsets(q)
	require.NoError(t, err)
	require.Greater(t, mn, int64(0), "retention moved min")

	peb := openPebble(t, t.TempDir())
	_, err = migrate.Migrate(bg, src, peb, migrate.Options{Verify: true})
	require.NoError(t, err)
	same(t, src, peb, true)
	var r store.ReadResult
	require.NoError(t, peb.Read(bg, q, 0, store.ReadOptions{}, &r))
	assert.Equal(t, store.OffsetTooSmall, r.Status)
	assert.Equal(t, mn, r.NextOffset)

	cl := openCommitLog(t, t.TempDir())
	_, err = migrate.Migrate(bg, peb, cl, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrOffsetGap)
	assert.Empty(t, cl.(store.QueueLister).Queues(), "refused before copying")
	rep, err := migrate.Migrate(bg, peb, cl, migrate.Options{AllowRebase: true, Verify: true})
	require.NoError(t, err)
	assert.Equal(t, mn, rep.Rebased[q])
	cmn, cmx, err := cl.Offsets(q)
	require.NoError(t, err)
	_, pmx, _ := peb.Offsets(q)
	assert.Equal(t, [2]int64{0, pmx - mn}, [2]int64{cmn, cmx})
}

func TestErrorsAreMatchable(t *testing.T) {
	for _, err := range []error{migrate.ErrTargetNotEmpty, migrate.ErrOffsetGap, migrate.ErrUnsupported, migrate.ErrVerify} {
		assert.True(t, errors.Is(fmt.Errorf("x: %w", err), err))
	}
	_ = message.MagicCode
}
