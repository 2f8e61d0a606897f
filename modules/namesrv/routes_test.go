package namesrv

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
)

func TestRouteTableExpiry(t *testing.T) {
	clk := newFakeClock()
	rt := NewRouteTable(clk.Now)
	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	brokerB := broker{name: "broker-b", addr: "127.0.0.1:10931", dv: brokerA.dv, topics: []*protocol.TopicConfig{topic("TopicA", 4, 6), topic("TopicB", 4, 6)}}
	rt.RegisterBroker(brokerA.registration())
	rt.RegisterBroker(brokerB.registration())
	clk.Advance(60 * time.Second)
	rt.RegisterBroker(slave.registration())

	// The masters expire; broker-a keeps its slave, and with it its queue
	// data (readable from the slave); broker-b disappears entirely.
	clk.Advance(61 * time.Second)
	gone := rt.Expire(120 * time.Second)
	assert.ElementsMatch(t, []string{brokerA.addr, brokerB.addr}, keys(gone))

	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	assert.Equal(t, []protocol.QueueData{{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}, rd.QueueDatas)
	assert.Equal(t, []protocol.BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{1: slave.addr}}}, rd.BrokerDatas)
	_, ok = rt.TopicRoute("TopicB")
	assert.False(t, ok)
	ci := rt.ClusterInfo()
	assert.Equal(t, map[string][]string{"DefaultCluster": {"broker-a"}}, ci.ClusterAddrTable)

	// Nothing else is due; then the slave goes too and the cluster empties.
	assert.Empty(t, rt.Expire(120*time.Second))
	clk.Advance(120*time.Second + time.Nanosecond)
	assert.Equal(t, []string{slave.addr}, keys(rt.Expire(120*time.Second)))
	ci = rt.ClusterInfo()
	assert.Empty(t, ci.BrokerAddrTable)
	assert.Empty(t, ci.ClusterAddrTable)
	assert.Empty(t, rt.Topics())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRouteTableRegisterRefreshesLiveness(t *testing.T) {
	clk := newFakeClock()
	rt := NewRouteTable(clk.Now)
	for range 5 {
		rt.RegisterBroker(brokerA.registration())
		clk.Advance(30 * time.Second)
		require.Empty(t, rt.Expire(120*time.Second))
	}
	lb, ok := rt.Broker(brokerA.addr)
	require.True(t, ok)
	assert.Equal(t, clk.Now().Add(-30*time.Second), lb.LastUpdate)

	// An unchanged QUERY_DATA_VERSION also counts as heard from.
	clk.Advance(100 * time.Second)
	changed, _ := rt.QueryDataVersion(brokerA.addr, brokerA.dv)
	require.False(t, changed)
	clk.Advance(100 * time.Second)
	assert.Empty(t, rt.Expire(120*time.Second))
}

func TestRouteTableDataVersion(t *testing.T) {
	tests := []struct {
		name     string
		secondDV protocol.DataVersion
		wantPerm int32
	}{
		{name: "same version keeps queue data", secondDV: brokerA.dv, wantPerm: 6},
		{name: "new version upserts", secondDV: protocol.DataVersion{Timestamp: brokerA.dv.Timestamp, Counter: 2}, wantPerm: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRouteTable(nil)
			rt.RegisterBroker(brokerA.registration())
			b := brokerA
			b.dv = tt.secondDV
			b.topics = []*protocol.TopicConfig{topic("TopicA", 4, 4)}
			rt.RegisterBroker(b.registration())
			rd, ok := rt.TopicRoute("TopicA")
			require.True(t, ok)
			assert.Equal(t, tt.wantPerm, rd.QueueDatas[0].Perm)
		})
	}
}

func TestRouteTableSlaveMasterSwitch(t *testing.T) {
	rt := NewRouteTable(nil)
	slave := brokerA
	slave.id = 1
	rt.RegisterBroker(slave.registration())
	_, ok := rt.TopicRoute("TopicA")
	require.False(t, ok, "a slave adds no queue data")

	// The same address comes back as master: id 1 is replaced by id 0 and,
	// being a first master registration, its topics are added even though
	// the data version did not change.
	rt.RegisterBroker(brokerA.registration())
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	assert.Equal(t, map[int64]string{0: brokerA.addr}, rd.BrokerDatas[0].BrokerAddrs)
}

