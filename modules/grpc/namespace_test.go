package grpc_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// Java's NamespaceUtilTest cases.
func TestWrapNamespace(t *testing.T) {
	tests := []struct {
		ns, give, want string
	}{
		{"ns1", "T", "ns1%T"},
		{"ns1", "%RETRY%G", "%RETRY%ns1%G"},
		{"ns1", "%DLQ%G", "%DLQ%ns1%G"},
		{"ns1", "ns1%T", "ns1%T"},                             // already there
		{"ns1", "%RETRY%ns1%G", "%RETRY%ns1%G"},               // already there
		{"ns1", "rmq_sys_wheel_timer", "rmq_sys_wheel_timer"}, // system topic
		{"ns1", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX"},
		{"ns1", "CID_RMQ_SYS_TRANS", "CID_RMQ_SYS_TRANS"}, // system group
		{"", "T", "T"},
	}
	for _, tt := range tests {
		t.Run(tt.ns+"/"+tt.give, func(t *testing.T) {
			got := grpcmod.WrapNamespace(tt.ns, tt.give)
			assert.Equal(t, tt.want, got)
			if tt.ns != "" && got != tt.give {
				assert.Equal(t, tt.give, grpcmod.WithoutNamespace(got, tt.ns), "round trip")
			}
		})
	}
	assert.Equal(t, "ns2%T", grpcmod.WithoutNamespace("ns2%T", "ns1"), "another namespace is kept")
}

// nsCtx is n.ctx with the client's namespace in x-mq-namespace, as the
// official clients send it.
func (n *node) nsCtx(ns string) context.Context {
	return metadata.AppendToOutgoingContext(n.ctx(), "x-mq-namespace", ns)
}

// TestNamespaces: a 5.x client of namespace ns1 and a 4.x client of
// namespace ns1 (wire names ns1%T, ns1%G) share topic T and group G in
// both directions, and the 5.x client is answered the names without the
// namespace.
func TestNamespaces(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("ns1%NsT", 1)
	ctx := n.nsCtx("ns1")

	// QueryRoute by the short name, answered without the namespace.
	rt, err := n.cli.QueryRoute(ctx, &grpcapi.QueryRouteRequest{Topic: res("NsT")})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, rt.GetStatus().GetCode(), rt.GetStatus().GetMessage())
	require.Len(t, rt.GetMessageQueues(), 1)
	assert.Equal(t, "NsT", rt.GetMessageQueues()[0].GetTopic().GetName())
	assert.Equal(t, "ns1", rt.GetMessageQueues()[0].GetTopic().GetResourceNamespace())
	// Without the namespace there is no topic NsT.
	rt, err = n.cli.QueryRoute(n.ctx(), &grpcapi.QueryRouteRequest{Topic: res("NsT")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_TOPIC_NOT_FOUND, rt.GetStatus().GetCode())

	// 5.x → 4.x: sent with resource_namespace (as the producers do),
	// pulled by a 4.x client as ns1%NsT.
	m := msg("NsT", "ns-5x", "from 5.x", &grpcapi.SystemProperties{Tag: proto.String("A")})
	m.Topic.ResourceNamespace = "ns1"
	sr, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
	pulled := n.pull("ns1%NsT", 0, 0)
	require.Len(t, pulled, 1)
	assert.Equal(t, "ns-5x", pulled[0].MsgID)

	// 4.x → 5.x: a 4.x producer of ns1 sends to ns1%NsT; the 5.x
	// SimpleConsumer of group NsG (x-mq-namespace ns1) receives both,
	// topics answered as NsT in namespace ns1.
	props := message.Properties{message.PropertyTags: "A", message.PropertyUniqKey: "7F00000100002A9F00000000000000F1"}
	req := client.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "ns1%P4", "topic": "ns1%NsT", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false",
	}, []byte("from 4.x"))
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	rs, err := n.cli.ReceiveMessage(ctx, receiveReq("NsG", "NsT"))
	require.NoError(t, err)
	st, got := drain(t, rs)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 2)
	ids := map[string]bool{}
	for _, g := range got {
		ids[g.GetSystemProperties().GetMessageId()] = true
		assert.Equal(t, "NsT", g.GetTopic().GetName())
		assert.Equal(t, "ns1", g.GetTopic().GetResourceNamespace())
	}
	assert.True(t, ids["ns-5x"] && ids["7F00000100002A9F00000000000000F1"], "both generations' messages: %v", ids)

	// The group is ns1%NsG for 4.x clients: acked with the short names,
	// and its 5.x consumption holds the 4.x name.
	for _, g := range got {
		ack, err := n.cli.AckMessage(ctx, &grpcapi.AckMessageRequest{Group: res("NsG"), Topic: res("NsT"),
			Entries: []*grpcapi.AckMessageEntry{{MessageId: g.GetSystemProperties().GetMessageId(), ReceiptHandle: g.GetSystemProperties().GetReceiptHandle()}}})
		require.NoError(t, err)
		assert.Equal(t, grpcapi.Code_OK, ack.GetStatus().GetCode(), ack.GetStatus().GetMessage())
	}
	stream, err := n.cli.Telemetry(ctx)
	require.NoError(t, err)
	sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(),
		PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res("NsG"),
			Subscriptions: []*grpcapi.SubscriptionEntry{{Topic: res("NsT"), Expression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"}}}}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
	back, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "NsG", back.GetSettings().GetSubscription().GetGroup().GetName(), "settings answered without the namespace")
	assert.Equal(t, "ns1", back.GetSettings().GetSubscription().GetGroup().GetResourceNamespace())
	var hb *remoting.Command
	eventually(t, 5*time.Second, func() bool {
		hb = n.heartbeat4x("c4x@1", "ns1%NsG", "ns1%NsT")
		return hb.Code == remoting.NoPermission
	}, "the 4.x name of the 5.x group ns1/NsG is ns1%NsG")
	assert.Equal(t, remoting.Success, n.heartbeat4x("c4x@2", "NsG", "NsT").Code, "NsG without a namespace is another group")
	require.NoError(t, stream.CloseSend())
}

func receiveReq(group, topic string) *grpcapi.ReceiveMessageRequest {
	return &grpcapi.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(topic), Id: -1},
		FilterExpression:   &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"},
		BatchSize:          16,
		InvisibleDuration:  durationpb.New(30 * time.Second),
		LongPollingTimeout: durationpb.New(time.Second),
	}
}

// drain reads a ReceiveMessage stream to its end.
func drain(t *testing.T, rs grpcapi.MessagingService_ReceiveMessageClient) (*grpcapi.Status, []*grpcapi.Message) {
	t.Helper()
	var st *grpcapi.Status
	var msgs []*grpcapi.Message
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return st, msgs
		}
		require.NoError(t, err)
		if r.GetStatus() != nil {
			st = r.GetStatus()
		}
		if r.GetMessage() != nil {
			msgs = append(msgs, r.GetMessage())
		}
	}
}
