package commitlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// testLogger logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func smallConfig(segSize int64) *Config {
	c := NewConfig()
	c.SegmentSize = config.ByteSize(segSize)
	c.CQEntriesPerFile = 50
	return c
}

func openStore(t testing.TB, cfg *Config, set store.Settings) *Store {
	t.Helper()
	s, err := Open(cfg, store.Deps{Logger: testLogger(t), Settings: set})
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			t.Run("default", func(t *testing.T) {
				storetest.Run(t, func(t *testing.T, dir string, set store.Settings) store.Store {
					set.Flush = mode
					return openStore(t, NewConfig(), set)
				})
			})
			t.Run("small", func(t *testing.T) {
				storetest.RunWithOptions(t, func(t *testing.T, dir string, set store.Settings) store.Store {
					set.Flush = mode
					return openStore(t, smallConfig(64<<10), set)
				}, storetest.Options{SegmentSize: 64 << 10})
			})
		})
	}
}

func settings(t testing.TB, mode store.FlushMode) store.Settings {
	s := storetest.DefaultSettings(t.TempDir())
	s.Flush = mode
	return s
}

func msg(topic string, qid int32, body string) store.Message {
	return storetest.Msg(topic, qid, body, map[string]string{"TAGS": "t"})
}

func TestSegmentRolling(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(minSegmentSize)
	s := openStore(t, cfg, set)
	defer s.Close()
	q := store.Queue{Topic: "Roll", ID: 0}
	var pos []store.Position
	for i := 0; i < 100; i++ {
		body := fmt.Sprintf("%03d-%s", i, make([]byte, 100+i*7%400))
		if i%10 == 0 {
			p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, body), msg(q.Topic, 1, "x"), msg(q.Topic, q.ID, body+"b")})
			require.NoError(t, err)
			pos = append(pos, p[0], p[2])
			continue
		}
		p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	segs, err := os.ReadDir(filepath.Join(set.Dir, "commitlog"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 5, "segments rolled")
	for i, e := range segs {
		assert.Equal(t, fmt.Sprintf("%020d", int64(i)*minSegmentSize), e.Name())
		fi, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, int64(minSegmentSize), fi.Size())
	}
	for _, p := range pos {
		assert.LessOrEqual(t, p.CommitLogOffset%minSegmentSize+int64(p.Size), int64(minSegmentSize-blankSize), "a record never spans segments")
	}
	check := func(s *Store) {
		var r store.ReadResult
		off := int64(0)
		n := 0
		for {
			require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxMessages: 7}, &r))
			if r.Status != store.Found {
				require.Equal(t, store.OffsetOverflowOne, r.Status)
				break
			}
			for i, rec := range r.Records {
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.Equal(t, pos[n].CommitLogOffset, m.CommitLogOffset)
				assert.Equal(t, r.QueueOffsets[i], m.QueueOffset)
				n++
			}
			off = r.NextOffset
		}
		assert.Equal(t, len(pos), n)
		for _, p := range pos {
			rec, err := s.Lookup(bg, p.CommitLogOffset)
			require.NoError(t, err)
			assert.Len(t, rec, int(p.Size))
		}
		require.NoError(t, s.Flush(bg))
		cqs, err := os.ReadDir(filepath.Join(set.Dir, "consumequeue", q.Topic, "0"))
		require.NoError(t, err)
		assert.Len(t, cqs, (len(pos)+cfg.CQEntriesPerFile-1)/cfg.CQEntriesPerFile, "consume-queue files roll too")
	}
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	check(s)
	p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	require.NoError(t, err)
	assert.Equal(t, int64(len(pos)), p[0].QueueOffset)
}

