package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/migrate"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

func openTopics(t *testing.T, dir string) *topicTable {
	t.Helper()
	tt, err := newTopicTable(newMetaStore(nil, dir), filepath.Join(dir, "config"), nil)
	require.NoError(t, err)
	return tt
}

func topicCfg(name string, q int32) *protocol.TopicConfig {
	return &protocol.TopicConfig{TopicName: name, ReadQueueNums: q, WriteQueueNums: q, Perm: 6}
}

// crash drops a table without folding its journal (as a process death
// does), closing only the file handle.
func crash(t *testing.T, tt *topicTable) {
	tt.comp.wait()
	require.NoError(t, tt.jr.close())
}

// TestTopicJournal: changes are journaled one record each, survive a crash
// (the document is not rewritten per change), a torn tail costs only the
// unacknowledged change, and a clean close folds the journal into
// topics.json.
func TestTopicJournal(t *testing.T) {
	dir := t.TempDir()
	tt := openTopics(t, dir)
	for i := range 500 {
		_, _, err := tt.putIfAbsent(topicCfg(fmt.Sprintf("T%04d", i), 4))
		require.NoError(t, err)
	}
	changed, err := tt.put(topicCfg("T0001", 8))
	require.NoError(t, err)
	assert.True(t, changed)
	removed, err := tt.remove("T0002")
	require.NoError(t, err)
	assert.True(t, removed)
	ver := tt.snapshot().DataVersion
	_, err = os.Stat(filepath.Join(dir, "config", "topics.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no whole-document write below the compaction threshold")
	crash(t, tt)

	// A torn append (the crash came during a change never acknowledged).
	jf := filepath.Join(dir, "config", "topics.journal")
	f, err := os.OpenFile(jf, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0, 0, 1, 0, 0xde, 0xad, '{', '"'})
	require.NoError(t, err)
	require.NoError(t, f.Close())

	tt = openTopics(t, dir)
	assert.Len(t, tt.names(), 499)
	c, ok := tt.get("T0001")
	require.True(t, ok)
	assert.Equal(t, int32(8), c.ReadQueueNums, "the update replayed")
	_, ok = tt.get("T0002")
	assert.False(t, ok, "the deletion replayed")
	assert.GreaterOrEqual(t, tt.snapshot().DataVersion.Counter, ver.Counter, "the data version does not go back")
	// Opening folded the journal into the document.
	_, err = os.Stat(filepath.Join(dir, "config", "topics.json"))
	require.NoError(t, err)
	assert.Zero(t, tt.jr.size())
	_, err = tt.put(topicCfg("Later", 2))
	require.NoError(t, err)
	require.NoError(t, tt.close())

	tt = openTopics(t, dir)
	defer tt.close()
	assert.Len(t, tt.names(), 500)
	_, ok = tt.get("Later")
	assert.True(t, ok)
}

// TestTopicJournalCostIsConstant: a change appends one small record
// whatever the table's size — the cost that was a rewrite of the whole
// topics.json (1.1 MB at 5,000 topics) per change.
func TestTopicJournalCostIsConstant(t *testing.T) {
	dir := t.TempDir()
	tt := openTopics(t, dir)
	defer tt.close()
	batch := make([]*protocol.TopicConfig, 0, 5000)
	for i := range 5000 {
		batch = append(batch, topicCfg(fmt.Sprintf("Bulk%05d", i), 8))
	}
	_, _, err := tt.putAllIfAbsent(batch)
	require.NoError(t, err)
	tt.comp.wait() // 5,000 records: compacted once in the background
	jf := filepath.Join(dir, "config", "topics.journal")
	size := func() int64 {
		fi, err := os.Stat(jf)
		require.NoError(t, err)
		return fi.Size()
	}
	appends := tt.jr.appends.Load()
	before := size()
	_, _, err = tt.putIfAbsent(topicCfg("OneMore", 8))
	require.NoError(t, err)
	grew := size() - before
	assert.Equal(t, appends+1, tt.jr.appends.Load(), "one journal write")
	assert.Less(t, grew, int64(512), "one small record, not the table")
	doc, err := os.ReadFile(filepath.Join(dir, "config", "topics.json"))
	require.NoError(t, err)
	assert.Greater(t, int64(len(doc)), 100*grew, "the document a change used to rewrite")
}

// TestTopicJournalCrashBetweenSnapshotAndCut: a snapshot written but the
// journal not yet cut replays only the records after the snapshot, so a
// deletion the snapshot already holds is not undone by an older put.
func TestTopicJournalCrashBetweenSnapshotAndCut(t *testing.T) {
	dir := t.TempDir()
	tt := openTopics(t, dir)
	_, _, err := tt.putIfAbsent(topicCfg("A", 4))
	require.NoError(t, err)
	_, err = tt.remove("A")
	require.NoError(t, err)
	// The snapshot half of a compaction, without the cut.
	tt.saveMu.Lock()
	tt.mu.RLock()
	doc := tt.docLocked()
	tt.mu.RUnlock()
	doc.JournalSeq = tt.jr.lastSeq()
	tt.saveMu.Unlock()
	require.NoError(t, tt.meta.save("topics", doc))
	_, _, err = tt.putIfAbsent(topicCfg("B", 4))
	require.NoError(t, err)
	crash(t, tt)

	tt = openTopics(t, dir)
	defer tt.close()
	assert.Equal(t, []string{"B"}, tt.names())
}

