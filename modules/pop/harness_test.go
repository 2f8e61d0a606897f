package pop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a test clock shared across restarts of a node.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type engine struct {
	name string
	open func(dir string) (store.Store, error)
}

func settings(dir string) store.Deps {
	return store.Deps{Settings: store.Settings{Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20}}
}

var engines = []engine{
	{"commitlog", func(dir string) (store.Store, error) { return commitlog.Open(commitlog.NewConfig(), settings(dir)) }},
	{"pebble", func(dir string) (store.Store, error) { return pebblestore.Open(pebblestore.NewConfig(), settings(dir)) }},
}

// forEngines runs f on a node of each storage engine.
func forEngines(t *testing.T, f func(t *testing.T, e engine)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e) })
	}
}

// node is a broker on 127.0.0.1 with the pop service on a real store in dir.
type node struct {
	t     testing.TB
	e     engine
	dir   string
	cfg   *Config
	clock *clock
	st    store.Store
	b     *broker.Broker
	s     *Service
	tagc  filter.Compiler
}

func startNode(t testing.TB, e engine, dir string, cfg *Config, c *clock) *node {
	t.Helper()
	st, err := e.open(dir)
	require.NoError(t, err)
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
	s.now = c.now
	require.NoError(t, b.Start(context.Background()))
	n := &node{t: t, e: e, dir: dir, cfg: cfg, clock: c, st: st, b: b, s: s, tagc: tagc}
	t.Cleanup(n.stop)
	return n
}

func newNode(t testing.TB, e engine) *node {
	return startNode(t, e, t.TempDir(), NewConfig(), &clock{t: time.Unix(1_700_000_000, 0)})
}

func (n *node) stop() {
	if n.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(n.t, n.s.Close())
	require.NoError(n.t, n.b.Stop(ctx))
	require.NoError(n.t, n.st.Close())
	n.b = nil
}

// restart stops the node and opens everything again on the same files.
func (n *node) restart() *node {
	n.stop()
	return startNode(n.t, n.e, n.dir, n.cfg, n.clock)
}

func (n *node) topic(name string, queues int32) {
	n.t.Helper()
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6})
	require.NoError(n.t, err)
}

func (n *node) put(topic string, queue int32, tags, body string) {
	n.t.Helper()
	props := message.Properties{message.PropertyUniqKey: "U-" + body}
	if tags != "" {
		props[message.PropertyTags] = tags
	}
	m := &message.Ext{Message: message.Message{Topic: topic, Properties: props, Body: []byte(body)}, QueueID: queue, BornTimestamp: time.Now().UnixMilli()}
	_, err := n.b.Put(context.Background(), []*message.Ext{m})
	require.NoError(n.t, err)
}

func (n *node) receive(group, topic string, m filter.Matcher, maxMsgs int, invisible time.Duration) []Received {
	n.t.Helper()
	got, err := n.s.Receive(context.Background(), group, topic, m, maxMsgs, invisible)
	require.NoError(n.t, err)
	return got
}

func bodies(rs []Received) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, string(r.Message.Body))
	}
	return out
}
