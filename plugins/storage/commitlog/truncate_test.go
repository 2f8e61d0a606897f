package commitlog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

type truncMsg struct {
	q   store.Queue
	key string
	pos store.Position
}

// fillForTruncate writes 60 keyed messages over two queues across several
// 8 KiB segments and closes the store.
func fillForTruncate(t *testing.T, cfg *Config, set store.Settings) []truncMsg {
	t.Helper()
	s := openStore(t, cfg, set)
	var out []truncMsg
	for i := range 60 {
		q := store.Queue{Topic: "Trunc", ID: int32(i % 2)}
		m := msg(q.Topic, q.ID, fmt.Sprintf("body-%04d-%0300d", i, i))
		m.Properties["KEYS"] = fmt.Sprintf("k%d", i)
		p, err := s.Append(bg, []store.Message{m})
		require.NoError(t, err)
		out = append(out, truncMsg{q: q, key: fmt.Sprintf("k%d", i), pos: p[0]})
	}
	require.NoError(t, s.Close())
	return out
}

func TestTruncateDir(t *testing.T) {
	const segSize = 8 << 10
	cfg := smallConfig(segSize)
	cfg.KeyIndex = true
	probe := fillForTruncate(t, cfg, settings(t, store.FlushAsync))
	firstOfSegment := -1
	for i, m := range probe {
		if i > 0 && m.pos.CommitLogOffset%segSize == 0 {
			firstOfSegment = i
			break
		}
	}
	require.Positive(t, firstOfSegment, "some message starts a segment")
	tests := []struct {
		name    string
		give    int // cut at the offset of message give (len: the end)
		wantCut bool
	}{
		{"mid segment", 37, true},
		{"first record", 0, true},
		{"segment boundary", firstOfSegment, true},
		{"just before the end", 59, true},
		{"at the end", 60, false},
	}
	for _, tt := range tests {
		for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
			t.Run(tt.name+"/"+string(mode), func(t *testing.T) {
				set := settings(t, mode)
				msgs := fillForTruncate(t, cfg, set)
				last := msgs[len(msgs)-1].pos
				off := last.CommitLogOffset + int64(last.Size)
				if tt.give < len(msgs) {
					off = msgs[tt.give].pos.CommitLogOffset
				}
				cut, err := Provider{}.TruncateLog(bg, cfg, store.Deps{Settings: set}, off)
				require.NoError(t, err)
				assert.Equal(t, tt.wantCut, cut)

				s := openStore(t, cfg, set)
				defer s.Close()
				_, end := s.LogOffsets()
				assert.Equal(t, off, end, "the log ends at the cut")
				want := map[store.Queue]int64{}
				for _, m := range msgs[:tt.give] {
					want[m.q]++
				}
				for _, q := range []store.Queue{{Topic: "Trunc", ID: 0}, {Topic: "Trunc", ID: 1}} {
					_, mx, err := s.Offsets(q)
					if want[q] == 0 && err != nil {
						continue
					}
					require.NoError(t, err)
					assert.Equal(t, want[q], mx, "queue %d keeps the entries below the cut", q.ID)
				}
				for i, m := range msgs {
					rec, err := s.Lookup(bg, m.pos.CommitLogOffset)
					keys, kerr := s.QueryByKey(bg, "Trunc", m.key, 0, 1<<62, 10)
					require.NoError(t, kerr)
					if i < tt.give {
						assert.NoError(t, err, "message %d stays", i)
						assert.Len(t, keys, 1, "message %d is still indexed", i)
						continue
					}
					assert.True(t, err != nil || len(rec) == 0, "message %d is gone", i)
					assert.Empty(t, keys, "message %d is no longer indexed", i)
				}
				// Appends go on at the cut, and queue offsets follow on.
				p, err := s.Append(bg, []store.Message{msg("Trunc", 0, "after")})
				require.NoError(t, err)
				assert.Equal(t, off, p[0].CommitLogOffset)
				assert.Equal(t, want[store.Queue{Topic: "Trunc", ID: 0}], p[0].QueueOffset)
				var res store.ReadResult
				require.NoError(t, s.Read(bg, store.Queue{Topic: "Trunc", ID: 0}, p[0].QueueOffset, store.ReadOptions{MaxMessages: 1}, &res))
				require.Len(t, res.Records, 1)
			})
		}
	}
}

func TestTruncateDirRefuses(t *testing.T) {
	cfg := smallConfig(8 << 10)
	set := settings(t, store.FlushAsync)
	fillForTruncate(t, cfg, set)
	s := openStore(t, cfg, set)
	_, err := TruncateDir(set.Dir, 8<<10, 0)
	assert.Error(t, err, "an open store is locked")
	require.NoError(t, s.Close())
	_, err = TruncateDir(set.Dir, 100, 0)
	assert.ErrorIs(t, err, store.ErrBadArgument)
	cut, err := TruncateDir(t.TempDir(), 8<<10, 0)
	assert.NoError(t, err, "an empty directory has nothing to cut")
	assert.False(t, cut)
}
