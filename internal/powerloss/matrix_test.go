package powerloss_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/crashfs"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/modules/transaction"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// The crash matrix (issue 37): every durable state of a broker × the
// histories a disk goes through — never restarted, after a clean restart,
// after a crash, after two crashes in a row, after a power loss — on both
// storage engines. Each state's real component runs on real files with
// storage.flush=sync; every run (one process's life) makes changes, each
// acknowledged when its call returns nil, and ends the way the history
// says; every open after that must find exactly what was acknowledged.
//
// A crash (SIGKILL) keeps what was written, synced or not: the directory
// is copied as it is and the next run opens the copy (the original is
// then stopped, out of sight). A power loss keeps only what was made
// durable: the runs of that history live on a crashfs, whose image is the
// next run's disk.

// world is one process's durable components on dir.
type world struct {
	t   *testing.T
	e   engine
	dir string
	st  store.Store
	b   *broker.Broker
	pop *pop.Service
	acl *acl.ACL
	sch *schedule.Service
	tx  *transaction.Service
}

func openWorld(t *testing.T, e engine, dir string) *world {
	t.Helper()
	w := &world{t: t, e: e, dir: dir}
	w.st = e.open(t, dir, store.FlushSync)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: w.st, Transports: ts, DataDir: dir, StoreFlush: store.FlushSync})
	require.NoError(t, err)
	w.b = b
	w.pop, err = pop.New(pop.NewConfig(), b)
	require.NoError(t, err)
	aclFile := filepath.Join(dir, "acl.yml")
	if _, err := os.Stat(aclFile); os.IsNotExist(err) {
		// The operator's file, there before the broker starts.
		require.NoError(t, durable.WriteFile(aclFile, []byte("accounts: []\n"), 0o600))
	}
	sc := schedule.NewConfig()
	sc.DelayLevels = "100ms 1h" // level 1 delivers at once, as far as a test waits
	w.sch, err = schedule.New(sc, b)
	require.NoError(t, err)
	require.NoError(t, w.sch.Start(bgCtx))
	w.tx, err = transaction.New(transaction.NewConfig(), transaction.Deps{Broker: b})
	require.NoError(t, err)
	ac := acl.NewConfig()
	ac.File = aclFile
	ac.ReloadInterval = 0
	w.acl, err = acl.New(ac, auth.Deps{})
	require.NoError(t, err)
	return w
}

// stop is a clean stop.
func (w *world) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(w.t, w.sch.Stop(ctx))
	require.NoError(w.t, w.tx.Stop(ctx))
	require.NoError(w.t, w.acl.Close())
	require.NoError(w.t, w.pop.Close())
	require.NoError(w.t, w.b.Stop(ctx))
	require.NoError(w.t, w.st.Close())
}

// abandon drops a world whose disk lost power: its errors are expected.
// A crashed Pebble is not closed (see engine.closeCrashed), nor is the
// broker on it (its stop folds the journals into documents in the store).
func (w *world) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = w.acl.Close()
	_ = w.pop.Close()
	_ = w.sch.Stop(ctx) // its goroutines must not outlive the test
	_ = w.tx.Stop(ctx)
	if !w.e.closeCrashed {
		return
	}
	_ = w.b.Stop(ctx)
	_ = w.st.Close()
}

// durableState is one row of the matrix: change makes run's acknowledged
// changes and records them in want; read returns the state as found, in
// want's terms.
type durableState struct {
	name   string
	change func(t *testing.T, w *world, run int, want map[string]string)
	read   func(t *testing.T, w *world, want map[string]string) map[string]string
}

var bgCtx = context.Background()

