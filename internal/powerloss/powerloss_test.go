package powerloss_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/internal/crashfs"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

func TestMain(m *testing.M) {
	crashfs.ServeIfChild()
	os.Exit(m.Run())
}

var bg = context.Background()

type engine struct {
	name string
	open func(t testing.TB, dir string, mode store.FlushMode) store.Store
	// closeCrashed: whether a store whose disk lost power can be closed
	// in-process (Pebble's background goroutines may panic on manifest
	// errors, so a crashed Pebble is abandoned; its mount is aborted).
	closeCrashed bool
}

func settings(dir string, mode store.FlushMode) store.Settings {
	return store.Settings{Dir: dir, Flush: mode, FlushInterval: 5 * time.Millisecond,
		Retention: 72 * time.Hour, MaxMessageSize: message.DefaultMaxMessageSize}
}

var engines = []engine{
	{name: "commitlog", closeCrashed: true, open: func(t testing.TB, dir string, mode store.FlushMode) store.Store {
		c := commitlog.NewConfig()
		c.SegmentSize = 64 << 10 // segments roll often: creation is a crash point
		c.CQEntriesPerFile = 40
		s, err := commitlog.Open(c, store.Deps{Settings: settings(dir, mode)})
		require.NoError(t, err, "open commitlog at %s", dir)
		return s
	}},
	{name: "pebble", open: func(t testing.TB, dir string, mode store.FlushMode) store.Store {
		s, err := pebblestore.Open(pebblestore.NewConfig(), store.Deps{Settings: settings(dir, mode)})
		require.NoError(t, err, "open pebble at %s", dir)
		return s
	}},
}

func msg(q store.Queue, body string) store.Message {
	return store.Message{Ext: &message.Ext{
		Message:       message.Message{Topic: q.Topic, Properties: message.Properties{}, Body: []byte(body)},
		QueueID:       q.ID,
		BornTimestamp: time.Now().UnixMilli(),
		BornHost:      netip.MustParseAddrPort("127.0.0.1:50001"),
		StoreHost:     netip.MustParseAddrPort("127.0.0.1:10911"),
	}}
}

// storeDir is where the store lives under a mount: two levels that do not
// exist before the first start (the directory-durability case).
func storeDir(root string) string { return filepath.Join(root, "data", "broker-a") }

// TestFirstStartDirectoryDurable is the case: first start on an
// empty disk, messages acknowledged under flush=sync, power loss, restart:
// every message is there. Before the fix the commit log created
// storage.dir with os.MkdirAll and never fsynced its parent, so the
// directory entry, and with it the whole store, was lost.
func TestFirstStartDirectoryDurable(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			fsys := crashfs.Mount(t, t.TempDir())
			s := e.open(t, storeDir(fsys.Dir), store.FlushSync)
			q := store.Queue{Topic: "PowerLoss", ID: 0}
			var acked []store.Position
			for i := range 20 {
				pos, err := s.Append(bg, []store.Message{msg(q, fmt.Sprintf("m%d", i))})
				require.NoError(t, err)
				acked = append(acked, pos[0])
			}
			img, _ := fsys.Crash()
			if e.closeCrashed {
				_ = s.Close() // errors expected: the disk is gone
			}
			fsys.Close()

			r := e.open(t, storeDir(img), store.FlushSync)
			defer r.Close()
			_, mx, err := r.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, int64(20), mx, "acknowledged messages after the power loss")
			for i, p := range acked {
				rec, err := r.Lookup(bg, p.CommitLogOffset)
				require.NoError(t, err, "message %d", i)
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("m%d", i), string(m.Body))
			}
		})
	}
}

// ack is one acknowledged append.
type ack struct {
	q    store.Queue
	pos  store.Position
	body string
}

// metaDoc is the metadata document the meta writer saves.
type metaDoc struct {
	Seq int64  `json:"seq"`
	Pad string `json:"pad"`
}

// Counts are a run's totals.
type Counts struct {
	Rounds, Acknowledged, Lost, Corrupt, MetaSaves, MetaLost int
}

// round runs writers on a store under crashfs over backing until the
// power goes off (at a random fsync, or after a random number of
// acknowledgements), and returns the image and what was acknowledged.
func round(t *testing.T, e engine, mode store.FlushMode, backing string, rng *rand.Rand, metaSeq *atomic.Int64) (string, []ack, int64) {
	fsys := crashfs.Mount(t, backing)
	s := e.open(t, storeDir(fsys.Dir), mode)
	md, _ := s.(store.Metadata)
	if rng.IntN(2) == 0 {
		fsys.CrashAtSync(fsys.Stats().FileSyncs + fsys.Stats().DirSyncs + int64(1+rng.IntN(120)))
	}
	stopAfter := int64(20 + rng.IntN(300))
	var (
		mu      sync.Mutex
		acks    []ack
		stop    atomic.Bool
		metaAck atomic.Int64
		wg      sync.WaitGroup
	)
	metaAck.Store(metaSeq.Load())
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				q := store.Queue{Topic: "PowerLoss", ID: int32((w + i) % 4)}
				var batch []store.Message
				var bodies []string
				for j := range 1 + rng.IntN(3) {
					b := fmt.Sprintf("w%d-%d-%d-%s", w, i, j, strings.Repeat("x", rng.IntN(2000)))
					bodies = append(bodies, b)
					batch = append(batch, msg(q, b))
				}
				pos, err := s.Append(bg, batch)
				if err != nil {
					return
				}
				mu.Lock()
				for j := range pos {
					acks = append(acks, ack{q, pos[j], bodies[j]})
				}
				mu.Unlock()
			}
		}()
	}
	if md != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n := metaSeq.Add(1)
				b, _ := json.Marshal(metaDoc{Seq: n, Pad: strings.Repeat("p", int(n%5000))})
				if md.SaveMeta("consumerOffset", b) != nil {
					return
				}
				metaAck.Store(n)
			}
		}()
	}
	// Until the armed fsync cuts the power or enough was acknowledged.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := int64(len(acks))
		mu.Unlock()
		if n >= stopAfter || fsys.Stats().Frozen || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // polling, not synchronisation
	}
	img, _ := fsys.Crash()
	stop.Store(true)
	mu.Lock()
	got := append([]ack(nil), acks...)
	mu.Unlock()
	if e.closeCrashed {
		wg.Wait()
		_ = s.Close()
		fsys.Close()
	} else {
		// The abandoned store's files are cut off when the server exits.
		fsys.Close()
		wg.Wait()
	}
	return img, got, metaAck.Load()
}

