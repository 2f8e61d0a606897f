package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func transports() *transport.Set {
	return transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
}

// node is one in-process broker with its replication service.
type node struct {
	t    testing.TB
	dir  string
	cfg  *broker.Config
	hcfg *Config
	st   *commitlog.Store
	b    *broker.Broker
	ha   *Service
	addr string
	// restarts counts the failover service's restart requests.
	restarts atomic.Int32
}

func startNode(t testing.TB, dir string, listen string, mod func(*broker.Config, *Config)) *node {
	t.Helper()
	cfg := broker.NewConfig()
	cfg.Listen = listen
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	hcfg := NewConfig()
	hcfg.MaxWait = 200 * time.Millisecond
	hcfg.MetaInterval = 200 * time.Millisecond
	hcfg.SyncTimeout = time.Second
	if mod != nil {
		mod(cfg, hcfg)
	}
	n := &node{t: t, dir: dir, cfg: cfg, hcfg: hcfg}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *node) start() {
	t := n.t
	ccfg := commitlog.NewConfig()
	ccfg.SegmentSize = 64 << 10
	st, err := commitlog.Open(ccfg, store.Deps{Settings: store.Settings{
		Dir: n.dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	cfg := *n.cfg
	b, err := broker.New(&cfg, broker.Deps{Store: st, Transports: transports(), DataDir: n.dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	h, err := New(n.hcfg, b, transports().Dial, nil)
	require.NoError(t, err)
	if n.hcfg.Failover {
		require.NoError(t, h.EnableFailover(Dir(n.dir), func() { n.restarts.Add(1) }))
	}
	require.NoError(t, b.Start(context.Background()))
	require.NoError(t, h.Start(context.Background()))
	n.st, n.b, n.ha, n.addr = st, b, h, b.Addrs()[0]
	if n.cfg.Listen == "127.0.0.1:0" {
		n.cfg.Listen = n.addr // restart on the same port
	}
}

func (n *node) stop() {
	if n.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(n.t, n.ha.Stop(ctx))
	require.NoError(n.t, n.b.Stop(ctx))
	require.NoError(n.t, n.st.Close())
	n.b = nil
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func newClient(t *testing.T) *remoting.Client {
	c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, c *remoting.Client, addr, topic string, queue int, body string) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queue), "sysFlag": "0", "bornTimestamp": "0", "flag": "0",
		"properties":     message.Properties{"UNIQ_KEY": body, "KEYS": body}.Encode(),
		"reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte(body)))
	require.NoError(t, err)
	return resp
}

func masterSlave(t testing.TB, role string) (m, s *node) {
	m = startNode(t, t.TempDir(), "127.0.0.1:0", func(c *broker.Config, _ *Config) { c.Role = role })
	addr := freeAddr(t)
	s = startNode(t, t.TempDir(), addr, func(c *broker.Config, h *Config) {
		c.ID, c.Role, c.Advertise = 1, broker.RoleSlave, addr
		h.MasterAddr = m.addr
	})
	return m, s
}

func waitCaughtUp(t *testing.T, m, s *node) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, a := m.st.LogOffsets()
		_, b := s.st.LogOffsets()
		return a == b
	}, 10*time.Second, 10*time.Millisecond)
}

// sameLogs checks both commit logs hold the same records at the same
// offsets and both have the same consume queues.
func sameLogs(t *testing.T, m, s *node) {
	t.Helper()
	mn, mx := m.st.LogOffsets()
	sn, sx := s.st.LogOffsets()
	require.Equal(t, [2]int64{mn, mx}, [2]int64{sn, sx})
	for from := mn; from < mx; {
		a, next, err := m.st.ReadLog(context.Background(), from, 1<<20)
		require.NoError(t, err)
		b, next2, err := s.st.ReadLog(context.Background(), from, 1<<20)
		require.NoError(t, err)
		require.Equal(t, next, next2)
		require.Equal(t, a, b, "records from %d", from)
		from = next
	}
	for _, q := range m.st.Queues() {
		a1, a2, _ := m.st.Offsets(q)
		b1, b2, _ := s.st.Offsets(q)
		assert.Equal(t, [2]int64{a1, a2}, [2]int64{b1, b2}, "queue %s", q)
	}
}

func TestReplicationResumesAfterDisconnect(t *testing.T) {
	m, s := masterSlave(t, broker.RoleAsyncMaster)
	c := newClient(t)
	for i := 0; i < 200; i++ {
		resp := send(t, c, m.addr, "T", i%4, fmt.Sprintf("a-%03d-%0200d", i, i))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	waitCaughtUp(t, m, s)
	sameLogs(t, m, s)
	assert.Zero(t, s.ha.Lag())

	// The slave goes away; the master keeps taking writes.
	s.stop()
	_, before := s.st.LogOffsets()
	for i := 200; i < 500; i++ {
		require.Equal(t, remoting.Success, send(t, c, m.addr, "T", i%4, fmt.Sprintf("b-%03d-%0200d", i, i)).Code)
	}
	_, mx := m.st.LogOffsets()
	require.Greater(t, mx, before)
	s.start()
	waitCaughtUp(t, m, s)
	sameLogs(t, m, s)

	// And the master goes away and comes back.
	m.stop()
	require.Eventually(t, func() bool { return !s.ha.Following() }, 10*time.Second, 10*time.Millisecond)
	m.start()
	for i := 500; i < 600; i++ {
		require.Equal(t, remoting.Success, send(t, c, m.addr, "U", i%2, fmt.Sprintf("c-%03d", i)).Code)
	}
	waitCaughtUp(t, m, s)
	sameLogs(t, m, s)

	// The slave serves pulls of the same records, and refuses sends.
	resp := send(t, c, s.addr, "T", 0, "to-slave")
	assert.Equal(t, remoting.ServiceNotAvailable, resp.Code)
	_, err := s.b.Put(context.Background(), []*message.Ext{{Message: message.Message{Topic: "T", Body: []byte("local"), Properties: message.Properties{}}}})
	assert.ErrorIs(t, err, broker.ErrRejected, "no local writes on a slave (schedule, retry, transactions)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pull := func(addr string) *remoting.Command {
		r, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "CG", "topic": "T", "queueId": "1", "queueOffset": "10", "maxMsgNums": "8",
			"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil))
		require.NoError(t, err)
		return r
	}
	pm, ps := pull(m.addr), pull(s.addr)
	require.Equal(t, remoting.Success, pm.Code, pm.Remark)
	require.Equal(t, remoting.Success, ps.Code, ps.Remark)
	assert.Equal(t, pm.Body, ps.Body)
	assert.Equal(t, pm.Ext("nextBeginOffset"), ps.Ext("nextBeginOffset"))
}

func TestSyncMasterAcknowledgesAfterSlave(t *testing.T) {
	m, s := masterSlave(t, broker.RoleSyncMaster)
	c := newClient(t)
	require.Eventually(t, func() bool { return s.ha.Following() }, 10*time.Second, 10*time.Millisecond)
	for i := 0; i < 50; i++ {
		resp := send(t, c, m.addr, "T", i%4, fmt.Sprint("m", i))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		// Acknowledged means on the slave.
		_, sx := s.st.LogOffsets()
		off, _ := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
		_, qx, _ := s.st.Offsets(store.Queue{Topic: "T", ID: int32(i % 4)})
		assert.Greater(t, qx, off, "queue offset %d is on the slave (slave max %d)", off, sx)
	}
	s.stop()
	resp := send(t, c, m.addr, "T", 0, "no-slave")
	// The slave was seen a moment ago: the send waits sync_timeout.
	assert.Contains(t, []int32{remoting.FlushSlaveTimeout, remoting.SlaveNotAvailable}, resp.Code)
	assert.NotEmpty(t, resp.Ext("msgId"), "the send result headers are still set")
	s.start()
	require.Eventually(t, func() bool {
		return send(t, c, m.addr, "T", 0, "back").Code == remoting.Success
	}, 10*time.Second, 50*time.Millisecond)
	waitCaughtUp(t, m, s)
	sameLogs(t, m, s)
}

func TestSlaveCopiesTopicsAndOffsets(t *testing.T) {
	m, s := masterSlave(t, broker.RoleAsyncMaster)
	c := newClient(t)
	require.Equal(t, remoting.Success, send(t, c, m.addr, "Copied", 0, "x").Code)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	upd := func(addr string, off int64) {
		_, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
			"consumerGroup": "CG", "topic": "Copied", "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}, nil))
		require.NoError(t, err)
	}
	upd(m.addr, 1)
	require.Eventually(t, func() bool {
		_, ok := s.b.OffsetTable()["Copied@CG"][0]
		return ok
	}, 10*time.Second, 20*time.Millisecond, "offsets copied to the slave")
	assert.Equal(t, int64(1), s.b.OffsetTable()["Copied@CG"][0])
	// Not necessarily in the same copy: a full copy (every meta_interval)
	// that fetched the topics before "Copied" was made and the offsets
	// after its commit leaves the topic to the next copy, which the topic
	// table's new version starts at once.
	require.Eventually(t, func() bool {
		_, ok := s.b.TopicConfigs().TopicConfigTable["Copied"]
		return ok
	}, 10*time.Second, 20*time.Millisecond, "topic copied to the slave")

	// A topic deleted on the master is deleted on the slave.
	require.Equal(t, remoting.Success, send(t, c, m.addr, "Deleted", 0, "y").Code)
	require.Eventually(t, func() bool { _, ok := s.b.TopicConfig("Deleted"); return ok }, 10*time.Second, 20*time.Millisecond)
	resp, err := c.Invoke(ctx, m.addr, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "Deleted"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool { _, ok := s.b.TopicConfig("Deleted"); return !ok }, 10*time.Second, 20*time.Millisecond,
		"the deletion reaches the slave")
	_, ok := s.b.TopicConfig("Copied")
	assert.True(t, ok, "the other topics stay")

	// A commit made to the slave is taken back by the master.
	m.stop()
	upd(s.addr, 1) // no-op
	s.b.MergeConsumerOffsets(map[string]map[int32]int64{"Copied@CG": {0: 7}})
	m.start()
	require.Eventually(t, func() bool { return m.b.OffsetTable()["Copied@CG"][0] == 7 }, 10*time.Second, 20*time.Millisecond)
}

func TestMasterSuggestsSlaveToLaggingConsumers(t *testing.T) {
	m := startNode(t, t.TempDir(), "127.0.0.1:0", func(_ *broker.Config, h *Config) { h.SlaveReadLagBytes = 4 << 10 })
	addr := freeAddr(t)
	s := startNode(t, t.TempDir(), addr, func(c *broker.Config, h *Config) {
		c.ID, c.Role, c.Advertise = 1, broker.RoleSlave, addr
		h.MasterAddr = m.addr
	})
	c := newClient(t)
	for i := 0; i < 100; i++ {
		require.Equal(t, remoting.Success, send(t, c, m.addr, "S", 0, fmt.Sprintf("%0500d", i)).Code)
	}
	waitCaughtUp(t, m, s)
	// The slave learns the topic's config with its next metadata copy.
	require.Eventually(t, func() bool {
		_, ok := s.b.TopicConfigs().TopicConfigTable["S"]
		return ok
	}, 10*time.Second, 20*time.Millisecond, "topic copied to the slave")
	pull := func(addr string, off int) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "CG", "topic": "S", "queueId": "0", "queueOffset": strconv.Itoa(off), "maxMsgNums": "4",
			"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, r.Code, r.Remark)
		return r.Ext("suggestWhichBrokerId")
	}
	tests := []struct {
		name string
		addr string
		off  int
		want string
	}{
		{"far behind: the slave", m.addr, 0, "1"},
		{"near the end: the master", m.addr, 96, "0"},
		{"the slave sends consumers back", s.addr, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, pull(tt.addr, tt.off))
		})
	}
}

