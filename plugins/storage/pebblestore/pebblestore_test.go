package pebblestore

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// testLogger logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func openStore(t testing.TB, cfg *Config, set store.Settings) *Store {
	t.Helper()
	s, err := Open(cfg, store.Deps{Logger: testLogger(t), Settings: set})
	require.NoError(t, err)
	return s
}

func settings(t testing.TB, mode store.FlushMode) store.Settings {
	s := storetest.DefaultSettings(t.TempDir())
	s.Flush = mode
	return s
}

func msg(topic string, qid int32, body string) store.Message {
	return storetest.Msg(topic, qid, body, map[string]string{"TAGS": "t"})
}

func TestConformance(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			// Pebble deletes single messages, so the retention checks hold
			// for any "segment" size; 64KiB makes the suite fill ~320KiB.
			storetest.RunWithOptions(t, func(t *testing.T, dir string, set store.Settings) store.Store {
				set.Flush = mode
				return openStore(t, NewConfig(), set)
			}, storetest.Options{SegmentSize: 64 << 10})
		})
	}
}
