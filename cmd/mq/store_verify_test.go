package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

// TestStoreVerify runs mq store verify on a clean store, then on one with a
// damaged record: the damage is reported, listed in the manifest, and the
// command fails; --list prints the manifest without opening the store.
func TestStoreVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	deps := store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: storetest.DefaultSettings(dir)}
	ccfg := commitlog.NewConfig()
	ccfg.SegmentSize = 4 << 20
	s, err := commitlog.Open(ccfg, deps)
	require.NoError(t, err)
	var pos []store.Position
	for i := 0; i < 50; i++ {
		p, err := s.Append(context.Background(), []store.Message{storetest.Msg("T", int32(i%3), fmt.Sprint("message-", i), map[string]string{"KEYS": "k"})})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())

	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--set", "log.level=error", "--set", "storage.commitlog.segment_size=4MiB"}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}
	out, err := run("store", "verify", "--dir", dir)
	require.NoError(t, err, out)
	assert.Contains(t, out, "50 records, 50 index entries")
	assert.Contains(t, out, "no damage found")

	// Flip body bytes of record 20.
	p := pos[20]
	f, err := os.OpenFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0)), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("XX"), p.CommitLogOffset+90) // in the body (it starts at 88)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	out, err = run("store", "verify", "--dir", dir, "--rate", "64MiB")
	require.ErrorIs(t, err, errDamageFound, out)
	assert.Contains(t, out, "49 records")
	assert.Contains(t, out, fmt.Sprintf("commitlog/%020d at %d", 0, p.CommitLogOffset))
	assert.Contains(t, out, "CRC mismatch")
	assert.Contains(t, out, "damage manifest (")

	out, err = run("store", "verify", "--dir", dir, "--list")
	require.ErrorIs(t, err, errDamageFound, out)
	assert.Contains(t, out, "[copy: damaged/")
}

// TestStoreVerifyPebble runs mq store verify on a Pebble store with one
// damaged sstable block: the damaged queue offsets are reported, the
// finding is in the damage manifest (the CommitLog engine's), the command
// fails, and --list prints the manifest.
func TestStoreVerifyPebble(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	deps := store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: storetest.DefaultSettings(dir)}
	pcfg := pebblestore.NewConfig()
	pcfg.Compression = "none"
	pcfg.MemTableSize = 256 << 10
	s, err := pebblestore.Open(pcfg, deps)
	require.NoError(t, err)
	const n = 4000 // about 1.5MB: the first memtables are flushed to sstables
	body := func(i int) string {
		return fmt.Sprintf("message-%05d-%s", i, strings.Repeat(string(rune('a'+i%26)), 300))
	}
	for i := 0; i < n; i++ {
		_, err := s.Append(context.Background(), []store.Message{storetest.Msg("T", int32(i%2), body(i), nil)})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--set", "log.level=error", "--set", "storage.pebble.compression=none"}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}
	out, err := run("store", "verify", "--engine", "pebble", "--dir", dir)
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("%d records, %d index entries", n, n))
	assert.Contains(t, out, "no damage found")

	// Flip bytes in the body of message 100 (queue 0, offset 50) in its
	// sstable.
	ssts, err := filepath.Glob(filepath.Join(dir, "pebble", "*.sst"))
	require.NoError(t, err)
	damaged := false
	for _, p := range ssts {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if at := bytes.Index(b, []byte(body(100))); at >= 0 {
			copy(b[at+20:], "XXXXXXXX")
			require.NoError(t, os.WriteFile(p, b, 0o644))
			damaged = true
		}
	}
	require.True(t, damaged, "message 100 is in an sstable")

	out, err = run("store", "verify", "--engine", "pebble", "--dir", dir)
	require.ErrorIs(t, err, errDamageFound, out)
	assert.Regexp(t, `verify: .*queue T/0 offsets \d+\.\.\d+ unreadable`, out)
	assert.NotContains(t, out, fmt.Sprintf("%d records", n), "the damaged block's records are not counted")
	assert.Contains(t, out, "damage manifest (")
	t.Log(out)

	out, err = run("store", "verify", "--engine", "pebble", "--dir", dir, "--list")
	require.ErrorIs(t, err, errDamageFound, out)
	assert.Contains(t, out, "queue T/0 offsets")
}
