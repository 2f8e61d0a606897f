package admin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// startNamesrv runs an in-process name server on 127.0.0.1:0 with its KV
// config under a temporary directory.
func startNamesrv(t *testing.T) (*namesrv.Server, string) {
	t.Helper()
	cfg := namesrv.NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	set := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	s, err := namesrv.New(cfg, set, nil)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s, s.Addrs()[0]
}

func newAdmin(t *testing.T, nameServers ...string) *admin.Admin {
	t.Helper()
	c, err := client.New(client.WithNameServers(nameServers...), client.WithDialer(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return admin.New(c)
}

// registerMaster puts a master broker with topics into a name server's
// route table, as its REGISTER_BROKER would.
func registerMaster(s *namesrv.Server, cluster, name, addr string, topics ...*protocol.TopicConfig) {
	w := protocol.TopicConfigWrapper{DataVersion: protocol.DataVersion{Timestamp: 1, Counter: 1}, TopicConfigTable: map[string]*protocol.TopicConfig{}}
	for _, tc := range topics {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	s.Routes().RegisterBroker(namesrv.BrokerRegistration{ClusterName: cluster, BrokerName: name, BrokerAddr: addr, Topics: w})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestKVConfigOnEveryNameServer(t *testing.T) {
	s1, ns1 := startNamesrv(t)
	s2, ns2 := startNamesrv(t)
	a := newAdmin(t, ns1, ns2)
	ctx := ctxT(t)

	_, found, err := a.KVConfig(ctx, "ns", "k")
	require.NoError(t, err)
	assert.False(t, found)
	_, found, err = a.KVList(ctx, "ns")
	require.NoError(t, err)
	assert.False(t, found)

	require.NoError(t, a.PutKVConfig(ctx, "ns", "k", "v1"))
	require.NoError(t, a.PutKVConfig(ctx, "ns", "k2", "v2"))
	for _, s := range []*namesrv.Server{s1, s2} {
		v, ok := s.KV().Get("ns", "k")
		require.True(t, ok)
		assert.Equal(t, "v1", v)
	}
	v, found, err := a.KVConfig(ctx, "ns", "k")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "v1", v)
	tbl, found, err := a.KVList(ctx, "ns")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, map[string]string{"k": "v1", "k2": "v2"}, tbl)

	require.NoError(t, a.DeleteKVConfig(ctx, "ns", "k"))
	for _, s := range []*namesrv.Server{s1, s2} {
		_, ok := s.KV().Get("ns", "k")
		assert.False(t, ok)
	}
}

// TestOrderTopicConfReachesClient: an ORDER_TOPIC_CONFIG entry and
// orderMessageEnable make the client publish to exactly the queues the
// entry names.
func TestOrderTopicConfReachesClient(t *testing.T) {
	s, ns := startNamesrv(t)
	registerMaster(s, "C1", "broker-a", "127.0.0.1:10911", &protocol.TopicConfig{TopicName: "Ordered", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	a := newAdmin(t, ns)
	ctx := ctxT(t)

	require.NoError(t, a.PutKVConfig(ctx, admin.OrderTopicConfigNamespace, "Ordered", "broker-a:2"))
	r, err := a.Route(ctx, "Ordered")
	require.NoError(t, err)
	assert.Len(t, r.Publish, 4, "orderMessageEnable is off by default")

	require.NoError(t, a.UpdateNamesrvConfig(ctx, map[string]string{"orderMessageEnable": "true"}))
	r, err = a.Route(ctx, "Ordered")
	require.NoError(t, err)
	assert.Equal(t, "broker-a:2", r.Data.OrderTopicConf)
	require.Len(t, r.Publish, 2)
	assert.Equal(t, client.MessageQueue{Topic: "Ordered", BrokerName: "broker-a", QueueID: 1}, r.Publish[1])
}

func TestWritePermOnEveryNameServer(t *testing.T) {
	s1, ns1 := startNamesrv(t)
	s2, ns2 := startNamesrv(t)
	tc := func(name string) *protocol.TopicConfig {
		return &protocol.TopicConfig{TopicName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	}
	registerMaster(s1, "C1", "broker-a", "127.0.0.1:10911", tc("T1"), tc("T2"))
	registerMaster(s2, "C1", "broker-a", "127.0.0.1:10911", tc("T1"))
	a := newAdmin(t, ns1, ns2)
	ctx := ctxT(t)

	got, err := a.WipeWritePerm(ctx, "broker-a")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{ns1: 2, ns2: 1}, got)
	r, err := a.Route(ctx, "T1")
	require.NoError(t, err)
	assert.Empty(t, r.Publish, "no writable queue left")
	assert.Len(t, r.Subscribe, 2, "consumers still drain it")

	got, err = a.AddWritePerm(ctx, "broker-a")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{ns1: 2, ns2: 1}, got)
	r, err = a.Route(ctx, "T1")
	require.NoError(t, err)
	assert.Len(t, r.Publish, 2)
}

func TestNamesrvConfigAdmin(t *testing.T) {
	_, ns1 := startNamesrv(t)
	_, ns2 := startNamesrv(t)
	a := newAdmin(t, ns1, ns2)
	ctx := ctxT(t)

	require.NoError(t, a.UpdateNamesrvConfig(ctx, map[string]string{"brokerTimeoutMillis": "90000"}))
	got, err := a.NamesrvConfig(ctx)
	require.NoError(t, err)
	want := map[string]string{"brokerTimeoutMillis": "90000", "orderMessageEnable": "false"}
	assert.Equal(t, map[string]map[string]string{ns1: want, ns2: want}, got)

	err = a.UpdateNamesrvConfig(ctx, map[string]string{"listenPort": "1"})
	require.Error(t, err)
	assert.Equal(t, remoting.SystemError, client.CodeOf(err))
	assert.Contains(t, err.Error(), "listenPort: cannot change at run time")

	err = a.UpdateNamesrvConfig(ctx, map[string]string{"a\nb": "1"})
	assert.ErrorContains(t, err, "properties line")
}

func TestTopicListsAdmin(t *testing.T) {
	s, ns := startNamesrv(t)
	a := newAdmin(t, ns)
	ctx := ctxT(t)
	topics, addr, err := a.SystemTopics(ctx)
	require.NoError(t, err)
	assert.Empty(t, topics)
	assert.Empty(t, addr)

	registerMaster(s, "C1", "broker-a", "127.0.0.1:10911", &protocol.TopicConfig{TopicName: "T1", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	topics, addr, err = a.SystemTopics(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"C1", "broker-a"}, topics)
	assert.Equal(t, "127.0.0.1:10911", addr)

	topics, err = a.TopicsByCluster(ctx, "C1")
	require.NoError(t, err)
	assert.Equal(t, []string{"T1"}, topics)
	topics, err = a.TopicsByCluster(ctx, "nope")
	require.NoError(t, err)
	assert.Empty(t, topics)
}
