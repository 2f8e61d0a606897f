package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// TestTornLastMessageEveryByte cuts the last message of the last segment at
// every byte position — both as a shorter file and as zeros from the cut on
// (a preallocated file) — and shows recovery keeps every earlier message,
// drops the torn one, and takes new appends at the next offset.
func TestTornLastMessageEveryByte(t *testing.T) {
	base := settings(t, store.FlushAsync)
	cfg := smallConfig(1 << 20)
	s := openStore(t, cfg, base)
	q := store.Queue{Topic: "Torn", ID: 0}
	const n = 20
	var last store.Position
	for i := 0; i < n; i++ {
		pos, err := s.Append(bg, []store.Message{tornMsg(q, i)})
		require.NoError(t, err)
		last = pos[0]
	}
	require.NoError(t, s.Close())
	// The checkpoint must not vouch for the last record.
	require.NoError(t, os.Remove(filepath.Join(base.Dir, checkpointName)))
	seg := filepath.Join("commitlog", fmt.Sprintf("%020d", 0))

	for cut := int64(0); cut < int64(last.Size); cut++ {
		for _, mode := range []string{"truncate", "zero"} {
			dir := filepath.Join(t.TempDir(), "s")
			copyDir(t, base.Dir, dir)
			path := filepath.Join(dir, seg)
			at := last.CommitLogOffset + cut
			if mode == "truncate" {
				require.NoError(t, os.Truncate(path, at))
			} else {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt(make([]byte, int64(last.Size)-cut), at)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			set := base
			set.Dir = dir
			r, err := Open(cfg, store.Deps{Logger: testLogger(t), Settings: set})
			require.NoError(t, err, "cut %d (%s)", cut, mode)
			_, max, err := r.Offsets(q)
			require.NoError(t, err)
			require.Equal(t, int64(n-1), max, "cut %d (%s): only the torn message goes", cut, mode)
			var res store.ReadResult
			require.NoError(t, r.Read(bg, q, 0, store.ReadOptions{MaxMessages: n}, &res))
			require.Len(t, res.Records, n-1)
			for i, rec := range res.Records {
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("msg-%d", i), string(m.Body))
			}
			pos, err := r.Append(bg, []store.Message{tornMsg(q, 99)})
			require.NoError(t, err, "cut %d (%s): appends continue", cut, mode)
			assert.Equal(t, int64(n-1), pos[0].QueueOffset)
			assert.Equal(t, last.CommitLogOffset, pos[0].CommitLogOffset, "the new record takes the torn one's place")
			require.NoError(t, r.Close())
		}
	}
}

func tornMsg(q store.Queue, i int) store.Message {
	return store.Message{Ext: &message.Ext{Message: message.Message{Topic: q.Topic, Body: []byte(fmt.Sprintf("msg-%d", i)),
		Properties: message.Properties{"TAGS": "t", "KEYS": fmt.Sprint("k", i)}}, QueueID: q.ID}}
}