// verify opens the image and checks the acknowledged messages and every
// queue; it returns how many were lost and how many records were corrupt.
func verify(t *testing.T, e engine, mode store.FlushMode, img string, acks []ack, metaAcked int64) (lost, corrupt, metaLost int) {
	s := e.open(t, storeDir(img), mode)
	defer func() { require.NoError(t, s.Close()) }()
	for _, a := range acks {
		rec, err := s.Lookup(bg, a.pos.CommitLogOffset)
		if err != nil {
			lost++
			continue
		}
		m, _, err := message.DecodeStored(rec)
		if err != nil || string(m.Body) != a.body || m.QueueOffset != a.pos.QueueOffset {
			lost++
		}
	}
	for id := range int32(4) {
		q := store.Queue{Topic: "PowerLoss", ID: id}
		mn, mx, err := s.Offsets(q)
		require.NoError(t, err)
		var r store.ReadResult
		for off := mn; off < mx; off = r.NextOffset {
			require.NoError(t, s.Read(bg, q, off, store.ReadOptions{}, &r))
			if r.Status != store.Found {
				corrupt++
				t.Logf("%s at %d of [%d, %d): %s", q, off, mn, mx, r.Status)
				break
			}
			for i, rec := range r.Records {
				m, n, err := message.DecodeStored(rec)
				if err != nil || n != len(rec) || !m.VerifyCRC() || m.QueueOffset != off+int64(i) || m.Topic != q.Topic {
					corrupt++
				}
			}
		}
	}
	if md, ok := s.(store.Metadata); ok && metaAcked > 0 {
		b, err := md.LoadMeta("consumerOffset")
		var d metaDoc
		switch {
		case err != nil:
			metaLost++
			t.Logf("metadata: %v (last acknowledged save %d)", err, metaAcked)
		case json.Unmarshal(b, &d) != nil:
			corrupt++
			t.Logf("metadata torn: %q", b)
		case d.Seq < metaAcked:
			metaLost++
			t.Logf("metadata: seq %d, last acknowledged save %d", d.Seq, metaAcked)
		}
	}
	return lost, corrupt, metaLost
}

// TestPowerLossRounds cuts the power at random points (at a random fsync
// of a file or directory — between a file's fsync and its directory's
// included — or after a random number of acknowledgements) while writers
// append and a metadata document is saved, for each engine and flush
// mode, round after round on what the previous power loss left. Under
// flush=sync nothing acknowledged may be lost; in either mode nothing
// served may be corrupt and the metadata document must be whole and no
// older than its last acknowledged save.
func TestPowerLossRounds(t *testing.T) {
	rounds := 3
	if !testing.Short() {
		rounds = 20
	}
	if s := os.Getenv("QUIVER_POWERLOSS_ROUNDS"); s != "" {
		fmt.Sscan(s, &rounds)
	}
	for _, e := range engines {
		for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
			t.Run(e.name+"/"+string(mode), func(t *testing.T) {
				seed := uint64(time.Now().UnixNano())
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 1))
				var c Counts
				var metaSeq atomic.Int64
				var all []ack
				var metaAcked int64
				backing := t.TempDir()
				for range rounds {
					img, acks, ma := round(t, e, mode, backing, rng, &metaSeq)
					if t.Failed() {
						return
					}
					// Under flush=sync what earlier rounds acknowledged must
					// survive every later power loss too.
					if mode == store.FlushSync {
						all = append(all, acks...)
						metaAcked = ma
					} else {
						all, metaAcked = acks, 0
					}
					c.Rounds++
					c.Acknowledged += len(acks)
					c.MetaSaves = int(metaSeq.Load())
					lost, corrupt, metaLost := verify(t, e, mode, img, all, metaAcked)
					c.Lost += lost
					c.Corrupt += corrupt
					c.MetaLost += metaLost
					backing = img
					if mode == store.FlushSync {
						require.Zero(t, lost, "acknowledged messages lost under flush=sync")
						require.Zero(t, metaLost, "acknowledged metadata saves lost")
					}
					require.Zero(t, corrupt, "corrupt records served")
				}
				t.Logf("powerloss: engine=%s flush=%s rounds=%d acknowledged=%d lost=%d corrupt=%d meta_saves=%d meta_lost=%d",
					e.name, mode, c.Rounds, c.Acknowledged, c.Lost, c.Corrupt, c.MetaSaves, c.MetaLost)
			})
		}
	}
}
