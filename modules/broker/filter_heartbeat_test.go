package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// TestBadSubscriptionRefusesOnlyItsGroup: one heartbeat carries every
// group of a client process (the official clients share one per process);
// a group whose expression does not compile is refused with its position,
// the other groups and the producers are still registered and served.
func TestBadSubscriptionRefusesOnlyItsGroup(t *testing.T) {
	h := startBrokerFilters(t, nil)
	require.Equal(t, remoting.Success, h.send("HBT", 0, "m", message.Properties{"a": "7", "b": "x"}).Code)
	ver := protocol.FlexInt64(time.Now().UnixNano())
	group := func(name, expr string) protocol.ConsumerData {
		return protocol.ConsumerData{GroupName: name, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
			ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: []protocol.SubscriptionData{
				{Topic: "HBT", SubString: expr, ExpressionType: filter.TypeSQL92, SubVersion: ver}}}
	}
	hb := protocol.HeartbeatData{ClientID: "10.0.0.9@1", ConsumerDataSet: []protocol.ConsumerData{
		group("BAD1", "a > "), group("GOOD", "a > 5 AND b = 'x'"), group("BAD2", "a >> 1"),
	}, ProducerDataSet: []protocol.ProducerData{{GroupName: "PGX"}}}
	body, err := json.Marshal(hb)
	require.NoError(t, err)
	resp := h.invoke(remoting.HeartBeat, nil, body)
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, "group: BAD1")
	assert.Contains(t, resp.Remark, "at position 4")
	t.Log(resp.Remark)

	assert.Empty(t, h.b.clients.consumerIDs("BAD1"))
	assert.Empty(t, h.b.clients.consumerIDs("BAD2"))
	assert.Equal(t, []string{"10.0.0.9@1"}, h.b.clients.consumerIDs("GOOD"))
	h.b.clients.mu.RLock()
	_, ok := h.b.clients.producers["PGX"]
	h.b.clients.mu.RUnlock()
	assert.True(t, ok, "the heartbeat's producer is registered")
	assert.Equal(t, []string{"m"}, h.pullBodies(pullExt("GOOD", "HBT", 0, 0, 0, 0)))
	// The refused group has no subscription to pull with.
	assert.Equal(t, remoting.SubscriptionNotExist, h.invoke(remoting.PullMessage, pullExt("BAD1", "HBT", 0, 0, 0, 0), nil).Code)
}
