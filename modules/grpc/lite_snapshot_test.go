package grpc_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/grpcapi"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// snapCfg leaves the snapshot to the clean stops and the tests.
func snapCfg(c *grpcmod.Config) {
	c.Lite.SnapshotInterval = 0
	c.Lite.SnapshotChanges = 1 << 30
}

func snapshotPath(dir string) string { return filepath.Join(dir, "lite", "lite.snapshot") }

// copyDir copies a data directory as it is: a SIGKILL at this point.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	}))
}

// sameIndex checks two dumps of the lite index hold the same lite topics,
// messages and committed offsets; the TTL stamps may differ by the time
// between a send and its store timestamp (a full rebuild takes the
// latter).
func sameIndex(t *testing.T, want, got []grpcmod.LiteEntry, groups bool) {
	t.Helper()
	require.Equal(t, len(want), len(got), "lite topics")
	for i := range want {
		w, g := want[i], got[i]
		assert.InDelta(t, w.Last, g.Last, float64(5*time.Second/time.Millisecond), "%s/%s TTL stamp", w.Parent, w.Name)
		w.Last, g.Last = 0, 0
		if !groups {
			w.Groups, g.Groups = nil, nil
		}
		assert.Equal(t, w, g)
	}
}

// rebuilt answers the index a full rebuild of dir finds (its snapshot set
// aside for it and put back after).
func rebuilt(t *testing.T, dir string) []grpcmod.LiteEntry {
	t.Helper()
	path := snapshotPath(dir)
	saved, err := os.ReadFile(path)
	if err == nil {
		require.NoError(t, os.Remove(path))
	}
	n := openLiteNode(t, dir, snapCfg)
	snap, _, _ := n.srv.LiteLoaded()
	require.False(t, snap)
	dump := n.srv.LiteDump()
	n.close()
	if saved != nil {
		require.NoError(t, os.WriteFile(path, saved, 0o644))
	}
	return dump
}

// fillLite sends to lite topics prefix0.. (i%4+1 messages to the i-th)
// and has group g read and ack the first message of every third: journal
// offsets, multi-message topics, and topics no one read.
func fillLite(t *testing.T, n *liteNode, prefix string, topics int) int {
	t.Helper()
	sent := 0
	for i := range topics {
		for k := range i%4 + 1 {
			require.Equal(t, grpcapi.Code_OK, n.send("chat", prefix+strconv.Itoa(i), "tok"+strconv.Itoa(k)).GetCode())
			sent++
		}
	}
	var sub []string
	for i := 0; i < topics; i += 3 {
		sub = append(sub, prefix+strconv.Itoa(i))
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, sub...).GetCode())
	acked := map[string]bool{}
	for range 100 {
		if len(acked) == len(sub) {
			break
		}
		_, msgs := n.receive("gw", "chat", "g", 32, time.Second)
		for _, m := range msgs {
			name := m.GetSystemProperties().GetLiteTopic()
			if !acked[name] {
				acked[name] = true
				require.Equal(t, grpcapi.Code_OK, n.ack("gw", "chat", "g", m).GetCode())
			}
		}
	}
	require.Len(t, acked, len(sub))
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "g", grpcapi.LiteSubscriptionAction_COMPLETE_REMOVE, nil).GetCode())
	return sent
}

// TestLiteSnapshotRestart: a clean stop writes the snapshot and the next
// start loads it, reading no parent record: the index is the one before
// the stop, and the one a full rebuild from the parent's records and the
// journal finds.
func TestLiteSnapshotRestart(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), snapCfg)
	n.parent("chat", 4)
	sent := fillLite(t, n, "s", 60)
	live := n.srv.LiteDump()
	require.Len(t, live, 60)

	n = n.restart()
	snap, reason, records := n.srv.LiteLoaded()
	require.True(t, snap, reason)
	assert.Zero(t, records, "every record is in the snapshot")
	loaded := n.srv.LiteDump()
	for i := range live {
		live[i].Groups = loaded[i].Groups // offsets: journal, not snapshot
	}
	assert.Equal(t, live, loaded, "the index before the stop")
	n.close()

	full := rebuilt(t, n.dir)
	sameIndex(t, full, loaded, true)

	// Sends go on from each lite topic's next offset.
	n = openLiteNode(t, n.dir, snapCfg)
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "s3", "more").GetCode())
	dump := n.srv.LiteDump()
	for _, e := range dump {
		if e.Name == "s3" {
			assert.Len(t, e.Offs, 5, "four before, one more")
		}
	}
	assert.Equal(t, sent+1, func() int {
		total := 0
		for _, e := range dump {
			total += len(e.Offs)
		}
		return total
	}())
}