func TestRouteTableUnregister(t *testing.T) {
	rt := NewRouteTable(nil)
	slave := brokerA
	slave.id, slave.addr = 1, "127.0.0.1:10921"
	rt.RegisterBroker(brokerA.registration())
	rt.RegisterBroker(slave.registration())

	rt.UnregisterBroker("DefaultCluster", brokerA.addr, "broker-a", 0)
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok, "the slave keeps the route")
	assert.Equal(t, map[int64]string{1: slave.addr}, rd.BrokerDatas[0].BrokerAddrs)

	rt.UnregisterBroker("DefaultCluster", slave.addr, "broker-a", 1)
	_, ok = rt.TopicRoute("TopicA")
	assert.False(t, ok)
	assert.Empty(t, rt.ClusterInfo().ClusterAddrTable)

	// Unknown brokers are ignored.
	rt.UnregisterBroker("NoCluster", "1.2.3.4:5", "nobody", 0)
}

func TestRouteTableRouteIsACopy(t *testing.T) {
	rt := NewRouteTable(nil)
	rt.RegisterBroker(brokerA.registration())
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	rd.BrokerDatas[0].BrokerAddrs[7] = "mutated"
	rd.QueueDatas[0].Perm = 0
	rd2, _ := rt.TopicRoute("TopicA")
	assert.NotContains(t, rd2.BrokerDatas[0].BrokerAddrs, int64(7))
	assert.Equal(t, int32(6), rd2.QueueDatas[0].Perm)
}

func TestRouteTableFilterServers(t *testing.T) {
	rt := NewRouteTable(nil)
	r := brokerA.registration()
	r.FilterServers = []string{"127.0.0.1:30000"}
	rt.RegisterBroker(r)
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	assert.Equal(t, map[string][]string{brokerA.addr: {"127.0.0.1:30000"}}, rd.FilterServerTable)
	r.FilterServers = nil
	rt.RegisterBroker(r)
	rd, _ = rt.TopicRoute("TopicA")
	assert.Empty(t, rd.FilterServerTable)
}

func TestRouteTableConcurrent(t *testing.T) {
	clk := newFakeClock()
	rt := NewRouteTable(clk.Now)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := broker{name: fmt.Sprintf("broker-%d", i%3), addr: fmt.Sprintf("127.0.0.1:%d", 10000+i), id: int64(i / 3),
				dv: protocol.DataVersion{Counter: int64(i)}, topics: []*protocol.TopicConfig{topic("T", 4, 6)}}
			for j := range 200 {
				switch j % 5 {
				case 0:
					rt.RegisterBroker(b.registration())
				case 1:
					rt.TopicRoute("T")
				case 2:
					rt.ClusterInfo()
				case 3:
					clk.Advance(time.Second)
					rt.Expire(time.Minute)
				case 4:
					rt.Topics()
					rt.QueryDataVersion(b.addr, b.dv)
				}
			}
		}()
	}
	wg.Wait()
}

// TestRouteTableReplacedLiveBroker: a second process registering the same
// broker name and id from another address replaces the live one (as Java
// does) and the result names the replaced address, so the name server can
// warn; the same address switching ids, or re-registering, replaces
// nothing.
func TestRouteTableReplacedLiveBroker(t *testing.T) {
	rt := NewRouteTable(nil)
	assert.Empty(t, rt.RegisterBroker(brokerA.registration()).Replaced)
	assert.Empty(t, rt.RegisterBroker(brokerA.registration()).Replaced, "re-registration")

	second := brokerA
	second.addr = "127.0.0.1:20911"
	res := rt.RegisterBroker(second.registration())
	assert.Equal(t, brokerA.addr, res.Replaced)
	rd, ok := rt.TopicRoute("TopicA")
	require.True(t, ok)
	assert.Equal(t, map[int64]string{0: second.addr}, rd.BrokerDatas[0].BrokerAddrs)
	assert.Equal(t, second.addr, rt.RegisterBroker(brokerA.registration()).Replaced, "they take turns")

	other := brokerA
	other.name, other.addr = "broker-other", "127.0.0.1:30911"
	assert.Empty(t, rt.RegisterBroker(other.registration()).Replaced, "another name")
}
