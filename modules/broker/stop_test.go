package broker

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/filter/tag"
)

// stuckStore is a real store whose Append hangs (as on a disk that stopped
// answering) until released, ignoring its context.
type stuckStore struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stuckStore) Append(ctx context.Context, msgs []store.Message) ([]store.Position, error) {
	if s.armed.Load() {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.Store.Append(ctx, msgs)
}

// TestStopAbandonsStuckRequest: a send stuck in the store does not hold the
// broker's stop past its deadline: Stop returns within the deadline with
// an error that names the running requests, and the committed offsets are
// flushed to disk all the same (so the store's own close, the next stop
// hook, still has time to run).
func TestStopAbandonsStuckRequest(t *testing.T) {
	dir := t.TempDir()
	st := &stuckStore{Store: openStore(t, dir), entered: make(chan struct{}), release: make(chan struct{})}
	defer func() { require.NoError(t, st.Store.Close()) }()
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(st.release) }) }
	defer release()

	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer h.client.Close()

	require.Equal(t, remoting.Success, h.send("T", 0, "first", nil).Code, "creates the topic")
	st.armed.Store(true)
	// An offset committed before the stop must reach the disk.
	resp := h.invoke(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "42",
	}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	sent := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := h.client.Invoke(ctx, h.addr, remoting.NewRequest(remoting.SendMessage, sendExt("T", 0, nil), []byte("stuck")))
		sent <- err
	}()
	select {
	case <-st.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the send never reached the store")
	}

	const budget = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	err = b.Stop(ctx)
	require.Error(t, err, "a request was abandoned")
	assert.Contains(t, err.Error(), "requests still running at stop")
	assert.NoError(t, ctx.Err(), "Stop returned before its deadline")

	doc, err := os.ReadFile(filepath.Join(dir, "config", "consumerOffset.json"))
	if os.IsNotExist(err) {
		doc, err = os.ReadFile(filepath.Join(dir, "consumerOffset.json"))
	}
	require.NoError(t, err, "the offsets were flushed")
	assert.Contains(t, string(doc), "42")

	release()
	select {
	case <-sent: // answered or failed: either way the caller is not left hanging
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck send's caller was never released")
	}
}