// syncBuffer is a log sink safe for the endpoint's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLiteSnapshotDamaged: a snapshot damaged in any way is set aside,
// the reason logged, and the index rebuilt in full: nothing lost.
func TestLiteSnapshotDamaged(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), snapCfg)
	n.parent("chat", 4)
	fillLite(t, n, "s", 40)
	n.close()
	path := snapshotPath(n.dir)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	want := rebuilt(t, n.dir)
	require.Len(t, want, 40)

	for _, c := range []struct {
		name, reason string
		damage       func([]byte) []byte
	}{
		{"checksum", "checksum mismatch", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }},
		{"a name", "checksum mismatch", func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte("s1"))
			b[i+1] = '7'
			return b
		}},
		{"truncated", "unexpected EOF", func(b []byte) []byte { return b[:len(b)-40] }},
		{"version", "version 9", func(b []byte) []byte { b[8] = 9; return b }},
		{"magic", "magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"empty", "truncated", func([]byte) []byte { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, c.damage(bytes.Clone(good)), 0o644))
			logs := &syncBuffer{}
			liteLog = slog.New(slog.NewTextHandler(logs, nil))
			defer func() { liteLog = nil }()
			n := openLiteNode(t, n.dir, snapCfg)
			snap, reason, _ := n.srv.LiteLoaded()
			assert.False(t, snap)
			assert.Contains(t, reason, c.reason)
			assert.Contains(t, logs.String(), "lite snapshot not used")
			assert.Contains(t, logs.String(), c.reason)
			assert.Equal(t, want, n.srv.LiteDump(), "the full rebuild")
			n.close()
			assert.Contains(t, logs.String(), "lite snapshot written", "a good one again at the stop")
		})
	}
}

// TestLiteSnapshotStale: a snapshot whose queue positions the store no
// longer reaches (records synced before it were lost: a power loss, here
// an older copy of the store), or where the store holds another record
// at its position, is stale: the full rebuild.
func TestLiteSnapshotStale(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), snapCfg)
	n.parent("chat", 2)
	fillLite(t, n, "a", 20)
	n.close()
	older := t.TempDir()
	copyDir(t, n.dir, older)
	n = openLiteNode(t, n.dir, snapCfg)
	fillLite(t, n, "b", 20)
	n.close()
	newer, err := os.ReadFile(snapshotPath(n.dir))
	require.NoError(t, err)

	// The store is behind the snapshot.
	want := rebuilt(t, older)
	require.Len(t, want, 20)
	require.NoError(t, os.WriteFile(snapshotPath(older), newer, 0o644))
	o := openLiteNode(t, older, snapCfg)
	snap, reason, _ := o.srv.LiteLoaded()
	assert.False(t, snap)
	assert.Contains(t, reason, "stale")
	assert.Contains(t, reason, "before the snapshot's")
	assert.Equal(t, want, o.srv.LiteDump())

	// The store went on with other records.
	for i := range 20 {
		for k := range 6 {
			require.Equal(t, grpcapi.Code_OK, o.send("chat", "c"+strconv.Itoa(i), "another body "+strconv.Itoa(k)).GetCode())
		}
	}
	o.close()
	want = rebuilt(t, older)
	require.NoError(t, os.WriteFile(snapshotPath(older), newer, 0o644))
	o = openLiteNode(t, older, snapCfg)
	snap, reason, _ = o.srv.LiteLoaded()
	assert.False(t, snap)
	assert.Contains(t, reason, "stale")
	assert.Contains(t, reason, "holds commit-log offset")
	assert.Equal(t, want, o.srv.LiteDump())
}

// TestLiteSnapshotCrashBeforeRename: a crash after the new snapshot was
// written and synced but before its rename leaves the old snapshot and a
// .tmp: the start loads the old one, reads the records after it, and
// finds everything.
func TestLiteSnapshotCrashBeforeRename(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), snapCfg)
	n.parent("chat", 4)
	fillLite(t, n, "a", 30)
	n = n.restart()
	sent := fillLite(t, n, "b", 30)
	for i := range 10 { // more messages to lite topics the snapshot has
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "a"+strconv.Itoa(i), "later").GetCode())
		sent++
	}
	crash := t.TempDir()
	grpcmod.SetLiteSnapshotBeforeRename(func(tmp string) error {
		copyDir(t, n.dir, crash)
		return errors.New("crashed before the rename")
	})
	defer grpcmod.SetLiteSnapshotBeforeRename(nil)
	require.Error(t, n.srv.SnapshotLite())
	grpcmod.SetLiteSnapshotBeforeRename(nil)
	live := n.srv.LiteDump()
	_, err := os.Stat(filepath.Join(crash, "lite", "lite.snapshot.tmp"))
	require.NoError(t, err, "the crash left the new snapshot unrenamed")

	c := openLiteNode(t, crash, snapCfg)
	snap, reason, records := c.srv.LiteLoaded()
	require.True(t, snap, reason)
	assert.Equal(t, int64(sent), records, "the records after the old snapshot")
	got := c.srv.LiteDump()
	sameIndex(t, live, got, false)
	c.close()
	sameIndex(t, rebuilt(t, crash), got, true)
}