func TestTornTail(t *testing.T) {
	for _, tt := range []struct {
		name string
		cut  func(size int32) int64 // bytes of the last record kept
	}{
		{"middle of body", func(size int32) int64 { return int64(size) / 2 }},
		{"inside header", func(int32) int64 { return 6 }},
		{"one byte short", func(size int32) int64 { return int64(size) - 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := settings(t, store.FlushSync)
			cfg := smallConfig(64 << 10)
			s := openStore(t, cfg, set)
			q := store.Queue{Topic: "Torn", ID: 0}
			var pos []store.Position
			for i := 0; i < 20; i++ {
				p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, strconv.Itoa(i)+string(make([]byte, 300))), msg(q.Topic, 1, "other")})
				require.NoError(t, err)
				pos = append(pos, p...)
			}
			require.NoError(t, s.Close())

			last := pos[len(pos)-1]
			seg := filepath.Join(set.Dir, "commitlog", segmentName(last.CommitLogOffset-last.CommitLogOffset%(64<<10)))
			require.NoError(t, os.Truncate(seg, last.CommitLogOffset%(64<<10)+tt.cut(last.Size)))

			s = openStore(t, cfg, set)
			defer s.Close()
			_, mx, err := s.Offsets(store.Queue{Topic: q.Topic, ID: 1})
			require.NoError(t, err)
			assert.Equal(t, int64(19), mx, "the torn record is gone")
			_, mx, err = s.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, int64(20), mx)
			for _, p := range pos[:len(pos)-1] {
				rec, err := s.Lookup(bg, p.CommitLogOffset)
				require.NoError(t, err)
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.True(t, m.VerifyCRC())
			}
			_, err = s.Lookup(bg, last.CommitLogOffset)
			assert.Error(t, err)
			var r store.ReadResult
			require.NoError(t, s.Read(bg, store.Queue{Topic: q.Topic, ID: 1}, 0, store.ReadOptions{}, &r))
			assert.Len(t, r.Records, 19)

			p, err := s.Append(bg, []store.Message{msg(q.Topic, 1, "new")})
			require.NoError(t, err)
			assert.Equal(t, int64(19), p[0].QueueOffset)
			assert.Equal(t, last.CommitLogOffset, p[0].CommitLogOffset, "appends continue at the recovered end")
			require.NoError(t, s.Close())

			s = openStore(t, cfg, set)
			defer s.Close()
			require.NoError(t, s.Read(bg, store.Queue{Topic: q.Topic, ID: 1}, 18, store.ReadOptions{}, &r))
			require.Len(t, r.Records, 2)
			m, _, err := message.DecodeStored(r.Records[1])
			require.NoError(t, err)
			assert.Equal(t, "new", string(m.Body))
		})
	}
}

func TestGarbageTail(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(64 << 10)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Garbage", ID: 0}
	var pos []store.Position
	for i := 0; i < 5; i++ {
		p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, strconv.Itoa(i))})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())
	// A record whose body CRC is wrong after the end, and no checkpoint.
	last := pos[len(pos)-1]
	end := last.CommitLogOffset + int64(last.Size)
	bad := msg(q.Topic, q.ID, "bad")
	rec, err := message.EncodeStored(bad.Ext)
	require.NoError(t, err)
	message.PatchStored(rec, 5, end, time.Now().UnixMilli())
	rec[len(rec)-1-2-len(bad.Properties.Encode())-len(q.Topic)-1] ^= 0xff // flip a body byte
	f, err := os.OpenFile(filepath.Join(set.Dir, "commitlog", segmentName(0)), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(rec, end)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))

	s = openStore(t, cfg, set)
	defer s.Close()
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(5), mx)
	p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "good")})
	require.NoError(t, err)
	assert.Equal(t, end, p[0].CommitLogOffset)
	assert.Equal(t, int64(5), p[0].QueueOffset)
}

func TestRebuildConsumeQueue(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(64 << 10)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Rebuild", ID: 3}
	for i := 0; i < 120; i++ {
		_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, strconv.Itoa(i))})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	// Lose the consume queue and the checkpoint: recovery rebuilds the
	// queue from the last segment.
	require.NoError(t, os.RemoveAll(filepath.Join(set.Dir, "consumequeue")))
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))
	s = openStore(t, cfg, set)
	defer s.Close()
	mn, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 120}, [2]int64{mn, mx})
	var r store.ReadResult
	require.NoError(t, s.Read(bg, q, 100, store.ReadOptions{Filter: func(c int64) bool { return c == message.TagsHashCode("t") }}, &r))
	require.Len(t, r.Records, 20)
}

