package schedule

import (
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

func TestHandleFormat(t *testing.T) {
	// Java's RecallMessageHandle.HandleV1.buildHandle("t", "b", "1700000000001", "id")
	// is base64url of "v1 t b 1700000000001 id".
	h := EncodeHandle("t", "b", 1_700_000_000_000, "id")
	raw, err := base64.URLEncoding.DecodeString(h)
	require.NoError(t, err)
	assert.Equal(t, "v1 t b 1700000000001 id", string(raw))
	got, err := DecodeHandle(h)
	require.NoError(t, err)
	assert.Equal(t, Handle{Topic: "t", BrokerName: "b", Timestamp: 1_700_000_000_001, MessageID: "id"}, got)

	tests := []struct {
		name string
		give string
	}{
		{"empty", ""},
		{"not base64", "%%%"},
		{"v2", base64.URLEncoding.EncodeToString([]byte("v2 t b 1 id"))},
		{"short", base64.URLEncoding.EncodeToString([]byte("v1 t b 1"))},
		{"bad time", base64.URLEncoding.EncodeToString([]byte("v1 t b soon id"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeHandle(tt.give)
			assert.ErrorIs(t, err, ErrRecallInvalid)
		})
	}
}

// TestRecall recalls timer messages on both storage engines: one whose
// wheel slot is in memory, one whose slot is still on disk; the recall is
// durable across a restart, wrong topics and made-up handles are refused,
// and the messages not recalled are delivered.
//
// The service's clock (Config.now) stands still until the test moves it:
// near's slot is loaded and far's is on disk when they are recalled,
// nothing comes due before the restart, and the timers come due when the
// clock is moved past them. The recalls and the restart used to have to
// fit in the 1.2 s before near came due by the wall clock.
func TestRecall(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			start := time.Now()
			var shift atomic.Int64 // added to start: the service's clock
			c := shortConfig()
			c.wheelSlot = 200 * time.Millisecond
			c.now = func() time.Time { return start.Add(time.Duration(shift.Load())) }
			n := startNodeOn(t, engine, t.TempDir(), c)
			name := n.b.Config().Name
			now := start.UnixMilli()
			timer := func(body string, at int64) string {
				m := n.putExt("T", message.Properties{message.PropertyTimerDeliverMS: strconv.FormatInt(at, 10),
					message.PropertyUniqKey: "ID-" + body}, body)
				h := HandleOf(name, m)
				require.NotEmpty(t, h, "a held timer message has a handle")
				return h
			}
			near := timer("near", now+1200) // slot loaded (prefetch 2s)
			far := timer("far", now+3500)   // slot on disk
			keep := timer("keep", now+1500)
			timer("late", now+3000)
			plain := n.putExt("T", nil, "plain")
			assert.Empty(t, HandleOf(name, plain), "a message delivered at once has none")

			ctx := t.Context()
			id, err := n.s.Recall(ctx, "T", near)
			require.NoError(t, err)
			assert.Equal(t, "ID-near", id)
			_, err = n.s.Recall(ctx, "T", near)
			require.NoError(t, err, "recalling twice is no error")

			_, err = n.s.Recall(ctx, "Other", far)
			assert.ErrorIs(t, err, ErrRecallInvalid, "topic must match")
			h, err := DecodeHandle(keep)
			require.NoError(t, err)
			forged := EncodeHandle("T", name, h.Timestamp-1, "ID-none")
			_, err = n.s.Recall(ctx, "T", forged)
			assert.ErrorIs(t, err, ErrRecallNotFound, "a made-up message id")
			shifted := EncodeHandle("T", name, h.Timestamp, "ID-keep")
			_, err = n.s.Recall(ctx, "T", shifted)
			assert.ErrorIs(t, err, ErrRecallNotFound, "another delivery time")
			_, err = n.s.Recall(ctx, "T", EncodeHandle("T", "other-broker", h.Timestamp-1, "ID-keep"))
			assert.ErrorIs(t, err, ErrRecallInvalid, "another broker's handle")

			id, err = n.s.Recall(ctx, "T", far)
			require.NoError(t, err)
			assert.Equal(t, "ID-far", id)

			n = n.restart()
			// Every timer comes due: keep and late are delivered, near and
			// far skipped by the restarted service.
			shift.Store(int64(3500*time.Millisecond + time.Second))
			signal(n.s.timer.wake)
			require.Eventually(t, func() bool { return n.s.Recalled() == 2 && len(n.read("T")) >= 3 }, 10*time.Second, 5*time.Millisecond,
				"near and far skipped after the restart; plain, keep and late delivered")
			_, err = n.s.Recall(ctx, "T", keep)
			assert.ErrorIs(t, err, ErrRecallTooLate)
			var bodies []string
			for _, r := range n.read("T") {
				bodies = append(bodies, r.body)
			}
			assert.ElementsMatch(t, []string{"plain", "keep", "late"}, bodies, "recalled messages never delivered")
		})
	}
}
