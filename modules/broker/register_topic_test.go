package broker

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/plugins/filter/tag"
)

func startNamesrv(t *testing.T) (*namesrv.Server, string) {
	t.Helper()
	cfg := namesrv.NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	s, err := namesrv.New(cfg, transports(), nil)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s, s.Addrs()[0]
}

// javaNamesrv stands in for a Java 4.9 name server in front of ns: it
// does not know REGISTER_TOPIC_IN_NAMESRV and forwards everything else.
func javaNamesrv(t *testing.T, ns string) string {
	t.Helper()
	fwd := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { fwd.Close() })
	h := remoting.HandlerFunc(func(ctx context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.RegisterTopicInNamesrv {
			return remoting.NewResponse(req, remoting.RequestCodeNotSupported, " request type 217 not supported")
		}
		fc := remoting.NewRequest(req.Code, req.ExtFields, req.Body)
		resp, err := fwd.Invoke(ctx, ns, fc)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		out := remoting.NewResponse(req, resp.Code, resp.Remark)
		for k, v := range resp.ExtFields {
			out.SetExt(k, v)
		}
		out.Body = resp.Body
		return out
	})
	lns, err := transports().Listen(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	srv := remoting.NewServer(h, nil, remoting.ServerOptions{})
	for _, ln := range lns {
		srv.Serve(ln)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	return srv.Addrs()[0]
}

func startRegisteringBroker(t *testing.T, nss ...string) *harness {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	cfg.RegisterInterval = 60 * time.Second // the longest allowed: only what the test drives
	cfg.Namesrv = nss
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h
}

func (h *harness) createTopic(name string, queues int) {
	h.t.Helper()
	resp := h.invoke(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": name, "defaultTopic": protocol.AutoCreateTopic, "readQueueNums": itoa(queues), "writeQueueNums": itoa(queues),
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
	require.Equal(h.t, remoting.Success, resp.Code, resp.Remark)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func routed(t *testing.T, c *remoting.Client, ns, topic string, queues int32) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	require.NoError(t, err)
	if resp.Code != remoting.Success {
		return false
	}
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	return len(rd.QueueDatas) == 1 && rd.QueueDatas[0].WriteQueueNums == queues
}

// TestIncrementalTopicRegistration: a topic created or changed on a master
// reaches the name server as that one topic (REGISTER_TOPIC_IN_NAMESRV),
// not as a new whole-table registration; the name server takes the
// broker's new data version with it, so the next periodic registration is
// a QUERY_DATA_VERSION digest, not the table.
func TestIncrementalTopicRegistration(t *testing.T) {
	ns, nsAddr := startNamesrv(t)
	h := startRegisteringBroker(t, nsAddr)
	checkFor(t, 10*time.Second, func() bool { return h.b.treg.fulls.Load() == 1 }, "the first registration is whole")
	_, ok := ns.Routes().Broker("127.0.0.1:10911")
	require.True(t, ok)

	c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	for i, name := range []string{"Inc1", "Inc2", "Inc3"} {
		h.createTopic(name, 4+i)
		// As Java's broker: registered before the admin answer.
		assert.True(t, routed(t, c, nsAddr, name, int32(4+i)), "routed when the create is answered: %s", name)
	}
	h.createTopic("Inc1", 16) // an update
	assert.True(t, routed(t, c, nsAddr, "Inc1", 16), "the update routed when answered")
	assert.Equal(t, int64(1), h.b.treg.fulls.Load(), "no whole-table registration for topic changes")
	assert.GreaterOrEqual(t, h.b.treg.singles.Load(), int64(4))
	checkFor(t, 10*time.Second, func() bool {
		lb, _ := ns.Routes().Broker("127.0.0.1:10911")
		return lb.DataVersion == h.b.topics.dataVersion()
	}, "the name server holds the broker's current data version")

	before, _ := ns.Routes().Broker("127.0.0.1:10911")
	time.Sleep(5 * time.Millisecond) // the liveness stamp must be able to move
	h.b.registerAll(context.Background(), true)
	checkFor(t, 10*time.Second, func() bool { return h.b.treg.digests.Load() == 1 }, "a periodic registration is a digest")
	after, _ := ns.Routes().Broker("127.0.0.1:10911")
	assert.True(t, after.LastUpdate.After(before.LastUpdate), "the digest counts as the broker's heartbeat")
	assert.Equal(t, int64(1), h.b.treg.fulls.Load())
}

// TestTopicRegistrationJavaNamesrv: a name server without
// REGISTER_TOPIC_IN_NAMESRV (Java 4.9) gets the whole table instead, and
// the new topic is routed there all the same.
func TestTopicRegistrationJavaNamesrv(t *testing.T) {
	_, real := startNamesrv(t)
	java := javaNamesrv(t, real)
	h := startRegisteringBroker(t, java)
	checkFor(t, 10*time.Second, func() bool { return h.b.treg.fulls.Load() == 1 }, "first registration")
	h.createTopic("ViaJava", 8)
	c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	checkFor(t, 10*time.Second, func() bool { return routed(t, c, java, "ViaJava", 8) }, "routed through a whole-table registration")
	assert.GreaterOrEqual(t, h.b.treg.fulls.Load(), int64(2))
	h.createTopic("ViaJava2", 8)
	checkFor(t, 10*time.Second, func() bool { return routed(t, c, java, "ViaJava2", 8) }, "again")
}

// checkFor polls cond until it holds or d passes.
func checkFor(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