func TestSyncGroupCommit(t *testing.T) {
	set := settings(t, store.FlushSync)
	set.FlushInterval = time.Hour // only group commits sync
	s := openStore(t, NewConfig(), set)
	defer s.Close()
	const writers, each = 32, 40
	before := s.syncs.Load()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				pos, err := s.Append(bg, []store.Message{msg("Group", int32(w%4), "x")})
				if err != nil {
					errs <- err
					return
				}
				s.flushMu.Lock()
				flushed := s.flushed
				s.flushMu.Unlock()
				if flushed < pos[0].CommitLogOffset+int64(pos[0].Size) {
					errs <- fmt.Errorf("acknowledged %d before it was synced (%d)", pos[0].CommitLogOffset, flushed)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	syncs := s.syncs.Load() - before
	t.Logf("%d appends, %d fsyncs", writers*each, syncs)
	assert.Less(t, syncs, int64(writers*each), "concurrent appenders share fsyncs")
}

func TestSyncContextCanceled(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushSync))
	defer s.Close()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := s.Append(ctx, []store.Message{msg("Ctx", 0, "x")})
	require.Error(t, err)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(c *Config)
		want string
	}{
		{"defaults", func(*Config) {}, ""},
		{"small segment", func(c *Config) { c.SegmentSize = 4096 }, "segment_size"},
		{"few entries", func(c *Config) { c.CQEntriesPerFile = 10 }, "cq_entries_per_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig()
			tt.give(c)
			err := c.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestOpenBadArguments(t *testing.T) {
	tests := []struct {
		name string
		cfg  *Config
		set  store.Settings
	}{
		{"no dir", NewConfig(), store.Settings{}},
		{"tiny segment", smallConfig(1024), store.Settings{Dir: t.TempDir()}},
		{"bad flush", NewConfig(), store.Settings{Dir: t.TempDir(), Flush: "sometimes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.cfg, store.Deps{Settings: tt.set})
			assert.ErrorIs(t, err, store.ErrBadArgument)
		})
	}
}

func TestSegmentSizeChanged(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, smallConfig(64<<10), set)
	_, err := s.Append(bg, []store.Message{msg("Size", 0, "x")})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Open(smallConfig(32<<10), store.Deps{Settings: set})
	assert.ErrorContains(t, err, "segment_size")
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	assert.Equal(t, "commitlog", p.ID())
	cfg, ok := p.NewConfig().(*Config)
	require.True(t, ok)
	s, err := p.Open(bg, cfg, store.Deps{Settings: settings(t, store.FlushAsync)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = p.Open(bg, struct{}{}, store.Deps{Settings: settings(t, store.FlushAsync)})
	assert.ErrorIs(t, err, store.ErrBadArgument)
}

func TestDirectoryLock(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	_, err := Open(NewConfig(), store.Deps{Settings: set})
	assert.ErrorContains(t, err, "in use")
	require.NoError(t, s.Close())
	s = openStore(t, NewConfig(), set)
	require.NoError(t, s.Close())
}

func TestWriteFailure(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			set := settings(t, mode)
			s := openStore(t, NewConfig(), set)
			q := store.Queue{Topic: "Fail", ID: 0}
			_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "kept")})
			require.NoError(t, err)
			require.NoError(t, s.Flush(bg))
			// Pull the file out from under the store: the next write fails.
			// (The writer's map of it goes too, as it would with the file.)
			require.NoError(t, s.activeSegment().f.Close())
			s.mu.Lock()
			s.unmapWriter()
			s.mu.Unlock()
			_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "lost")})
			require.ErrorIs(t, err, store.ErrNotDurable)
			_, mx, err := s.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, int64(1), mx, "a failed append is not indexed")
			_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "refused")})
			require.ErrorIs(t, err, store.ErrNotDurable, "writes stay disabled")
			assert.Error(t, s.Close())

			s = openStore(t, NewConfig(), set)
			defer s.Close()
			var r store.ReadResult
			require.NoError(t, s.Read(bg, q, 0, store.ReadOptions{}, &r))
			require.Len(t, r.Records, 1)
			pos, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "again")})
			require.NoError(t, err)
			assert.Equal(t, int64(1), pos[0].QueueOffset)
		})
	}
}

