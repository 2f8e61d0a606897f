package schedule

import (
	"encoding/base64"
	"strconv"
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
func TestRecall(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			c := shortConfig()
			c.wheelSlot = 200 * time.Millisecond
			n := startNodeOn(t, engine, t.TempDir(), c)
			name := n.b.Config().Name
			now := time.Now().UnixMilli()
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
			n.waitCount("T", 3, 5*time.Second) // plain, keep, late
			_, err = n.s.Recall(ctx, "T", keep)
			assert.ErrorIs(t, err, ErrRecallTooLate)
			time.Sleep(time.Until(time.UnixMilli(now + 3500 + 700)))
			got := n.read("T")
			var bodies []string
			for _, r := range got {
				bodies = append(bodies, r.body)
			}
			assert.ElementsMatch(t, []string{"plain", "keep", "late"}, bodies, "recalled messages never delivered")
			assert.Equal(t, int64(2), n.s.Recalled(), "near and far skipped after the restart")
		})
	}
}