var durableStates = []durableState{
	{name: "topics",
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			for k := range 2 {
				name := fmt.Sprintf("MT-%d-%d", run, k)
				q := int32(1 + run + k)
				_, err := w.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: q, WriteQueueNums: q, Perm: protocol.PermRead | protocol.PermWrite})
				require.NoError(t, err)
				want[name] = strconv.Itoa(int(q))
			}
		},
		read: func(_ *testing.T, w *world, _ map[string]string) map[string]string {
			got := map[string]string{}
			for _, n := range w.b.Topics() {
				if strings.HasPrefix(n, "MT-") {
					c, _ := w.b.TopicConfig(n)
					got[n] = strconv.Itoa(int(c.ReadQueueNums))
				}
			}
			return got
		}},
	{name: "subscription groups",
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			// A new group each run, and the first one changed.
			for _, g := range []string{fmt.Sprintf("MG-%d", run), "MG-0"} {
				gc, err := w.b.GroupConfig(g)
				require.NoError(t, err)
				gc.RetryMaxTimes = int32(10*run + len(g))
				require.NoError(t, w.b.PutGroupConfig(gc))
				want[g] = strconv.Itoa(int(gc.RetryMaxTimes))
			}
		},
		read: func(t *testing.T, w *world, want map[string]string) map[string]string {
			// GroupConfig creates a missing group (as a consumer's
			// heartbeat does) with the default 16 retries.
			got := map[string]string{}
			for g := range want {
				gc, err := w.b.GroupConfig(g)
				require.NoError(t, err)
				got[g] = strconv.Itoa(int(gc.RetryMaxTimes))
			}
			return got
		}},
	{name: "consumer offsets",
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			w.b.CommitOffset("MO-G", "MO-T", int32(run), int64(100+run))
			w.b.CommitOffset("MO-G", "MO-T", 7, int64(1000+run)) // moved each run
			require.NoError(t, w.b.FlushOffsets())
			want[strconv.Itoa(run)] = strconv.Itoa(100 + run)
			want["7"] = strconv.Itoa(1000 + run)
		},
		read: func(_ *testing.T, w *world, _ map[string]string) map[string]string {
			got := map[string]string{}
			for q, off := range w.b.OffsetTable()["MO-T@MO-G"] {
				got[strconv.Itoa(int(q))] = strconv.FormatInt(off, 10)
			}
			return got
		}},
	{name: "ACL accounts",
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			ak := fmt.Sprintf("matrix-ak-%d", run)
			sk := fmt.Sprintf("matrix-sk-%d", run)
			require.NoError(t, w.acl.UpdateAccount(bgCtx, auth.AccountUpdate{AccessKey: ak, SecretKey: sk}))
			want[ak] = sk
			if run > 0 { // and the previous run's account deleted
				prev := fmt.Sprintf("matrix-ak-%d", run-1)
				require.NoError(t, w.acl.DeleteAccount(bgCtx, prev))
				delete(want, prev)
			}
		},
		read: func(t *testing.T, w *world, _ map[string]string) map[string]string {
			s, err := w.acl.Snapshot(bgCtx)
			require.NoError(t, err)
			got := map[string]string{}
			for _, a := range s.Accounts {
				got[a.AccessKey] = a.SecretKey
			}
			return got
		}},
	{name: "pop state",
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			_, err := w.b.EnsureTopic(&protocol.TopicConfig{TopicName: "MP-T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite})
			require.NoError(t, err)
			var bodies []string
			for k := range 3 {
				body := fmt.Sprintf("pop-%d-%d", run, k)
				m := &message.Ext{Message: message.Message{Topic: "MP-T", Properties: message.Properties{}, Body: []byte(body)}, BornTimestamp: time.Now().UnixMilli()}
				_, err := w.b.Put(bgCtx, []*message.Ext{m})
				require.NoError(t, err)
				bodies = append(bodies, body)
			}
			// Received and not acked (in flight for an hour), or acked:
			// neither may come back, so this run receives exactly its
			// own messages.
			got, err := w.pop.Receive(bgCtx, "MP-G", "MP-T", nil, 32, time.Hour)
			require.NoError(t, err)
			var recv []string
			for _, r := range got {
				recv = append(recv, string(r.Message.Body))
			}
			assert.Equal(t, bodies, recv, "run %d receives its own messages only", run)
			for _, r := range got[:min(2, len(got))] {
				require.NoError(t, w.pop.Ack(bgCtx, "MP-G", "MP-T", r.Handle))
			}
			want["in flight"] = strconv.Itoa(run + 1)
		},
		read: func(_ *testing.T, w *world, _ map[string]string) map[string]string {
			got := map[string]string{}
			if n := w.pop.InFlight("MP-G", "MP-T"); n > 0 {
				got["in flight"] = strconv.Itoa(n)
			}
			return got
		}},
}

// put stores one message through the broker (its put hooks included).
func (w *world) put(t *testing.T, topic string, props message.Properties, sysFlag int32, body string) (*message.Ext, store.Position) {
	t.Helper()
	if props == nil {
		props = message.Properties{}
	}
	m := &message.Ext{Message: message.Message{Topic: topic, Properties: props, Body: []byte(body)}, SysFlag: sysFlag, BornTimestamp: time.Now().UnixMilli()}
	pos, err := w.b.Put(bgCtx, []*message.Ext{m})
	require.NoError(t, err)
	return m, pos[0]
}