// TestTornProperties zeroes the end of the last record in place (a torn
// page after the body: the body CRC still matches) and loses the
// checkpoint, as a crash before the next checkpoint would.
func TestTornProperties(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	q := store.Queue{Topic: "TornProps", ID: 0}
	var pos []store.Position
	for i := 0; i < 3; i++ {
		p, err := s.Append(bg, []store.Message{storetest.Msg(q.Topic, q.ID, "body", map[string]string{"KEYS": "some-key", "TAGS": "t"})})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())
	last := pos[len(pos)-1]
	f, err := os.OpenFile(filepath.Join(set.Dir, "commitlog", segmentName(0)), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 5), last.CommitLogOffset+int64(last.Size)-5)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))

	s = openStore(t, NewConfig(), set)
	defer s.Close()
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(2), mx)
	_, err = s.Lookup(bg, last.CommitLogOffset)
	assert.Error(t, err)
}

func TestRecoveredTagsCode(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	sched := storetest.Msg(protocol.ScheduleTopic, 2, "later", map[string]string{"DELAY": "3", "TAGS": "x"})
	sched.TagsCode = message.TagsCode("x")
	plain := storetest.Msg("Plain", 0, "now", map[string]string{"TAGS": "a||b"})
	plain.TagsCode = message.TagsCode("a||b")
	pos, err := s.Append(bg, []store.Message{sched, plain})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(set.Dir, "consumequeue")))
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))

	s = openStore(t, NewConfig(), set)
	defer s.Close()
	var codes []int64
	keep := func(c int64) bool { codes = append(codes, c); return true }
	var r store.ReadResult
	require.NoError(t, s.Read(bg, store.Queue{Topic: protocol.ScheduleTopic, ID: 2}, 0, store.ReadOptions{Filter: keep}, &r))
	require.NoError(t, s.Read(bg, store.Queue{Topic: "Plain"}, 0, store.ReadOptions{Filter: keep}, &r))
	// Rebuilt entries carry message.TagsCode, what the broker stores.
	assert.Equal(t, []int64{message.TagsHashCode("x"), message.MultiTagsCode}, codes)
	_ = pos
}

// TestRebuildAfterRetention loses the consume queues of a store whose first
// segments were deleted: the queue is rebuilt from the last segment, its
// min at the first record there.
func TestRebuildAfterRetention(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(minSegmentSize)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Rebuild", ID: 1}
	var pos []store.Position
	for i := 0; i < 60; i++ {
		p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, fmt.Sprintf("%02d%s", i, make([]byte, 200)))})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(set.Dir, "consumequeue")))
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))
	require.NoError(t, os.Remove(filepath.Join(set.Dir, "commitlog", segmentName(0))))

	s = openStore(t, cfg, set)
	defer s.Close()
	// The recovery scan reads the whole log (the key index is on): the
	// queue is rebuilt from its first record in the first segment left.
	first := int64(-1)
	for _, p := range pos {
		if p.CommitLogOffset >= minSegmentSize {
			first = p.QueueOffset
			break
		}
	}
	mn, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{first, 60}, [2]int64{mn, mx})
	var r store.ReadResult
	require.NoError(t, s.Read(bg, q, 0, store.ReadOptions{}, &r))
	assert.Equal(t, store.OffsetTooSmall, r.Status)
	require.NoError(t, s.Read(bg, q, mn, store.ReadOptions{}, &r))
	require.Equal(t, store.Found, r.Status)
	m, _, err := message.DecodeStored(r.Records[0])
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%02d", first), string(m.Body[:2]))
	p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "next")})
	require.NoError(t, err)
	assert.Equal(t, int64(60), p[0].QueueOffset)
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	mn2, mx2, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{first, 61}, [2]int64{mn2, mx2})
}

