package broker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/filter/tag"
)

// TestRegistrationLogBackoff: a name server that does not answer is
// logged on the first failure, then once per doubling back-off up to
// regLogMax, not every round; an answer ends the run.
func TestRegistrationLogBackoff(t *testing.T) {
	var r registrations
	t0 := time.Unix(1_800_000_000, 0)
	errDial := errors.New("dial tcp 10.0.0.1:9876: connect: connection refused")
	logged := 0
	var at []time.Duration
	for s := time.Duration(0); s <= 3*time.Hour; s += 10 * time.Second {
		if _, log := r.unanswered("ns", errDial, t0.Add(s)); log {
			logged++
			at = append(at, s)
		}
	}
	// 0, 1m, 3m, 7m, 15m, 31m, then every 30m up to 3h: 61m ... 181m.
	assert.Equal(t, []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute, 15 * time.Minute, 31 * time.Minute,
		61 * time.Minute, 91 * time.Minute, 121 * time.Minute, 151 * time.Minute}, at)
	assert.Equal(t, 1081, r.record("ns", answer(remoting.Success)), "failures before the answer")
	n, log := r.unanswered("ns", errDial, t0.Add(4*time.Hour))
	assert.Equal(t, 1, n)
	assert.True(t, log, "a new run logs at once")
}

// TestRegistrationNowhere: name servers that do not answer make the
// broker not ready only when none takes it.
func TestRegistrationNowhere(t *testing.T) {
	errDial := errors.New("connection refused")
	now := time.Unix(1_800_000_000, 0)
	b := &Broker{cfg: &Config{Namesrv: []string{"a:1", "b:1"}}}
	assert.Nil(t, b.RegistrationRefused(), "nothing known yet")
	b.regs.unanswered("a:1", errDial, now)
	assert.Nil(t, b.RegistrationRefused(), "b:1 may still take it")
	b.regs.record("b:1", answer(remoting.Success))
	assert.Nil(t, b.RegistrationRefused(), "b:1 took it")
	b.regs.record("b:1", answer(remoting.NoPermission))
	got := b.RegistrationRefused()
	require.Len(t, got, 2)
	assert.Contains(t, got["b:1"], "NO_PERMISSION")
	assert.Contains(t, got["a:1"], "no answer to 1 registrations in a row (connection refused); check broker.namesrv")
	b.regs.unanswered("b:1", errDial, now)
	assert.Len(t, b.RegistrationRefused(), 2, "both unreached")
	b.regs.record("a:1", answer(remoting.Success))
	got = b.RegistrationRefused()
	assert.Equal(t, []string{"b:1"}, slices.Collect(maps.Keys(got)), "a:1 took it; b:1's last answer was still a refusal")
}

// recordingHandler keeps the records a logger writes.
type recordingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(level slog.Level, substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

// TestUnreachableNamesrv is issue 42's report: a broker whose only name
// server it could not reach logged a WARN every round and looked ready.
// It logs one ERROR naming broker.namesrv for several failed rounds, and
// RegistrationRefused (/readyz) names the name server.
func TestUnreachableNamesrv(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	t.Cleanup(func() { _ = st.Close() })
	cfg := NewConfig()
	cfg.Listen, cfg.Advertise, cfg.ScanInterval = "127.0.0.1:0", "127.0.0.1:10911", time.Hour
	cfg.Namesrv = []string{"127.0.0.1:1"} // nothing listens on port 1
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	logs := &recordingHandler{}
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Logger: slog.New(logs),
		Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, b.Stop(ctx))
	})

	failures := func() int {
		b.regs.mu.Lock()
		defer b.regs.mu.Unlock()
		if f := b.regs.unreached["127.0.0.1:1"]; f != nil {
			return f.count
		}
		return 0
	}
	for want := 1; want <= 4; want++ {
		b.triggerRegister()
		require.Eventually(t, func() bool {
			if failures() < want {
				b.triggerRegister() // the channel holds one; a round may have taken it
				return false
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "registration %d", want)
	}
	assert.Equal(t, 1, logs.count(slog.LevelError, "cannot register with name server"), "one line for the run, not one per round")
	assert.Zero(t, logs.count(slog.LevelWarn, "register with name server"))
	got := b.RegistrationRefused()
	require.Contains(t, got, "127.0.0.1:1")
	assert.Contains(t, got["127.0.0.1:1"], "check broker.namesrv")
}

// answer is a name server's answer to a registration.
func answer(code int32) *remoting.Command {
	return remoting.NewResponse(remoting.NewRequest(remoting.RegisterBroker, nil, nil), code, "no")
}