// TestSlaveCopiesSubscriptionGroups: a subscription group created,
// changed or deleted on the master is so on the slave (RocketMQ's
// SlaveSynchronize.syncSubscriptionGroupConfig), so that a promoted slave
// keeps each group's retries and flags.
func TestSlaveCopiesSubscriptionGroups(t *testing.T) {
	m, s := masterSlave(t, broker.RoleAsyncMaster)
	c := newClient(t)
	require.Equal(t, remoting.Success, send(t, c, m.addr, "Groups", 0, "x").Code)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put := func(body string) {
		t.Helper()
		resp, err := c.Invoke(ctx, m.addr, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(body)))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	slaveGroup := func(name string) (map[string]any, bool) {
		resp, err := c.Invoke(ctx, s.addr, remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil))
		require.NoError(t, err)
		var doc struct {
			Table map[string]map[string]any `json:"subscriptionGroupTable"`
		}
		require.NoError(t, json.Unmarshal(resp.Body, &doc))
		g, ok := doc.Table[name]
		return g, ok
	}

	put(`{"groupName":"CopiedGroup","retryMaxTimes":3,"consumeBroadcastEnable":false}`)
	require.Eventually(t, func() bool {
		g, ok := slaveGroup("CopiedGroup")
		return ok && g["retryMaxTimes"] == float64(3) && g["consumeBroadcastEnable"] == false
	}, 10*time.Second, 20*time.Millisecond, "the group reaches the slave")

	put(`{"groupName":"CopiedGroup","retryMaxTimes":5,"consumeMessageOrderly":true}`)
	require.Eventually(t, func() bool {
		g, ok := slaveGroup("CopiedGroup")
		return ok && g["retryMaxTimes"] == float64(5) && g["consumeMessageOrderly"] == true
	}, 10*time.Second, 20*time.Millisecond, "the change reaches the slave")

	resp, err := c.Invoke(ctx, m.addr, remoting.NewRequest(remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "CopiedGroup"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool { _, ok := slaveGroup("CopiedGroup"); return !ok }, 10*time.Second, 20*time.Millisecond,
		"the deletion reaches the slave")
}