// TestLiteSnapshotOlderThanJournal: deletions, a lite topic made again
// and acks journalled after the snapshot apply to it: the deleted lite
// topics stay deleted (across a later full rebuild too: the deletions are
// kept in the journal), the one made again starts at lite offset 0.
func TestLiteSnapshotOlderThanJournal(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), snapCfg)
	n.parent("chat", 4)
	fillLite(t, n, "old", 20)
	fillLite(t, n, "keep", 20)
	n = n.restart() // the snapshot: all 40

	for i := range 20 {
		n.srv.AgeLite("chat", "old"+strconv.Itoa(i), 48*time.Hour)
	}
	for range 100 {
		if n.srv.LiteTopics() == 20 {
			break
		}
		n.srv.SweepLiteOnce()
	}
	require.Equal(t, 20, n.srv.LiteTopics(), "the old ones deleted by TTL")
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "old0", "again").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.sync("gw2", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "keep3").GetCode())
	got := n.readAll("gw2", "chat", "g", 3) // keep3: four messages, the first acked before the snapshot
	assert.Equal(t, []string{"tok1", "tok2", "tok3"}, got)
	live := n.srv.LiteDump()

	crash := t.TempDir()
	copyDir(t, n.dir, crash) // a SIGKILL: no snapshot at a stop
	c := openLiteNode(t, crash, snapCfg)
	snap, reason, _ := c.srv.LiteLoaded()
	require.True(t, snap, reason)
	loaded := c.srv.LiteDump()
	sameIndex(t, live, loaded, false)
	require.Len(t, loaded, 21)
	for _, e := range loaded {
		switch e.Name {
		case "old0":
			assert.Equal(t, int64(0), e.Base)
			assert.Len(t, e.Offs, 1, "made again: only its new message")
			assert.Empty(t, e.Groups, "the offsets journalled before its deletion were the old one's")
		case "keep3":
			assert.Equal(t, int64(4), e.Groups["g"], "the acks after the snapshot")
		}
	}
	// A start from a snapshot written after the deletions meets no record
	// of the deleted lite topics, yet keeps their deletions: a full
	// rebuild later (the snapshot lost) must not bring them back.
	c = c.restart()
	snap, reason, _ = c.srv.LiteLoaded()
	require.True(t, snap, reason)
	c.close()
	sameIndex(t, rebuilt(t, crash), loaded, true)
}

// TestLiteSnapshotPeriodic: the snapshot is written again while serving
// once grpc.lite.snapshot_changes changes were made; a crash after it
// reads only the records after it.
func TestLiteSnapshotPeriodic(t *testing.T) {
	grpcmod.SetLiteSnapshotRetry(0)
	defer grpcmod.SetLiteSnapshotRetry(10 * time.Second)
	cfg := func(c *grpcmod.Config) { c.Lite.SnapshotInterval = 0; c.Lite.SnapshotChanges = 10 }
	n := openLiteNode(t, t.TempDir(), cfg)
	n.parent("chat", 2)
	for i := range 12 {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s"+strconv.Itoa(i), "x").GetCode())
	}
	require.Eventually(t, func() bool { _, err := os.Stat(snapshotPath(n.dir)); return err == nil },
		10*time.Second, 50*time.Millisecond, "written by the sweep")
	// Quiet: the sweep writes it no more.
	require.Eventually(t, func() bool { return n.srv.LiteSnapshotPending() == 0 }, 10*time.Second, 50*time.Millisecond)
	for i := range 3 {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "late"+strconv.Itoa(i), "x").GetCode())
	}
	live := n.srv.LiteDump()
	crash := t.TempDir()
	copyDir(t, n.dir, crash)
	c := openLiteNode(t, crash, cfg)
	snap, reason, records := c.srv.LiteLoaded()
	require.True(t, snap, reason)
	assert.Equal(t, int64(3), records)
	sameIndex(t, live, c.srv.LiteDump(), false)
}
