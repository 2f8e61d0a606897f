package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// TestRetentionMovesConsumersForward: after expired segments are deleted,
// a consumer behind the new min offset gets PULL_OFFSET_MOVED with
// nextBeginOffset at the min, and reading resumes from there.
func TestRetentionMovesConsumersForward(t *testing.T) {
	dir := t.TempDir()
	cl := commitlog.NewConfig()
	cl.SegmentSize = 1 << 20
	st, err := commitlog.Open(cl, store.Deps{Settings: store.Settings{Dir: dir, Flush: store.FlushSync, MaxMessageSize: 4 << 20}})
	require.NoError(t, err)
	cfg := NewConfig()
	cfg.Listen, cfg.Advertise, cfg.ScanInterval = "127.0.0.1:0", "127.0.0.1:10911", time.Hour
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)

	body := string(make([]byte, 8<<10))
	const n = 400 // ~3.2 MiB: several 1 MiB segments
	for i := 0; i < n; i++ {
		require.Equal(t, remoting.Success, h.send("Expiring", 0, body, nil).Code)
	}
	// Everything stored so far is older than a cut just after it.
	time.Sleep(10 * time.Millisecond)
	c := retention.New(st, retention.Config{Retention: time.Millisecond}, nil)
	freed := c.RunOnce(context.Background())
	assert.Positive(t, freed, "whole expired segments were deleted")

	min := h.invoke(remoting.GetMinOffset, map[string]string{"topic": "Expiring", "queueId": "0"}, nil).Ext("offset")
	minOff, err := strconv.ParseInt(min, 10, 64)
	require.NoError(t, err)
	assert.Positive(t, minOff, "the queue's min offset moved forward")
	resp := h.invoke(remoting.PullMessage, pullExt("G", "Expiring", 0, 0, pullSubscription, 0), nil)
	assert.Equal(t, remoting.PullOffsetMoved, resp.Code)
	assert.Equal(t, min, resp.Ext("nextBeginOffset"))
	resp = h.invoke(remoting.PullMessage, pullExt("G", "Expiring", 0, minOff, pullSubscription, 0), nil)
	assert.Equal(t, remoting.Success, resp.Code, "reading resumes at the min")
}