// TestHoleBeforeLaterSegment crashes (copies the directory without Close)
// after a checkpoint, then loses the end of a full segment (its last
// records and end-of-file marker never reached the disk) while later
// segments have data: the log ends at the hole and the later segments go.
func TestHoleBeforeLaterSegment(t *testing.T) {
	set := settings(t, store.FlushAsync)
	set.FlushInterval = time.Hour
	cfg := smallConfig(minSegmentSize)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Hole", ID: 0}
	var pos []store.Position
	for i := 0; i < 30; i++ {
		p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, fmt.Sprintf("%02d%s", i, make([]byte, 300)))})
		require.NoError(t, err)
		pos = append(pos, p...)
		if i == 2 {
			require.NoError(t, s.Flush(bg)) // checkpoint at record 3
		}
	}
	require.Greater(t, pos[len(pos)-1].CommitLogOffset, int64(2*minSegmentSize), "three segments at least")
	crash := filepath.Join(t.TempDir(), "crash")
	copyDir(t, set.Dir, crash)
	require.NoError(t, s.Close())
	cut := pos[3].CommitLogOffset
	require.NoError(t, os.Truncate(filepath.Join(crash, "commitlog", segmentName(0)), cut))

	cset := set
	cset.Dir = crash
	s = openStore(t, cfg, cset)
	defer s.Close()
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(3), mx, "entries past the end are dropped")
	segs, err := os.ReadDir(filepath.Join(crash, "commitlog"))
	require.NoError(t, err)
	assert.Len(t, segs, 1)
	p, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "next")})
	require.NoError(t, err)
	assert.Equal(t, cut, p[0].CommitLogOffset)
	assert.Equal(t, int64(3), p[0].QueueOffset)
}

// TestCloseUnderLoad closes a sync-mode store while appenders wait for
// group commits: every append either succeeds (and survives a reopen) or
// fails with ErrClosed; none hangs.
func TestCloseUnderLoad(t *testing.T) {
	set := settings(t, store.FlushSync)
	s := openStore(t, NewConfig(), set)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok []store.Position
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				pos, err := s.Append(bg, []store.Message{msg("Load", int32(w%2), strconv.Itoa(i))})
				if err != nil {
					assert.ErrorIs(t, err, store.ErrClosed)
					return
				}
				mu.Lock()
				ok = append(ok, pos...)
				mu.Unlock()
			}
		}(w)
	}
	for {
		mu.Lock()
		n := len(ok)
		mu.Unlock()
		if n >= 200 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, s.Close())
	wg.Wait()
	s = openStore(t, NewConfig(), set)
	defer s.Close()
	for _, p := range ok {
		_, err := s.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
	}
}

// TestGroupWrite queues many Append calls behind the write lock so one
// writer pass takes them all: good calls land densely, bad ones (whose
// first message may have rolled a segment) fail alone.
func TestGroupWrite(t *testing.T) {
	set := settings(t, store.FlushAsync)
	set.MaxMessageSize = 2048
	cfg := smallConfig(minSegmentSize)
	s := openStore(t, cfg, set)
	defer s.Close()
	const calls = 40
	type result struct {
		good bool
		body string
		pos  []store.Position
		err  error
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	s.mu.Lock()
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := fmt.Sprintf("%02d%s", i, make([]byte, 600))
			batch := []store.Message{msg("Group", int32(i%3), body)}
			good := i%4 != 1
			if !good {
				batch = append(batch, msg("Group", int32(i%3), string(make([]byte, 4096))))
			}
			pos, err := s.Append(bg, batch)
			results[i] = result{good: good, body: body, pos: pos, err: err}
		}(i)
	}
	waitPending(s, calls)
	before := s.writes.Load()
	s.mu.Unlock()
	wg.Wait()
	assert.Equal(t, int64(1), s.writes.Load()-before, "one writer pass")

	byQueue := map[int32]map[int64]string{}
	for i, r := range results {
		if !r.good {
			assert.ErrorIs(t, r.err, store.ErrTooLarge, "call %d", i)
			assert.Nil(t, r.pos)
			continue
		}
		require.NoError(t, r.err, "call %d", i)
		require.Len(t, r.pos, 1)
		q := int32(i % 3)
		if byQueue[q] == nil {
			byQueue[q] = map[int64]string{}
		}
		byQueue[q][r.pos[0].QueueOffset] = r.body
		rec, err := s.Lookup(bg, r.pos[0].CommitLogOffset)
		require.NoError(t, err)
		m, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		assert.Equal(t, r.body, string(m.Body))
	}
	for q, offs := range byQueue {
		_, mx, err := s.Offsets(store.Queue{Topic: "Group", ID: q})
		require.NoError(t, err)
		require.Equal(t, int64(len(offs)), mx, "queue %d is dense", q)
		var r store.ReadResult
		for off := int64(0); off < mx; off = r.NextOffset {
			require.NoError(t, s.Read(bg, store.Queue{Topic: "Group", ID: q}, off, store.ReadOptions{}, &r))
			require.Equal(t, store.Found, r.Status)
			for i, rec := range r.Records {
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.Equal(t, offs[r.QueueOffsets[i]], string(m.Body))
			}
		}
	}
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	for q, offs := range byQueue {
		_, mx, err := s.Offsets(store.Queue{Topic: "Group", ID: q})
		require.NoError(t, err)
		assert.Equal(t, int64(len(offs)), mx)
	}
}