func (w *world) ensureTopic(t *testing.T, name string) {
	t.Helper()
	_, err := w.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
}

// stored is how many messages queue 0 of topic holds.
func (w *world) stored(t *testing.T, topic string) string {
	_, mx, err := w.st.Offsets(store.Queue{Topic: topic})
	require.NoError(t, err)
	return strconv.FormatInt(mx, 10)
}

// delayOffsets is the schedule service's GET_ALL_DELAY_OFFSET answer: the
// delay progress and the recalled timers.
func (w *world) delayOffsets(t *testing.T) (progress map[string]int64, recalled []string) {
	t.Helper()
	resp := w.b.Router().Handle(bgCtx, nil, remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var body struct {
		OffsetTable   map[string]int64 `json:"offsetTable"`
		TimerRecalled []struct {
			ID string `json:"msgId"`
		} `json:"timerRecalled"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	for _, r := range body.TimerRecalled {
		recalled = append(recalled, r.ID)
	}
	return body.OffsetTable, recalled
}

var moreStates = []durableState{
	{name: "transaction state",
		// Half messages committed, rolled back and left open: an
		// outcome acknowledged (End returned) is never lost nor given
		// twice, and an open one stays open.
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			w.ensureTopic(t, "MX-T")
			for k, res := range []transaction.Resolution{transaction.Commit, transaction.Rollback, 0} {
				body := fmt.Sprintf("tx-%d-%d", run, k)
				_, pos := w.put(t, "MX-T", message.Properties{message.PropertyTransactionPrepared: "true",
					message.PropertyProducerGroup: "MX-PG", message.PropertyUniqKey: body}, message.TransactionPrepared, body)
				key := "half " + strconv.FormatInt(pos.QueueOffset, 10)
				want[key] = "open"
				if res != 0 {
					dup, err := w.tx.End(bgCtx, transaction.EndRequest{Group: "MX-PG", QueueOffset: pos.QueueOffset,
						CommitLogOffset: pos.CommitLogOffset, Resolution: res})
					require.NoError(t, err)
					require.False(t, dup)
					want[key] = "decided"
				}
			}
			want["committed"] = strconv.Itoa(run + 1)
		},
		read: func(t *testing.T, w *world, want map[string]string) map[string]string {
			got := map[string]string{}
			for k := range want {
				if off, ok := strings.CutPrefix(k, "half "); ok {
					n, _ := strconv.ParseInt(off, 10, 64)
					got[k] = map[bool]string{true: "decided", false: "open"}[w.tx.Decided(n)]
				}
			}
			if n := w.stored(t, "MX-T"); n != "0" {
				got["committed"] = n
			}
			return got
		}},
	{name: "recalled timers",
		// Timer messages an hour out: one recalled each run, one not.
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			w.ensureTopic(t, "MR-T")
			at := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
			for k := range 2 {
				id := fmt.Sprintf("RC-%d-%d", run, k)
				m, _ := w.put(t, "MR-T", message.Properties{message.PropertyTimerDeliverMS: at, message.PropertyUniqKey: id}, 0, id)
				if k == 0 {
					h := schedule.HandleOf(w.b.Config().Name, m)
					require.NotEmpty(t, h)
					got, err := w.sch.Recall(bgCtx, "MR-T", h)
					require.NoError(t, err)
					require.Equal(t, id, got)
					want[id] = "recalled"
				}
			}
		},
		read: func(t *testing.T, w *world, _ map[string]string) map[string]string {
			got := map[string]string{}
			_, ids := w.delayOffsets(t)
			for _, id := range ids {
				got[id] = "recalled"
			}
			return got
		}},
	{name: "delay progress",
		// Messages of delay level 1 (100 ms), each run waiting until the
		// service's saved progress is past them. Every one is delivered,
		// and the progress settles at their count: it never goes back
		// past a save. A save seen by the test may not be durable yet
		// when the power goes (its directory fsync still to come), so a
		// power loss may deliver the last messages again: delivered
		// counts distinct messages, and duplicates are logged.
		change: func(t *testing.T, w *world, run int, want map[string]string) {
			w.ensureTopic(t, "MD-T")
			for k := range 2 {
				w.put(t, "MD-T", message.Properties{message.PropertyDelayTimeLevel: "1"}, 0, fmt.Sprintf("delay-%d-%d", run, k))
			}
			total := int64(2 * (run + 1))
			deadline := time.Now().Add(30 * time.Second)
			for {
				var doc struct {
					OffsetTable map[string]int64 `json:"offsetTable"`
				}
				_, err := w.b.LoadMeta("delayOffset", &doc)
				require.NoError(t, err)
				if doc.OffsetTable["1"] >= total {
					break
				}
				require.True(t, time.Now().Before(deadline), "level 1 saved progress %d of %d messages in 30 s", doc.OffsetTable["1"], total)
				time.Sleep(20 * time.Millisecond)
			}
			want["level 1"] = strconv.FormatInt(total, 10)
			want["delivered"] = strconv.FormatInt(total, 10)
		},
		read: func(t *testing.T, w *world, _ map[string]string) map[string]string {
			got := map[string]string{}
			// Settle: the service delivers what its progress is behind.
			_, end, err := w.st.Offsets(store.Queue{Topic: protocol.ScheduleTopic, ID: 0})
			require.NoError(t, err)
			deadline := time.Now().Add(30 * time.Second)
			for w.sch.Progress()[1] < end {
				require.True(t, time.Now().Before(deadline), "level 1 progress %d of %d in 30 s", w.sch.Progress()[1], end)
				time.Sleep(20 * time.Millisecond)
			}
			prog, _ := w.delayOffsets(t)
			if prog["1"] != 0 {
				got["level 1"] = strconv.FormatInt(prog["1"], 10)
			}
			bodies := map[string]int{}
			var res store.ReadResult
			for off := int64(0); ; off = res.NextOffset {
				res.Reset()
				require.NoError(t, w.st.Read(bgCtx, store.Queue{Topic: "MD-T"}, off, store.ReadOptions{MaxMessages: 64}, &res))
				for _, rec := range res.Records {
					m, _, err := message.DecodeStored(append([]byte(nil), rec...))
					require.NoError(t, err)
					bodies[string(m.Body)]++
				}
				if len(res.Records) == 0 || res.NextOffset <= off {
					break
				}
			}
			for b, n := range bodies {
				if n > 1 {
					t.Logf("delay progress: %s delivered %d times", b, n)
				}
			}
			if len(bodies) > 0 {
				got["delivered"] = strconv.Itoa(len(bodies))
			}
			return got
		}},
}

func init() { durableStates = append(durableStates, moreStates...) }

// histories are the matrix's columns: how each run ends ('c' a clean
// stop, 'x' a crash, 'p' a power loss); a last run checks and stops.
var histories = []struct{ name, steps string }{
	{"never restarted", "x"},
	{"after a clean restart", "cx"},
	{"after a crash", "xx"},
	{"after two crashes", "xxx"},
	{"after a power loss", "cp"},
	{"after two power losses", "pp"},
	{"after a crash and a clean restart", "xcx"},
}

// TestCrashMatrix: after every run of every history, each durable state
// is exactly what was acknowledged.
func TestCrashMatrix(t *testing.T) {
	for _, e := range engines {
		for _, h := range histories {
			t.Run(e.name+"/"+h.name, func(t *testing.T) { crashMatrix(t, e, h.steps) })
		}
	}
}

func crashMatrix(t *testing.T, e engine, steps string) {
	want := make([]map[string]string, len(durableStates))
	for i := range want {
		want[i] = map[string]string{}
	}
	var fsys *crashfs.FS
	root := t.TempDir()
	if strings.Contains(steps, "p") {
		fsys = crashfs.Mount(t, root)
		root = fsys.Dir
	}
	dir := storeDir(root)
	check := func(w *world, after string) {
		for i, s := range durableStates {
			assert.Equal(t, want[i], s.read(t, w, want[i]), "%s %s", s.name, after)
		}
	}
	for run, step := range steps {
		w := openWorld(t, e, dir)
		check(w, fmt.Sprintf("at the start of run %d (history %q)", run, steps))
		for i, s := range durableStates {
			s.change(t, w, run, want[i])
		}
		check(w, fmt.Sprintf("in run %d", run))
		switch step {
		case 'c':
			w.stop()
		case 'x':
			next := storeDir(t.TempDir())
			require.NoError(t, crashfs.CopyDir(w.dir, next))
			w.stop()
			dir = next
		case 'p':
			img, _ := fsys.Crash()
			w.abandon()
			fsys.Close()
			if strings.ContainsRune(steps[run+1:], 'p') {
				// Another power loss to come: the next runs live on a
				// crashfs over what this one left.
				fsys = crashfs.Mount(t, img)
				img = fsys.Dir
			}
			dir = storeDir(img)
		}
		if t.Failed() {
			return
		}
	}
	w := openWorld(t, e, dir)
	defer w.stop()
	check(w, fmt.Sprintf("after history %q", steps))
}
