package powerloss_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	if spec := os.Getenv(envChild); spec != "" {
		writerMain(spec)
	}
	os.Exit(m.Run())
}

var bg = context.Background()

type engine struct {
	name    string
	openErr func(dir string, mode store.FlushMode) (store.Store, error)
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
	{name: "commitlog", closeCrashed: true, openErr: func(dir string, mode store.FlushMode) (store.Store, error) {
		c := commitlog.NewConfig()
		c.SegmentSize = 64 << 10 // segments roll often: creation is a crash point
		c.CQEntriesPerFile = 40
		return commitlog.Open(c, store.Deps{Settings: settings(dir, mode)})
	}},
	{name: "pebble", openErr: func(dir string, mode store.FlushMode) (store.Store, error) {
		c := pebblestore.NewConfig()
		c.MemTableSize = 256 << 10 // flushes and WAL rotations: more crash points
		return pebblestore.Open(c, store.Deps{Settings: settings(dir, mode)})
	}},
}

func (e engine) open(t testing.TB, dir string, mode store.FlushMode) store.Store {
	t.Helper()
	s, err := e.openErr(dir, mode)
	require.NoError(t, err, "open %s at %s", e.name, dir)
	return s
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

// envChild, in the test binary's environment, makes it a writer process
// (see writerMain): "engine mode dir seed metaSeq".
const envChild = "QUIVER_POWERLOSS_WRITER"

// bodyFor is the body of the message named id (the writer prints ids, the
// checker rebuilds the bodies).
func bodyFor(id string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return id + "-" + strings.Repeat(string(rune('a'+h%26)), int(h%2000))
}

// writerMain is the writer process: it opens the store and appends from
// three goroutines and saves a metadata document from a fourth, printing
// one line per acknowledgement ("a qid phys qoff id" or "m seq") until it
// is killed (the power loss) or its disk fails.
func writerMain(spec string) {
	var name, mode, dir string
	var seed uint64
	var metaSeq int64
	if _, err := fmt.Sscan(spec, &name, &mode, &dir, &seed, &metaSeq); err != nil {
		fmt.Fprintln(os.Stderr, "powerloss writer:", err)
		os.Exit(2)
	}
	var e engine
	for _, x := range engines {
		if x.name == name {
			e = x
		}
	}
	s, err := e.openErr(dir, store.FlushMode(mode))
	if err != nil {
		fmt.Fprintln(os.Stderr, "powerloss writer:", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format, args...)
		outMu.Unlock()
	}
	say("ready\n")
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ; i++ {
				q := store.Queue{Topic: "PowerLoss", ID: int32((w + i) % 4)}
				var batch []store.Message
				var ids []string
				for j := range 1 + rng.IntN(3) {
					id := fmt.Sprintf("s%d-w%d-%d-%d", seed%1000000, w, i, j)
					ids = append(ids, id)
					batch = append(batch, msg(q, bodyFor(id)))
				}
				pos, err := s.Append(bg, batch)
				if err != nil {
					return
				}
				for j := range pos {
					say("a %d %d %d %s\n", q.ID, pos[j].CommitLogOffset, pos[j].QueueOffset, ids[j])
				}
			}
		}()
	}
	if md, ok := s.(store.Metadata); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := metaSeq + 1; ; n++ {
				b, _ := json.Marshal(metaDoc{Seq: n, Pad: strings.Repeat("p", int(n%5000))})
				if md.SaveMeta("consumerOffset", b) != nil {
					return
				}
				say("m %d\n", n)
			}
		}()
	}
	wg.Wait()
	say("failed\n")
	select {} // the disk failed: wait for the power to go
}

// round starts a writer process on a store under crashfs over backing and
// cuts the power (at a random fsync, or after a random number of
// acknowledgements): the process is killed, then the disk keeps only what
// was durable. It returns the image, what was acknowledged and the last
// acknowledged metadata save.
func round(t *testing.T, e engine, mode store.FlushMode, backing string, rng *rand.Rand, metaSeq int64) (string, []ack, int64) {
	fsys := crashfs.Mount(t, backing)
	if rng.IntN(2) == 0 {
		// QUIVER_POWERLOSS_ARM_MAX narrows the armed fsync (a small value
		// cuts the power while the store opens more often).
		armMax := 150
		if v := os.Getenv("QUIVER_POWERLOSS_ARM_MAX"); v != "" {
			fmt.Sscan(v, &armMax)
		}
		st := fsys.Stats()
		fsys.CrashAtSync(st.FileSyncs + st.DirSyncs + int64(1+rng.IntN(armMax)))
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d %d", envChild, e.name, mode, storeDir(fsys.Dir), rng.Uint64(), metaSeq))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var (
		mu      sync.Mutex
		acks    []ack
		metaAck = metaSeq
		ready   = make(chan struct{})
		eof     = make(chan struct{})
	)
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "ready":
				close(ready)
			case len(f) == 5 && f[0] == "a":
				var a ack
				var qid int32
				fmt.Sscan(f[1]+" "+f[2]+" "+f[3], &qid, &a.pos.CommitLogOffset, &a.pos.QueueOffset)
				a.q = store.Queue{Topic: "PowerLoss", ID: qid}
				a.body = bodyFor(f[4])
				mu.Lock()
				acks = append(acks, a)
				mu.Unlock()
			case len(f) == 2 && f[0] == "m":
				var n int64
				fmt.Sscan(f[1], &n)
				mu.Lock()
				metaAck = max(metaAck, n)
				mu.Unlock()
			}
		}
	}()
	stopAfter := 20 + rng.IntN(400)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= stopAfter || fsys.Stats().Frozen || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond) // polling the writer's progress
	}
	// Power loss: the process stops at once, then the disk forgets.
	require.NoError(t, cmd.Process.Kill())
	<-eof
	_ = cmd.Wait()
	select {
	case <-ready:
	default:
		// The power may go off while the store opens (an early armed
		// fsync): the next open must cope. Any other failure to open is
		// a bug.
		if !fsys.Stats().Frozen {
			t.Fatalf("the writer process did not open the store")
		}
		t.Logf("the power went off while the store opened")
	}
	img, st := fsys.Crash()
	fsys.Close()
	if testing.Verbose() {
		t.Logf("round: %d acks, meta %d..%d, crashfs %+v", len(acks), metaSeq, metaAck, st)
	}
	return img, acks, metaAck
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
		if metaLost > 0 {
			des, _ := os.ReadDir(filepath.Join(storeDir(img), "pebble"))
			for _, de := range des {
				fi, _ := de.Info()
				t.Logf("image: %s %d", de.Name(), fi.Size())
			}
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
				var metaSeq int64
				var all []ack
				var metaAcked int64
				backing := t.TempDir()
				for range rounds {
					img, acks, ma := round(t, e, mode, backing, rng, metaSeq)
					metaSeq = ma
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
					c.MetaSaves = int(metaSeq)
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