// TestOldSegmentDamage flips a byte in a record of an old segment, below
// the checkpoint: the key-index scan skips it, and the log after it is kept.
func TestOldSegmentDamage(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(minSegmentSize)
	s := openStore(t, cfg, set)
	q := store.Queue{Topic: "Damage", ID: 0}
	var pos []store.Position
	for i := 0; i < 40; i++ {
		p, err := s.Append(bg, []store.Message{storetest.Msg(q.Topic, q.ID, fmt.Sprintf("%02d%s", i, make([]byte, 300)), map[string]string{"KEYS": fmt.Sprintf("k%d", i)})})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())
	f, err := os.OpenFile(filepath.Join(set.Dir, "commitlog", segmentName(0)), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, pos[1].CommitLogOffset+5) // magic of record 1
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s = openStore(t, cfg, set)
	defer s.Close()
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(40), mx, "nothing is cut")
	for _, p := range pos[4:] {
		_, err := s.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
	}
	var r store.ReadResult
	require.NoError(t, s.Read(bg, q, 0, store.ReadOptions{MaxMessages: 4}, &r))
	require.Equal(t, store.Found, r.Status)
	assert.Equal(t, []int64{0, 2, 3, 4}, r.QueueOffsets, "the damaged message is skipped")
	assert.Equal(t, int64(5), r.NextOffset)
	recs, err := s.QueryByKey(bg, q.Topic, "k39", 0, time.Now().Add(time.Hour).UnixMilli(), 10)
	require.NoError(t, err)
	assert.Len(t, recs, 1, "records after the damage are indexed")
	recs, err = s.QueryByKey(bg, q.Topic, "k0", 0, time.Now().Add(time.Hour).UnixMilli(), 10)
	require.NoError(t, err)
	assert.Len(t, recs, 1, "records before it too")
}

// TestUncheckpointedRecordsWithoutProperties: records with no properties end
// with a zero properties length; recovery past the checkpoint keeps them.
func TestUncheckpointedRecordsWithoutProperties(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	q := store.Queue{Topic: "NoProps", ID: 0}
	for i := 0; i < 10; i++ {
		m := &message.Ext{Message: message.Message{Topic: q.Topic, Body: []byte(fmt.Sprint("body-", i)), Properties: message.Properties{}}}
		_, err := s.Append(bg, []store.Message{{Ext: m}})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	// Make the checkpoint vouch for nothing, as after a crash right after open.
	require.NoError(t, os.Remove(filepath.Join(set.Dir, checkpointName)))
	s = openStore(t, NewConfig(), set)
	defer s.Close()
	_, max, err := s.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(10), max)
}

