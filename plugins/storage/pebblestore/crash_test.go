package pebblestore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// TestCrash simulates a machine crash with Pebble's crashable in-memory
// file system: CrashClone keeps what was synced and, at random, some of
// what was not. It is taken while writers append. In sync mode every
// message acknowledged before the clone must be in the clone; in async
// mode those acknowledged before the last Flush. In both, the clone's
// queues are dense, its records whole, and it keeps taking writes.
func TestCrash(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		for _, unsynced := range []int{0, 50, 100} {
			t.Run(fmt.Sprintf("%s/unsynced%d", mode, unsynced), func(t *testing.T) {
				fs := vfs.NewCrashableMem()
				cfg := NewConfig()
				cfg.FS = fs
				cfg.MemTableSize = 256 << 10 // rotate memtables and WALs during the test
				set := storetest.DefaultSettings("/data")
				set.Flush = mode
				set.FlushInterval = time.Hour // only explicit flushes in async mode
				s := openStore(t, cfg, set)
				const writers, each, queues = 4, 300, 3
				type acked struct {
					pos  store.Position
					q    store.Queue
					body string
				}
				var mu sync.Mutex
				var done []acked
				var flushed atomic.Int64 // acks covered by the last Flush
				half := make(chan struct{})
				var once sync.Once
				var wg sync.WaitGroup
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := 0; i < each; i++ {
							q := store.Queue{Topic: "Crash", ID: int32((w + i) % queues)}
							body := fmt.Sprintf("%d/%d/%s", w, i, strings.Repeat("x", (w*131+i*17)%900))
							pos, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, body)})
							if !assert.NoError(t, err) {
								return
							}
							mu.Lock()
							done = append(done, acked{pos[0], q, body})
							n := len(done)
							mu.Unlock()
							if mode == store.FlushAsync && i%50 == 0 {
								if assert.NoError(t, s.Flush(bg)) {
									for cur := flushed.Load(); cur < int64(n) && !flushed.CompareAndSwap(cur, int64(n)); cur = flushed.Load() {
									}
								}
							}
							if n == writers*each/2 {
								once.Do(func() { close(half) })
							}
						}
					}(w)
				}
				<-half
				mu.Lock()
				before := append([]acked(nil), done...)
				mu.Unlock()
				if mode == store.FlushAsync {
					before = before[:min(int(flushed.Load()), len(before))]
				}
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, uint64(unsynced)))})
				wg.Wait()
				require.NoError(t, s.Close())

				ccfg := *cfg
				ccfg.FS = crashed
				c := openStore(t, &ccfg, set)
				defer c.Close()
				perQueue := map[int32]int64{}
				var recovered int64
				defer func() {
					t.Logf("acknowledged in all %d, before the crash (checked) %d, in the clone %d", len(done), len(before), recovered)
				}()
				for _, a := range before {
					rec, err := c.Lookup(bg, a.pos.CommitLogOffset)
					require.NoError(t, err, "acknowledged message at %d", a.pos.CommitLogOffset)
					m := storetest.Decode(t, rec)
					assert.Equal(t, a.body, string(m.Body))
					assert.Equal(t, a.pos.QueueOffset, m.QueueOffset)
					perQueue[a.q.ID] = max(perQueue[a.q.ID], a.pos.QueueOffset+1)
				}
				for qid := int32(0); qid < queues; qid++ {
					q := store.Queue{Topic: "Crash", ID: qid}
					_, mx, err := c.Offsets(q)
					require.NoError(t, err)
					assert.GreaterOrEqual(t, mx, perQueue[qid])
					recovered += mx
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
				pos, err := c.Append(bg, []store.Message{msg("Crash", 0, "after")})
				require.NoError(t, err)
				_, mx, err := c.Offsets(store.Queue{Topic: "Crash", ID: 0})
				require.NoError(t, err)
				assert.Equal(t, pos[0].QueueOffset+1, mx)
				assert.Equal(t, filepath.Join("/data", "pebble"), c.dir)
			})
		}
	}
}