// TestGroupJournal: subscription groups are journaled the same way.
func TestGroupJournal(t *testing.T) {
	dir := t.TempDir()
	open := func() *groupTable {
		g, err := newGroupTable(newMetaStore(nil, dir), filepath.Join(dir, "config"), nil)
		require.NoError(t, err)
		return g
	}
	g := open()
	_, err := g.getOrCreateAll([]string{"G1", "G2", "G3"})
	require.NoError(t, err)
	c := defaultGroupConfig("G2")
	c.RetryMaxTimes = 3
	require.NoError(t, g.put(c))
	require.NoError(t, g.remove("G3"))
	g.comp.wait()
	require.NoError(t, g.jr.close()) // a crash: nothing folded

	g = open()
	defer g.close()
	assert.Equal(t, []string{"G1", "G2"}, userGroups(g.names()))
	assert.Equal(t, int32(3), g.snapshot()["G2"].RetryMaxTimes)
}

// journaled is a topic or group table under the restart tests below: put
// creates an entry (acknowledged when it returns nil), crash drops the
// table as a process death does, close stops it cleanly.
type journaled struct {
	name string
	open func(t *testing.T, dir string) (put func(string) error, names func() []string, crash, close func())
}

var journaledTables = []journaled{
	{name: "topics", open: func(t *testing.T, dir string) (func(string) error, func() []string, func(), func()) {
		tt := openTopics(t, dir)
		return func(n string) error { _, _, err := tt.putIfAbsent(topicCfg(n, 4)); return err },
			tt.names, func() { crash(t, tt) }, func() { require.NoError(t, tt.close()) }
	}},
	{name: "groups", open: func(t *testing.T, dir string) (func(string) error, func() []string, func(), func()) {
		g, err := newGroupTable(newMetaStore(nil, dir), filepath.Join(dir, "config"), nil)
		require.NoError(t, err)
		return func(n string) error { _, err := g.getOrCreate(n); return err },
			g.names, func() { g.comp.wait(); require.NoError(t, g.jr.close()) }, func() { require.NoError(t, g.close()) }
	}},
}

// TestJournalSequenceAcrossRestarts is issue 37's case: a clean stop folds
// the journal into the document (which names the last record it holds)
// and empties the journal; a change after the restart must get a sequence
// above the document's, or the next crash's replay skips it as already
// held. Each step sequence (c = clean stop, x = crash) creates one entry
// per run, and every entry acknowledged is there at the end.
func TestJournalSequenceAcrossRestarts(t *testing.T) {
	steps := map[string]string{
		"clean then crash":            "cx",
		"two crashes":                 "xx",
		"clean, crash, clean, crash":  "cxcx",
		"crash, clean restart, crash": "xcx",
		"two clean stops, then crash": "ccx",
		"crash, crash, clean, crash":  "xxcx",
	}
	for _, tab := range journaledTables {
		for name, seq := range steps {
			t.Run(tab.name+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				var want []string
				for i, step := range seq {
					put, names, crashIt, closeIt := tab.open(t, dir)
					assert.Equal(t, want, ours(names()), "after %d runs", i)
					for k := range 2 {
						n := fmt.Sprintf("E%d-%d", i, k)
						require.NoError(t, put(n))
						want = append(want, n)
					}
					if step == 'c' {
						closeIt()
					} else {
						crashIt()
					}
				}
				_, names, _, closeIt := tab.open(t, dir)
				defer closeIt()
				assert.Equal(t, want, ours(names()), "every acknowledged change after %q", seq)
			})
		}
	}
}

// ours keeps the names the test created ("E<run>-<k>").
// userGroups drops the built-in groups every table has.
func userGroups(names []string) []string {
	var out []string
	for _, n := range names {
		if !protocol.IsSystemGroup(n) {
			out = append(out, n)
		}
	}
	return out
}

func ours(got []string) []string {
	var out []string
	for _, n := range got {
		if len(n) > 0 && n[0] == 'E' {
			out = append(out, n)
		}
	}
	return out
}

// TestJournalSequenceAcrossEngineMigration: the topics document lives in
// the storage engine and moves with it (mq store migrate copies the
// documents and config/*.journal); the journal of the target starts
// empty after the clean stop a migration needs, so its records must be
// numbered above the migrated document's sequence, or the first crash on
// the new engine loses every topic created since.
func TestJournalSequenceAcrossEngineMigration(t *testing.T) {
	settings := func(dir string) store.Deps {
		return store.Deps{Settings: store.Settings{Dir: dir, Flush: store.FlushSync, MaxMessageSize: 4 << 20, Retention: 72 * time.Hour}}
	}
	from, to := t.TempDir(), t.TempDir()
	src, err := commitlog.Open(commitlog.NewConfig(), settings(from))
	require.NoError(t, err)
	tt, err := newTopicTable(newMetaStore(src, from), filepath.Join(from, "config"), nil)
	require.NoError(t, err)
	for _, n := range []string{"A", "B", "C"} {
		_, _, err := tt.putIfAbsent(topicCfg(n, 4))
		require.NoError(t, err)
	}
	require.NoError(t, tt.close())

	dst, err := pebblestore.Open(pebblestore.NewConfig(), settings(to))
	require.NoError(t, err)
	defer dst.Close()
	_, err = migrate.Migrate(context.Background(), src, dst, migrate.Options{Source: "commitlog:" + from})
	require.NoError(t, err)
	require.NoError(t, src.Close())

	tt, err = newTopicTable(newMetaStore(dst, to), filepath.Join(to, "config"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"A", "B", "C"}, tt.names(), "migrated")
	_, _, err = tt.putIfAbsent(topicCfg("OnPebble", 4))
	require.NoError(t, err)
	crash(t, tt)

	tt, err = newTopicTable(newMetaStore(dst, to), filepath.Join(to, "config"), nil)
	require.NoError(t, err)
	defer tt.close()
	assert.Equal(t, []string{"A", "B", "C", "OnPebble"}, tt.names(), "the change after the migration survives a crash")
}
