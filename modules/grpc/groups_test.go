package grpc_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// heartbeat4x registers a 4.x push consumer of group over remoting and
// returns the broker's answer.
func (n *node) heartbeat4x(clientID, group, topic string) *remoting.Command {
	n.t.Helper()
	body, err := json.Marshal(protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering, ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: topic, SubString: "*"}},
	}}})
	require.NoError(n.t, err)
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], client.NewRequest(remoting.HeartBeat, nil, body))
	require.NoError(n.t, err)
	return resp
}

func (n *node) pull4x(group, topic string) *remoting.Command {
	n.t.Helper()
	req := client.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(0), "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
	}, nil)
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(n.t, err)
	return resp
}

// TestMixedGroupRefused: a consumer group is consumed by 4.x clients or by
// 5.x clients, not both: while a 5.x consumer of a group is alive, 4.x
// heartbeats and pulls of the group are refused with a message that says
// why; while a 4.x consumer of a group is connected, a 5.x ReceiveMessage
// of it is FORBIDDEN. Other groups are unaffected.
func TestMixedGroupRefused(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("MixT", 1)

	// A 5.x SimpleConsumer of G5 declares its group in its settings.
	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(),
		PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res("G5"),
			Subscriptions: []*grpcapi.SubscriptionEntry{{Topic: res("MixT"), Expression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"}}}}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
	_, err = stream.Recv()
	require.NoError(t, err)

	var resp *remoting.Command
	eventually(t, 5*time.Second, func() bool { // the claim index is rebuilt within a second
		resp = n.heartbeat4x("c4x@1", "G5", "MixT")
		return resp.Code == remoting.NoPermission
	}, "a 4.x heartbeat of a 5.x group is refused")
	assert.Contains(t, resp.Remark, "G5")
	assert.Contains(t, resp.Remark, "RocketMQ 5 clients")
	assert.False(t, n.b.HasRemotingConsumers("G5"), "the refused 4.x consumer is not registered")
	resp = n.pull4x("G5", "MixT")
	assert.Equal(t, remoting.NoPermission, resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "4.x and 5.x consumers cannot share a group")

	// Another group is free for 4.x consumers ...
	resp = n.heartbeat4x("c4x@1", "G4", "MixT")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.NotEqual(t, remoting.NoPermission, n.pull4x("G4", "MixT").Code)
	// ... and then refused to 5.x consumers.
	st, msgs := n.receive("G4", "MixT", "*", time.Minute)
	require.NotNil(t, st)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, st.GetCode(), st.GetMessage())
	assert.Contains(t, st.GetMessage(), "4.x clients")
	assert.Empty(t, msgs)

	// The 5.x group is still served to 5.x consumers.
	st, _ = n.receive("G5", "MixT", "*", time.Minute)
	require.NotNil(t, st)
	assert.NotEqual(t, grpcapi.Code_FORBIDDEN, st.GetCode(), st.GetMessage())
	require.NoError(t, stream.CloseSend())
}
