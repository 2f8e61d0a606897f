package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a broker with the schedule service on a commitlog (or pebble)
// store in dir.
type node struct {
	t      testing.TB
	dir    string
	cfg    *Config
	engine string
	st     store.Store
	b      *broker.Broker
	s      *Service
}

// engines are the storage engines the tests that cover both run on.
var engines = []string{"commitlog", "pebble"}

func startNode(t testing.TB, dir string, cfg *Config) *node {
	return startNodeOn(t, "commitlog", dir, cfg)
}

func openStore(t testing.TB, engine, dir string) store.Store {
	t.Helper()
	set := store.Settings{Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20}
	var st store.Store
	var err error
	switch engine {
	case "commitlog":
		st, err = commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: set})
	case "pebble":
		st, err = pebblestore.Open(pebblestore.NewConfig(), store.Deps{Settings: set})
	default:
		t.Fatalf("unknown engine %q", engine)
	}
	require.NoError(t, err)
	return st
}

func startNodeOn(t testing.TB, engine, dir string, cfg *Config) *node {
	t.Helper()
	st := openStore(t, engine, dir)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: ts, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	s, err := New(cfg, b)
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	require.NoError(t, s.Start(context.Background()))
	n := &node{t: t, dir: dir, cfg: cfg, engine: engine, st: st, b: b, s: s}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(n.t, n.s.Stop(ctx))
	require.NoError(n.t, n.b.Stop(ctx))
	require.NoError(n.t, n.st.Close())
	n.b = nil
}

func (n *node) restart() *node {
	n.stop()
	return startNodeOn(n.t, n.engine, n.dir, n.cfg)
}

func (n *node) put(topic string, props message.Properties, body string) {
	n.t.Helper()
	n.putExt(topic, props, body)
}

// putExt puts one message and returns it as the put hooks left it.
func (n *node) putExt(topic string, props message.Properties, body string) *message.Ext {
	n.t.Helper()
	m := &message.Ext{Message: message.Message{Topic: topic, Properties: props, Body: []byte(body)}, BornTimestamp: time.Now().UnixMilli()}
	_, err := n.b.Put(context.Background(), []*message.Ext{m})
	require.NoError(n.t, err)
	return m
}

// received is what arrived in topic's queue 0, with store times.
type received struct {
	body    string
	props   message.Properties
	storeMs int64
}

func (n *node) read(topic string) []received {
	n.t.Helper()
	var res store.ReadResult
	var out []received
	for off := int64(0); ; {
		res.Reset()
		require.NoError(n.t, n.st.Read(context.Background(), store.Queue{Topic: topic}, off, store.ReadOptions{MaxMessages: 1024}, &res))
		if len(res.Records) == 0 {
			return out
		}
		for _, rec := range res.Records {
			m, _, err := message.DecodeStored(rec)
			require.NoError(n.t, err)
			out = append(out, received{body: string(m.Body), props: m.Properties, storeMs: m.StoreTimestamp})
		}
		off = res.NextOffset
	}
}

// waitCount polls until topic holds want messages.
func (n *node) waitCount(topic string, want int, timeout time.Duration) []received {
	n.t.Helper()
	var got []received
	require.Eventually(n.t, func() bool { got = n.read(topic); return len(got) >= want }, timeout, 5*time.Millisecond, "want %d in %s", want, topic)
	return got
}