// TestGroupWriteOverMaxGroup queues more calls than one writer pass takes
// (maxGroup): every call still gets its own position, none returns
// without one (a call behind the first maxGroup used to come back with
// no position and no error).
func TestGroupWriteOverMaxGroup(t *testing.T) {
	s := openStore(t, smallConfig(minSegmentSize), settings(t, store.FlushAsync))
	defer s.Close()
	const calls = 3*maxGroup + 5
	pos := make([][]store.Position, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	s.mu.Lock()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos[i], errs[i] = s.Append(bg, []store.Message{msg("Over", 0, fmt.Sprintf("m%03d", i))})
		}()
	}
	waitPending(s, calls)
	// The calls wait on s.mu in about the order they queued: reverse the
	// queue so the first one woken is behind the first pass's maxGroup.
	s.pendMu.Lock()
	slices.Reverse(s.pending)
	s.pendMu.Unlock()
	s.mu.Unlock()
	wg.Wait()
	seen := map[int64]bool{}
	for i := range calls {
		require.NoError(t, errs[i], "call %d", i)
		require.Len(t, pos[i], 1, "call %d", i)
		rec, err := s.Lookup(bg, pos[i][0].CommitLogOffset)
		require.NoError(t, err)
		m, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("m%03d", i), string(m.Body))
		assert.False(t, seen[pos[i][0].QueueOffset], "queue offset %d twice", pos[i][0].QueueOffset)
		seen[pos[i][0].QueueOffset] = true
	}
	_, mx, err := s.Offsets(store.Queue{Topic: "Over", ID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(calls), mx)
}

// waitPending waits until n Append calls are queued behind s.mu (which the
// test holds).
func waitPending(s *Store, n int) {
	for {
		s.pendMu.Lock()
		k := len(s.pending)
		s.pendMu.Unlock()
		if k == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSyncGatherWaitsForExpectedWriters: a round's leader waits for as
// many writers as the last round answered and had gathered behind it
// (they come back after a round trip, not within a yield), so that they
// share one fdatasync instead of splitting into two; a writer that does
// not come back costs one bounded wait, after which fewer are expected;
// a lone writer expects nobody and does not wait.
func TestSyncGatherWaitsForExpectedWriters(t *testing.T) {
	set := settings(t, store.FlushSync)
	set.FlushInterval = time.Hour // only group commits sync
	s := openStore(t, NewConfig(), set)
	defer s.Close()
	_, err := s.Append(bg, []store.Message{msg("Gather", 0, "warm")})
	require.NoError(t, err)
	expect := func(n int, wait time.Duration) {
		s.flushMu.Lock()
		s.expect, s.gatherMax, s.lastSync = n, wait, wait
		s.flushMu.Unlock()
	}
	appendAsync := func(body string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Append(bg, []store.Message{msg("Gather", 0, body)})
			done <- err
		}()
		return done
	}

	// Three writers expected: the first waits for the other two.
	expect(3, time.Minute)
	before := s.syncs.Load()
	a := appendAsync("a")
	select {
	case err := <-a:
		t.Fatalf("the leader started its round alone (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Equal(t, before, s.syncs.Load(), "no fdatasync while the expected writers are missing")
	b, c := appendAsync("b"), appendAsync("c")
	for _, ch := range []<-chan error{a, b, c} {
		select {
		case err := <-ch:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the round did not start once the expected writers joined")
		}
	}
	assert.Equal(t, before+1, s.syncs.Load(), "the three writers share one fdatasync")
	s.flushMu.Lock()
	assert.Equal(t, 3, s.expect, "the next round expects the three it answered")
	s.flushMu.Unlock()

	// Five expected, one comes: it waits at most the bound, then starts,
	// and the next round expects one.
	expect(5, 50*time.Millisecond)
	before = s.syncs.Load()
	select {
	case err := <-appendAsync("alone"):
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a leader waited past its bound")
	}
	assert.Equal(t, before+1, s.syncs.Load())
	s.flushMu.Lock()
	assert.Equal(t, 1, s.expect, "the writers that did not come back are no longer expected")
	s.flushMu.Unlock()

	// One expected: a lone writer does not wait (the bound is a minute).
	expect(1, time.Minute)
	select {
	case err := <-appendAsync("lone"):
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a lone writer waited for writers nobody expected")
	}
}
