package namesrv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// routePerms returns broker name → perm of topic's route.
func routePerms(t *testing.T, addr, topic string) map[string]int32 {
	t.Helper()
	resp := javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	out := map[string]int32{}
	for _, qd := range rd.QueueDatas {
		out[qd.BrokerName] = qd.Perm
	}
	return out
}

func mustRegister(t *testing.T, addr string, b broker) *remoting.Command {
	t.Helper()
	c := newClient(t)
	resp := invoke(t, c, addr, b.registerJSON(t))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	return resp
}

// TestWipeAndAddWritePerm drives WIPE_WRITE_PERM_OF_BROKER and
// ADD_WRITE_PERM_OF_BROKER as mqadmin wipeWritePerm/addWritePerm send
// them, and checks which registrations keep a wipe (Java's semantics).
func TestWipeAndAddWritePerm(t *testing.T) {
	_, addr := startServer(t)
	a := broker{name: "broker-a", addr: "127.0.0.1:10911", dv: protocol.DataVersion{Timestamp: 1, Counter: 1},
		topics: []*protocol.TopicConfig{topic("TopicA", 4, 6), topic("TopicB", 2, 7)}}
	b := broker{name: "broker-b", addr: "127.0.0.1:10931", dv: protocol.DataVersion{Timestamp: 1, Counter: 1},
		topics: []*protocol.TopicConfig{topic("TopicA", 4, 6)}}
	mustRegister(t, addr, a)
	mustRegister(t, addr, b)

	resp := javaInvoke(t, addr, remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "2", resp.Ext("wipeTopicCount"))
	assert.Equal(t, map[string]int32{"broker-a": 4, "broker-b": 6}, routePerms(t, addr, "TopicA"))
	assert.Equal(t, map[string]int32{"broker-a": 5}, routePerms(t, addr, "TopicB"), "inherit bit kept")

	// The broker's periodic registration (same data version) keeps the
	// wipe, as in Java.
	mustRegister(t, addr, a)
	assert.Equal(t, map[string]int32{"broker-a": 4, "broker-b": 6}, routePerms(t, addr, "TopicA"), "periodic registration keeps the wipe")

	resp = javaInvoke(t, addr, remoting.AddWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "2", resp.Ext("addTopicCount"))
	assert.Equal(t, map[string]int32{"broker-a": 6, "broker-b": 6}, routePerms(t, addr, "TopicA"))
	assert.Equal(t, map[string]int32{"broker-a": 6}, routePerms(t, addr, "TopicB"), "Java sets exactly read|write")

	// Wiped again, then the broker's topics change (new data version): its
	// own topic config rewrites the queue data, as in Java.
	require.Equal(t, "2", javaInvoke(t, addr, remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil).Ext("wipeTopicCount"))
	a.dv.Counter++
	mustRegister(t, addr, a)
	assert.Equal(t, map[string]int32{"broker-a": 6, "broker-b": 6}, routePerms(t, addr, "TopicA"))
	assert.Equal(t, map[string]int32{"broker-a": 7}, routePerms(t, addr, "TopicB"))

	// Unknown broker: nothing touched; missing header: a clear error.
	resp = javaInvoke(t, addr, remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "nobody"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "0", resp.Ext("wipeTopicCount"))
	resp = javaInvoke(t, addr, remoting.AddWritePermOfBroker, nil, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <brokerName> is null", resp.Remark)
}

func TestRouteTableWritePermSurvivesQueryDataVersion(t *testing.T) {
	rt := NewRouteTable(nil)
	rt.RegisterBroker(brokerA.registration())
	require.Equal(t, 1, rt.WipeWritePerm("broker-a"))
	changed, _ := rt.QueryDataVersion(brokerA.addr, brokerA.dv)
	require.False(t, changed)
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	assert.Equal(t, int32(protocol.PermRead), rd.QueueDatas[0].Perm)
}

// TestRegisterCarriesOrderTopicConfig: every REGISTER_BROKER answer
// carries the ORDER_TOPIC_CONFIG table once the namespace exists, masters
// and slaves alike (Java's registerBrokerWithFilterServer).
func TestRegisterCarriesOrderTopicConfig(t *testing.T) {
	_, addr := startServer(t)
	resp := mustRegister(t, addr, brokerA)
	assert.Empty(t, resp.Body, "no namespace yet: no body, as Java")

	require.Equal(t, remoting.Success, javaInvoke(t, addr, remoting.PutKVConfig, kvPut(OrderTopicConfigNamespace, "TopicA", "broker-a:4"), nil).Code)
	require.Equal(t, remoting.Success, javaInvoke(t, addr, remoting.PutKVConfig, kvPut("other", "x", "y"), nil).Code)
	resp = mustRegister(t, addr, brokerA)
	assert.Equal(t, `{"table":{"TopicA":"broker-a:4"}}`, string(resp.Body))

	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	resp = mustRegister(t, addr, slave)
	assert.Equal(t, `{"table":{"TopicA":"broker-a:4"}}`, string(resp.Body))
	assert.Equal(t, brokerA.addr, resp.Ext("masterAddr"))
}

// TestRouteOrderTopicConf: with orderMessageEnable (off by default, as in
// Java) a route carries its topic's ORDER_TOPIC_CONFIG entry.
func TestRouteOrderTopicConf(t *testing.T) {
	_, addr := startServer(t)
	mustRegister(t, addr, brokerA)
	require.Equal(t, remoting.Success, javaInvoke(t, addr, remoting.PutKVConfig, kvPut(OrderTopicConfigNamespace, "TopicA", "broker-a:4"), nil).Code)

	resp := javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	assert.NotContains(t, string(resp.Body), "orderTopicConf")

	resp = javaInvoke(t, addr, remoting.UpdateNamesrvConfig, nil, []byte("orderMessageEnable=true\n"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	assert.Equal(t, "broker-a:4", rd.OrderTopicConf)

	// A topic without an entry has none.
	b := brokerA
	b.topics = append(b.topics, topic("TopicC", 2, 6))
	b.dv.Counter++
	mustRegister(t, addr, b)
	resp = javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicC"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	assert.NotContains(t, string(resp.Body), "orderTopicConf")
}

func TestOrderMessageEnableFromConfig(t *testing.T) {
	cfg := NewConfig()
	cfg.KVConfigPath, cfg.OrderMessageEnable = "", true
	s, addr := startServerCfg(t, cfg)
	mustRegister(t, addr, brokerA)
	require.NoError(t, s.KV().Put(OrderTopicConfigNamespace, "TopicA", "broker-a:2"))
	resp := javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	assert.Contains(t, string(resp.Body), `"orderTopicConf":"broker-a:2"`)
	resp = javaInvoke(t, addr, remoting.GetNamesrvConfig, nil, nil)
	assert.Contains(t, string(resp.Body), "orderMessageEnable=true\n")
}

func TestNamesrvConfig(t *testing.T) {
	s, addr := startServer(t)
	get := func() string {
		resp := javaInvoke(t, addr, remoting.GetNamesrvConfig, nil, nil)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		return string(resp.Body)
	}
	assert.Equal(t, "brokerTimeoutMillis=120000\norderMessageEnable=false\n", get())

	resp := javaInvoke(t, addr, remoting.UpdateNamesrvConfig, nil,
		[]byte("# set by mqadmin\r\norderMessageEnable = TRUE\r\n  brokerTimeoutMillis:60000\r\n"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "brokerTimeoutMillis=60000\norderMessageEnable=true\n", get())
	assert.Equal(t, time.Minute, s.brokerTimeout())

	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "fixed key", give: "listenPort=9877\norderMessageEnable=false\n", want: []string{"listenPort: cannot change at run time: set namesrv.listen and restart"}},
		{name: "kv path", give: "kvConfigPath=/tmp/x\n", want: []string{"kvConfigPath: cannot change at run time"}},
		{name: "java only", give: "rocketmqHome=/opt/rmq\n", want: []string{"rocketmqHome: is a Java name server setting Quiver does not have"}},
		{name: "unknown key", give: "bogus=1\n", want: []string{"bogus: unknown setting (changeable at run time: brokerTimeoutMillis, orderMessageEnable)"}},
		{name: "bad bool", give: "orderMessageEnable=yes\n", want: []string{`orderMessageEnable: "yes" is not true or false`}},
		{name: "bad timeout", give: "brokerTimeoutMillis=5\n", want: []string{`brokerTimeoutMillis: "5" is not a number of milliseconds`}},
		{name: "every reason", give: "bogus=1\nlisten=x\norderMessageEnable=false\n", want: []string{"bogus: unknown", "listen: cannot change"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := javaInvoke(t, addr, remoting.UpdateNamesrvConfig, nil, []byte(tt.give))
			assert.Equal(t, remoting.SystemError, resp.Code)
			for _, w := range tt.want {
				assert.Contains(t, resp.Remark, w)
			}
			// All or nothing: the good keys of a refused update are not
			// applied either.
			assert.Equal(t, "brokerTimeoutMillis=60000\norderMessageEnable=true\n", get())
		})
	}

	resp = javaInvoke(t, addr, remoting.UpdateNamesrvConfig, nil, nil)
	assert.Equal(t, remoting.Success, resp.Code, "no body changes nothing, as Java")
}

func TestSystemTopicList(t *testing.T) {
	_, addr := startServer(t)
	resp := javaInvoke(t, addr, remoting.GetSystemTopicListFromNS, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"topicList":[]}`, string(resp.Body))

	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	mustRegister(t, addr, slave)
	mustRegister(t, addr, brokerA)
	mustRegister(t, addr, broker{cluster: "C2", name: "broker-b", addr: "127.0.0.1:10931", dv: brokerA.dv})
	resp = javaInvoke(t, addr, remoting.GetSystemTopicListFromNS, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"brokerAddr":"127.0.0.1:10911","topicList":["C2","DefaultCluster","broker-a","broker-b"]}`, string(resp.Body))
}

func TestUnitTopicLists(t *testing.T) {
	_, addr := startServer(t)
	codes := []int32{remoting.GetUnitTopicList, remoting.GetHasUnitSubTopicList, remoting.GetHasUnitSubUnunitTopicList}
	lists := func() []string {
		var out []string
		for _, code := range codes {
			resp := javaInvoke(t, addr, code, nil, nil)
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			out = append(out, string(resp.Body))
		}
		return out
	}
	empty := `{"topicList":[]}`
	assert.Equal(t, []string{empty, empty, empty}, lists(), "no unit topics: empty lists, as Java")

	mustRegister(t, addr, brokerA) // TopicA has sysflag 0
	assert.Equal(t, []string{empty, empty, empty}, lists())

	flagged := func(name string, flag int32) *protocol.TopicConfig {
		tc := topic(name, 1, 6)
		tc.TopicSysFlag = flag
		return tc
	}
	b := broker{name: "broker-u", addr: "127.0.0.1:10941", dv: brokerA.dv, topics: []*protocol.TopicConfig{
		flagged("Unit", 1), flagged("UnitSub", 2), flagged("Both", 3)}}
	mustRegister(t, addr, b)
	assert.Equal(t, []string{
		`{"topicList":["Both","Unit"]}`,
		`{"topicList":["Both","UnitSub"]}`,
		`{"topicList":["UnitSub"]}`,
	}, lists())
}

func TestTopicsByClusterJavaFrames(t *testing.T) {
	_, addr := startServer(t)
	mustRegister(t, addr, brokerA)
	mustRegister(t, addr, broker{cluster: "C2", name: "broker-b", addr: "127.0.0.1:10931", dv: brokerA.dv,
		topics: []*protocol.TopicConfig{topic("TopicA", 2, 6), topic("TopicB", 2, 6)}})

	resp := javaInvoke(t, addr, remoting.GetTopicsByCluster, map[string]string{"cluster": "C2"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"topicList":["TopicA","TopicB"]}`, string(resp.Body))
	resp = javaInvoke(t, addr, remoting.GetTopicsByCluster, map[string]string{"cluster": "nope"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"topicList":[]}`, string(resp.Body), "Java answers an empty list for an unknown cluster")
	resp = javaInvoke(t, addr, remoting.GetTopicsByCluster, nil, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the custom field <cluster> is null", resp.Remark)
}

// TestBrokerTimeoutAtRunTime: brokerTimeoutMillis set through
// UPDATE_NAMESRV_CONFIG is the expiry the next scan uses.
func TestBrokerTimeoutAtRunTime(t *testing.T) {
	s, addr := startServer(t)
	clk := newFakeClock()
	s.Routes().SetClock(clk.Now)
	mustRegister(t, addr, brokerA)

	clk.Advance(30*time.Second + time.Millisecond)
	s.scan()
	_, ok := s.Routes().Broker(brokerA.addr)
	require.True(t, ok, "within the configured 2m")

	resp := javaInvoke(t, addr, remoting.UpdateNamesrvConfig, nil, []byte("brokerTimeoutMillis=30000"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	s.scan()
	_, ok = s.Routes().Broker(brokerA.addr)
	assert.False(t, ok, "expired under the new 30s")
}

func TestCheckOrderTopicConf(t *testing.T) {
	for _, give := range []string{"broker-a:4", "broker-a:4;broker-b:8", "b:1024"} {
		assert.NoError(t, checkOrderTopicConf(give), give)
	}
	for _, give := range []string{"", "broker-a", "broker-a:4;", ";broker-a:4", ":4", "broker-a:0", "broker-a:1025",
		"broker-a:x", "broker-a:4:5", "broker-a:-1", "broker-a: 4"} {
		assert.Error(t, checkOrderTopicConf(give), give)
	}
}

// TestOrderTopicConfRefusedWhenMalformed: a value clients would choke on
// (the official Go client panics on a part without ':') is refused at PUT,
// and one already in the file stays out of routes.
func TestOrderTopicConfRefusedWhenMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvConfig.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;"}}}`), 0o600))
	cfg := NewConfig()
	cfg.KVConfigPath, cfg.OrderMessageEnable = path, true
	_, addr := startServerCfg(t, cfg)
	mustRegister(t, addr, brokerA)

	resp := javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	assert.NotContains(t, string(resp.Body), "orderTopicConf")

	resp = javaInvoke(t, addr, remoting.PutKVConfig, kvPut(OrderTopicConfigNamespace, "TopicA", "broker-a"), nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, `part "broker-a" is not brokerName:queues`)
	resp = javaInvoke(t, addr, remoting.PutKVConfig, kvPut("other", "TopicA", "broker-a"), nil)
	assert.Equal(t, remoting.Success, resp.Code, "other namespaces take any value, as Java")

	resp = javaInvoke(t, addr, remoting.PutKVConfig, kvPut(OrderTopicConfigNamespace, "TopicA", "broker-a:2"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = javaInvoke(t, addr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	assert.Contains(t, string(resp.Body), `"orderTopicConf":"broker-a:2"`)
}
