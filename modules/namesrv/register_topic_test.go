package namesrv

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/protocol"
)

// TestRegisterTopic: REGISTER_TOPIC_IN_NAMESRV upserts one topic's queue
// data, refuses (as Java) queue data of an unregistered broker name, and
// moves the broker's data version only from the version it holds.
func TestRegisterTopic(t *testing.T) {
	rt := NewRouteTable(nil)
	v1 := protocol.DataVersion{Timestamp: 1, Counter: 1}
	rt.RegisterBroker(BrokerRegistration{ClusterName: "C", BrokerName: "b", BrokerAddr: "127.0.0.1:10911",
		Topics: protocol.TopicConfigWrapper{DataVersion: v1}})
	qd := protocol.QueueData{BrokerName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}

	v2 := protocol.DataVersion{Timestamp: 2, Counter: 2}
	assert.Empty(t, rt.RegisterTopic("T", []protocol.QueueData{qd}, "127.0.0.1:10911", &v1, &v2))
	assert.Equal(t, []string{"T"}, rt.Topics())
	lb, _ := rt.Broker("127.0.0.1:10911")
	assert.Equal(t, v2, lb.DataVersion, "taken from the held version")

	// A change whose previous version is not the one held (one was
	// missed) leaves the version, so the next digest asks for the table.
	v4 := protocol.DataVersion{Timestamp: 4, Counter: 4}
	v3 := protocol.DataVersion{Timestamp: 3, Counter: 3}
	assert.Empty(t, rt.RegisterTopic("U", []protocol.QueueData{qd}, "127.0.0.1:10911", &v3, &v4))
	lb, _ = rt.Broker("127.0.0.1:10911")
	assert.Equal(t, v2, lb.DataVersion)
	changed, _ := rt.QueryDataVersion("127.0.0.1:10911", v4)
	assert.True(t, changed)

	// Queue data of a broker name that is not registered: nothing.
	assert.Equal(t, "ghost", rt.RegisterTopic("V", []protocol.QueueData{qd, {BrokerName: "ghost", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}, "", nil, nil))
	assert.Equal(t, []string{"T", "U"}, rt.Topics())
}
