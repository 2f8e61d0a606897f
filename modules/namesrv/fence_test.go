package namesrv

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// TestMasterVouchWithholdsMaster: while the vouch refuses a master, route
// and cluster answers leave out its id 0 and keep its slave (readable); a
// route whose every master is withheld is refused (SYSTEM_ERROR); the
// count grows; once the vouch accepts again, the master is answered.
func TestMasterVouchWithholdsMaster(t *testing.T) {
	s, addr := startServer(t)
	var deny atomic.Bool
	s.SetMasterVouch(func(name, a string) bool { return !(deny.Load() && name == "broker-a") })
	c := newClient(t)
	master := brokerA
	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	other := brokerA
	other.name, other.addr = "broker-b", "127.0.0.1:10931"
	other.topics = []*protocol.TopicConfig{topic("TopicA", 4, 6), topic("TopicB", 4, 6)}
	master.topics = []*protocol.TopicConfig{topic("TopicA", 4, 6), topic("TopicOnlyA", 4, 6)}
	slave.topics = master.topics
	for _, b := range []broker{master, slave, other} {
		require.Equal(t, remoting.Success, invoke(t, c, addr, b.registerJSON(t)).Code)
	}
	route := func() map[string]map[int64]string {
		resp := invoke(t, c, addr, routeReq("TopicA"))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		var rd protocol.TopicRouteData
		require.NoError(t, json.Unmarshal(resp.Body, &rd))
		out := map[string]map[int64]string{}
		for _, bd := range rd.BrokerDatas {
			out[bd.BrokerName] = bd.BrokerAddrs
		}
		return out
	}
	cluster := func() map[string]map[int64]string {
		resp := invoke(t, c, addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		var ci protocol.ClusterInfo
		require.NoError(t, json.Unmarshal(resp.Body, &ci))
		out := map[string]map[int64]string{}
		for name, bd := range ci.BrokerAddrTable {
			out[name] = bd.BrokerAddrs
		}
		return out
	}
	both := map[int64]string{0: master.addr, 1: slave.addr}
	assert.Equal(t, both, route()["broker-a"])
	assert.Zero(t, s.MastersWithheld())

	deny.Store(true)
	for _, got := range []map[string]map[int64]string{route(), cluster()} {
		assert.Equal(t, map[int64]string{1: slave.addr}, got["broker-a"], "the slave stays readable, no writable master")
		assert.Equal(t, map[int64]string{0: other.addr}, got["broker-b"], "another broker name is untouched")
	}
	assert.Equal(t, uint64(2), s.MastersWithheld())
	// A topic whose every master is withheld: an error, so that clients
	// keep their route or ask another name server.
	resp := invoke(t, c, addr, routeReq("TopicOnlyA"))
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "cannot vouch for the master of broker-a")
	assert.Equal(t, uint64(3), s.MastersWithheld())
	assert.Equal(t, map[int64]string{0: master.addr, 1: slave.addr}, s.Routes().ClusterInfo().BrokerAddrTable["broker-a"].BrokerAddrs,
		"the route table keeps the registration")

	deny.Store(false)
	assert.Equal(t, both, route()["broker-a"])
	assert.Equal(t, both, cluster()["broker-a"])
	assert.Equal(t, remoting.Success, invoke(t, c, addr, routeReq("TopicOnlyA")).Code)
	assert.Equal(t, uint64(3), s.MastersWithheld())
}
