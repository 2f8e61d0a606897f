package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

// TestStoreMigrate runs mq store migrate commitlog -> pebble -> commitlog.
func TestStoreMigrate(t *testing.T) {
	base := t.TempDir()
	a, b, c := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	deps := store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: storetest.DefaultSettings(a)}
	ccfg := commitlog.NewConfig()
	ccfg.SegmentSize = 4 << 20
	src, err := commitlog.Open(ccfg, deps)
	require.NoError(t, err)
	for i := 0; i < 50; i++ {
		_, err := src.Append(context.Background(), []store.Message{storetest.Msg("T", int32(i%3), "m", map[string]string{"KEYS": "k"})})
		require.NoError(t, err)
	}
	require.NoError(t, src.SaveMeta("consumerOffset", []byte(`{"offsetTable":{}}`)))
	require.NoError(t, src.SaveMeta("custom", []byte(`{}`)))
	require.NoError(t, src.Close())
	// A broker's journal of topic changes not yet folded into topics (as
	// after a crash) goes with the documents.
	journal := []byte("journal bytes")
	require.NoError(t, os.WriteFile(filepath.Join(a, "config", "topics.journal"), journal, 0o644))

	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--set", "log.level=error", "--set", "storage.commitlog.segment_size=4MiB"}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}
	out, err := run("store", "migrate", "--from-engine", "commitlog", "--from", a, "--to-engine", "pebble", "--to", b)
	require.NoError(t, err, out)
	assert.Contains(t, out, "50 messages")
	assert.Contains(t, out, "consumerOffset, custom")
	assert.Contains(t, out, "topics.journal")
	got, err := os.ReadFile(filepath.Join(b, "config", "topics.journal"))
	require.NoError(t, err)
	assert.Equal(t, journal, got)
	out, err = run("store", "migrate", "--from-engine", "pebble", "--from", b, "--to-engine", "commitlog", "--to", c)
	require.NoError(t, err, out)
	assert.Contains(t, out, "store timestamps were not kept")
	_, err = run("store", "migrate", "--from-engine", "pebble", "--from", b, "--to-engine", "commitlog", "--to", c)
	assert.ErrorContains(t, err, "not empty")

	p, err := pebblestore.Open(pebblestore.NewConfig(), store.Deps{Settings: storetest.DefaultSettings(b)})
	require.NoError(t, err)
	defer p.Close()
	_, mx, err := p.Offsets(store.Queue{Topic: "T", ID: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(17), mx)
}
