package quictransport

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs to t.Log until the test's cleanups have run.
func testLogger(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
	logs bytes.Buffer
}

func (w *tWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(b, "\n")))
	}
	return len(b), nil
}

func testConfig() *Config {
	cfg := NewConfig()
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.InsecureSkipVerify = true
	return cfg
}

func deps(t testing.TB, maxFrame int) transport.Deps {
	return transport.Deps{Logger: testLogger(t), MaxFrameSize: maxFrame}
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		cfg := testConfig()
		ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, deps(t, transporttest.MaxFrameSize))
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return Dial(ctx, ln.Addr(), cfg, deps(t, transporttest.MaxFrameSize))
		}
	})
}
