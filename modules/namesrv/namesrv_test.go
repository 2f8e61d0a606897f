package namesrv

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

var brokerA = broker{name: "broker-a", addr: "127.0.0.1:10911", ha: "127.0.0.1:10912",
	dv: protocol.DataVersion{Timestamp: 1700000000000, Counter: 1}, topics: []*protocol.TopicConfig{topic("TopicA", 4, 6)}}

func routeReq(topic string) *remoting.Command {
	return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
}

func TestRegisterRouteUnregister(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)

	resp := invoke(t, c, addr, brokerA.registerJSON(t))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Empty(t, resp.Ext("masterAddr"), "a master gets no masterAddr")

	resp = invoke(t, c, addr, routeReq("TopicA"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	want := `{"queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}],` +
		`"filterServerTable":{}}`
	assert.Equal(t, want, string(resp.Body))

	resp = invoke(t, c, addr, remoting.NewRequest(remoting.UnregisterBroker, map[string]string{
		"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster", "brokerId": "0"}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	resp = invoke(t, c, addr, routeReq("TopicA"))
	assert.Equal(t, remoting.TopicNotExist, resp.Code)
	assert.Empty(t, resp.Body)
}

func TestRouteUnknownTopic(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	resp := invoke(t, c, addr, routeReq("NoSuchTopic"))
	assert.Equal(t, remoting.TopicNotExist, resp.Code)
	assert.Equal(t, "No topic route info in name server for the topic: NoSuchTopic", resp.Remark)
	assert.Empty(t, resp.Body)
	assert.True(t, resp.IsResponse())
}

func TestRouteParsesLikeGoClient(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	brokerB := broker{name: "broker-b", addr: "127.0.0.1:10931", dv: brokerA.dv, topics: []*protocol.TopicConfig{topic("TopicA", 2, 6)}}
	for _, b := range []broker{brokerA, slave, brokerB} {
		resp := invoke(t, c, addr, b.registerJSON(t))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	resp := invoke(t, c, addr, routeReq("TopicA"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.NotContains(t, string(resp.Body), " ", "the Go client breaks on whitespace")

	// The Go client takes the raw text of each brokerAddrs (gjson); a
	// json.RawMessage keeps it byte for byte.
	var raw struct {
		BrokerDatas []struct {
			BrokerName  string          `json:"brokerName"`
			BrokerAddrs json.RawMessage `json:"brokerAddrs"`
		} `json:"brokerDatas"`
		QueueDatas []protocol.QueueData `json:"queueDatas"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &raw))
	require.Len(t, raw.BrokerDatas, 2)
	assert.Equal(t, "broker-a", raw.BrokerDatas[0].BrokerName)
	assert.Equal(t, map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}, goClientBrokerAddrs(t, string(raw.BrokerDatas[0].BrokerAddrs)))
	assert.Equal(t, map[int64]string{0: "127.0.0.1:10931"}, goClientBrokerAddrs(t, string(raw.BrokerDatas[1].BrokerAddrs)))
	require.Len(t, raw.QueueDatas, 2, "only masters contribute queue data")
	assert.Equal(t, "broker-a", raw.QueueDatas[0].BrokerName)
	assert.Equal(t, int32(2), raw.QueueDatas[1].WriteQueueNums)
}

func TestAutoCreateTopicRoute(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	b := brokerA
	b.topics = []*protocol.TopicConfig{topic(protocol.AutoCreateTopic, 8, protocol.PermRead|protocol.PermWrite|protocol.PermInherit)}
	require.Equal(t, remoting.Success, invoke(t, c, addr, b.registerJSON(t)).Code)

	resp := invoke(t, c, addr, routeReq(protocol.AutoCreateTopic))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	require.Len(t, rd.QueueDatas, 1)
	assert.Equal(t, protocol.QueueData{BrokerName: "broker-a", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7}, rd.QueueDatas[0])
	require.Len(t, rd.BrokerDatas, 1)
	assert.Equal(t, "127.0.0.1:10911", rd.BrokerDatas[0].BrokerAddrs[0])
}

func TestSlaveRegistration(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	slave := broker{name: "broker-a", addr: "127.0.0.1:10921", ha: "127.0.0.1:10922", id: 1, dv: brokerA.dv, topics: brokerA.topics}

	// Before the master registers, a slave learns nothing.
	resp := invoke(t, c, addr, slave.registerJSON(t))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Empty(t, resp.Ext("masterAddr"))
	assert.Equal(t, remoting.TopicNotExist, invoke(t, c, addr, routeReq("TopicA")).Code, "slaves add no queue data")

	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	resp = invoke(t, c, addr, slave.registerJSON(t))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "127.0.0.1:10911", resp.Ext("masterAddr"))
	assert.Equal(t, "127.0.0.1:10912", resp.Ext("haServerAddr"))
}

func TestCompressedRegister(t *testing.T) {
	tests := []struct {
		name       string
		jsonTopics bool
	}{
		{name: "java topic encoding", jsonTopics: false},
		{name: "json topic chunks", jsonTopics: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr := startServer(t)
			c := newClient(t)
			b := brokerA
			b.topics = []*protocol.TopicConfig{topic("TopicA", 4, 6), topic("TopicB", 2, 4)}
			body := javaCompressed(t, b.wrapper(), []string{}, tt.jsonTopics)
			h := b.header()
			h["compressed"] = "true"
			h["bodyCrc32"] = strconv.FormatInt(int64(int32(crc32.ChecksumIEEE(body))), 10)
			resp := invoke(t, c, addr, remoting.NewRequest(remoting.RegisterBroker, h, body))
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)

			assert.Equal(t, []string{"TopicA", "TopicB"}, s.Routes().Topics())
			rd, ok := s.Routes().TopicRoute("TopicB")
			require.True(t, ok)
			assert.Equal(t, []protocol.QueueData{{BrokerName: "broker-a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 4}}, rd.QueueDatas)
			lb, ok := s.Routes().Broker(b.addr)
			require.True(t, ok)
			assert.Equal(t, b.dv, lb.DataVersion)
		})
	}
}

func TestRegisterCRC(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	req := brokerA.registerJSON(t)
	sum := crc32.ChecksumIEEE(req.Body)
	tests := []struct {
		name     string
		give     string
		wantCode int32
	}{
		{name: "mismatch", give: strconv.FormatUint(uint64(sum^1), 10), wantCode: remoting.SystemError},
		{name: "unsigned", give: strconv.FormatUint(uint64(sum), 10), wantCode: remoting.Success},
		{name: "java signed int", give: strconv.FormatInt(int64(int32(sum)), 10), wantCode: remoting.Success},
		{name: "zero skips the check", give: "0", wantCode: remoting.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := brokerA.registerJSON(t)
			r.ExtFields["bodyCrc32"] = tt.give
			resp := invoke(t, c, addr, r)
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			if tt.wantCode == remoting.SystemError {
				assert.Equal(t, "crc32 not match", resp.Remark)
			}
		})
	}
}

func TestGarbageRequests(t *testing.T) {
	s, addr := startServer(t)
	c := newClient(t)
	badHeader := brokerA.header()
	delete(badHeader, "brokerAddr")
	badID := brokerA.header()
	badID["brokerId"] = "zero"
	compressed := brokerA.header()
	compressed["compressed"] = "true"
	tests := []struct {
		name     string
		give     *remoting.Command
		wantCode int32
	}{
		{name: "unparseable body", give: remoting.NewRequest(remoting.RegisterBroker, brokerA.header(), []byte("{not json")), wantCode: remoting.SystemError},
		{name: "compressed flag on a plain body", give: remoting.NewRequest(remoting.RegisterBroker, compressed, []byte(`{"x":1}`)), wantCode: remoting.SystemError},
		{name: "truncated zlib", give: remoting.NewRequest(remoting.RegisterBroker, compressed, javaCompressed(t, brokerA.wrapper(), nil, false)[:10]), wantCode: remoting.SystemError},
		{name: "missing header field", give: remoting.NewRequest(remoting.RegisterBroker, badHeader, nil), wantCode: remoting.SystemError},
		{name: "non-numeric broker id", give: remoting.NewRequest(remoting.RegisterBroker, badID, nil), wantCode: remoting.SystemError},
		{name: "route without topic", give: remoting.NewRequest(remoting.GetRouteInfoByTopic, nil, nil), wantCode: remoting.SystemError},
		{name: "bad data version body", give: remoting.NewRequest(remoting.QueryDataVersion, map[string]string{"brokerAddr": "x"}, []byte("[")), wantCode: remoting.SystemError},
		{name: "unknown code", give: remoting.NewRequest(9999, nil, nil), wantCode: remoting.RequestCodeNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, c, addr, tt.give)
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			assert.NotEmpty(t, resp.Remark)
		})
	}
	assert.Empty(t, s.Routes().Topics(), "nothing bad was registered")

	// The same connection still serves.
	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	assert.Equal(t, remoting.Success, invoke(t, c, addr, routeReq("TopicA")).Code)
}

func TestDropOnDisconnect(t *testing.T) {
	s, addr := startServer(t)
	brokerConn := newClient(t)
	c := newClient(t)
	require.Equal(t, remoting.Success, invoke(t, brokerConn, addr, brokerA.registerJSON(t)).Code)
	require.Equal(t, remoting.Success, invoke(t, c, addr, routeReq("TopicA")).Code)

	brokerConn.CloseAddr(addr)
	require.Eventually(t, func() bool {
		_, ok := s.Routes().Broker(brokerA.addr)
		return !ok
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, remoting.TopicNotExist, invoke(t, c, addr, routeReq("TopicA")).Code)
	assert.Empty(t, s.Routes().ClusterInfo().BrokerAddrTable)

	// A client connection closing removes nothing.
	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	other := newClient(t)
	invoke(t, other, addr, routeReq("TopicA"))
	other.CloseAddr(addr)
	// Wait until the server saw the close: its peer count drops to one.
	require.Eventually(t, func() bool { return len(s.srv.Peers()) == 1 }, 5*time.Second, 5*time.Millisecond)
	_, ok := s.Routes().Broker(brokerA.addr)
	assert.True(t, ok)
}

func TestServerExpiry(t *testing.T) {
	s, addr := startServer(t)
	clk := newFakeClock()
	s.Routes().SetClock(clk.Now)
	brokerConn := newClient(t)
	require.Equal(t, remoting.Success, invoke(t, brokerConn, addr, brokerA.registerJSON(t)).Code)

	clk.Advance(s.cfg.BrokerTimeout)
	s.scan()
	_, ok := s.Routes().Broker(brokerA.addr)
	require.True(t, ok, "exactly broker_timeout is not yet expired")

	clk.Advance(time.Millisecond)
	s.scan()
	_, ok = s.Routes().Broker(brokerA.addr)
	assert.False(t, ok)
	_, ok = s.Routes().TopicRoute("TopicA")
	assert.False(t, ok)
	// The expired broker's connection is closed.
	require.Eventually(t, func() bool { return len(s.srv.Peers()) == 0 }, 5*time.Second, 5*time.Millisecond)
}

func TestDeleteTopic(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	other := broker{cluster: "OtherCluster", name: "broker-x", addr: "127.0.0.1:20911", dv: brokerA.dv,
		topics: []*protocol.TopicConfig{topic("TopicA", 4, 6)}}
	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	require.Equal(t, remoting.Success, invoke(t, c, addr, other.registerJSON(t)).Code)

	del := func(ext map[string]string) {
		t.Helper()
		resp := invoke(t, c, addr, remoting.NewRequest(remoting.DeleteTopicInNamesrv, ext, nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	del(map[string]string{"topic": "TopicA", "clusterName": "OtherCluster"})
	resp := invoke(t, c, addr, routeReq("TopicA"))
	require.Equal(t, remoting.Success, resp.Code)
	var rd protocol.TopicRouteData
	require.NoError(t, json.Unmarshal(resp.Body, &rd))
	require.Len(t, rd.QueueDatas, 1)
	assert.Equal(t, "broker-a", rd.QueueDatas[0].BrokerName)

	del(map[string]string{"topic": "TopicA"})
	assert.Equal(t, remoting.TopicNotExist, invoke(t, c, addr, routeReq("TopicA")).Code)
}

func TestClusterInfo(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	for _, b := range []broker{brokerA, slave} {
		require.Equal(t, remoting.Success, invoke(t, c, addr, b.registerJSON(t)).Code)
	}
	resp := invoke(t, c, addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	want := `{"brokerAddrTable":{"broker-a":{"cluster":"DefaultCluster","brokerName":"broker-a",` +
		`"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}`
	assert.Equal(t, want, string(resp.Body))
}

func TestTopicList(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	list := func() string {
		resp := invoke(t, c, addr, remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		return string(resp.Body)
	}
	assert.Equal(t, `{"topicList":[]}`, list())
	b := brokerA
	b.topics = []*protocol.TopicConfig{topic("TopicB", 4, 6), topic("TopicA", 4, 6), topic(protocol.AutoCreateTopic, 8, 7)}
	require.Equal(t, remoting.Success, invoke(t, c, addr, b.registerJSON(t)).Code)
	assert.Equal(t, `{"topicList":["TBW102","TopicA","TopicB"]}`, list())

	resp := invoke(t, c, addr, remoting.NewRequest(getTopicsByCluster, map[string]string{"cluster": "DefaultCluster"}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"topicList":["TBW102","TopicA","TopicB"]}`, string(resp.Body))
}

func TestQueryDataVersion(t *testing.T) {
	_, addr := startServer(t)
	c := newClient(t)
	query := func(dv protocol.DataVersion) *remoting.Command {
		t.Helper()
		body, err := json.Marshal(dv)
		require.NoError(t, err)
		h := brokerA.header()
		resp := invoke(t, c, addr, remoting.NewRequest(remoting.QueryDataVersion, map[string]string{
			"brokerName": h["brokerName"], "brokerAddr": h["brokerAddr"], "clusterName": h["clusterName"], "brokerId": "0"}, body))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		return resp
	}
	resp := query(brokerA.dv)
	assert.Equal(t, "true", resp.Ext("changed"), "unknown broker")
	assert.Empty(t, resp.Body)

	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	resp = query(brokerA.dv)
	assert.Equal(t, "false", resp.Ext("changed"))
	var stored protocol.DataVersion
	require.NoError(t, json.Unmarshal(resp.Body, &stored))
	assert.Equal(t, brokerA.dv, stored)

	resp = query(protocol.DataVersion{Timestamp: brokerA.dv.Timestamp, Counter: 2})
	assert.Equal(t, "true", resp.Ext("changed"))
}

func TestStartErrors(t *testing.T) {
	_, addr := startServer(t)
	cfg := NewConfig()
	cfg.Listen = addr
	s, err := New(cfg, tcpSet(), testLogger(t))
	require.NoError(t, err)
	assert.Error(t, s.Start(context.Background()), "the address is taken")
	assert.NoError(t, s.Stop(context.Background()))

	cfg.Listen = "127.0.0.1:0"
	s, err = New(cfg, tcpSet(), testLogger(t))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	assert.ErrorIs(t, s.Start(context.Background()), ErrStarted)
	assert.NoError(t, s.Stop(context.Background()))
	assert.NoError(t, s.Stop(context.Background()), "Stop is idempotent")
	assert.ErrorIs(t, s.Start(context.Background()), ErrStarted, "a stopped server does not restart")
}

func TestUndecodableFrame(t *testing.T) {
	s, addr := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	require.NoError(t, err)
	defer conn.Close()
	// A header length beyond the frame: the server drops the connection.
	require.NoError(t, conn.WriteFrame(ctx, []byte{0, 0, 0x10, 0, '{'}))
	_, err = conn.ReadFrame(ctx)
	require.Error(t, err)

	c := newClient(t)
	require.Equal(t, remoting.Success, invoke(t, c, addr, brokerA.registerJSON(t)).Code)
	_, ok := s.Routes().TopicRoute("TopicA")
	assert.True(t, ok)
}
