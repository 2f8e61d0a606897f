package grpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
)

func res(name string) *grpcapi.Resource { return &grpcapi.Resource{Name: name} }

func msg(topic, id, body string, sp *grpcapi.SystemProperties) *grpcapi.Message {
	if sp == nil {
		sp = &grpcapi.SystemProperties{}
	}
	sp.MessageId = id
	sp.BornTimestamp = timestamppb.Now()
	if sp.MessageType == grpcapi.MessageType_MESSAGE_TYPE_UNSPECIFIED {
		sp.MessageType = grpcapi.MessageType_NORMAL
	}
	return &grpcapi.Message{Topic: res(topic), SystemProperties: sp, Body: []byte(body)}
}

func TestQueryRoute(t *testing.T) {
	n := startNode(t)
	n.topic("RouteT", 4)
	resp, err := n.cli.QueryRoute(n.ctx(), &grpcapi.QueryRouteRequest{Topic: res("RouteT")})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.Len(t, resp.GetMessageQueues(), 4)
	for i, q := range resp.GetMessageQueues() {
		assert.Equal(t, int32(i), q.GetId())
		assert.Equal(t, "RouteT", q.GetTopic().GetName())
		assert.Equal(t, grpcapi.Permission_READ_WRITE, q.GetPermission())
		assert.Equal(t, n.b.Config().Name, q.GetBroker().GetName())
		addrs := q.GetBroker().GetEndpoints().GetAddresses()
		require.Len(t, addrs, 1)
		assert.Equal(t, n.srv.Addr().String(), fmt.Sprintf("%s:%d", addrs[0].GetHost(), addrs[0].GetPort()))
		assert.Contains(t, q.GetAcceptMessageTypes(), grpcapi.MessageType_FIFO)
	}

	resp, err = n.cli.QueryRoute(n.ctx(), &grpcapi.QueryRouteRequest{Topic: res("NoSuchTopic")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_TOPIC_NOT_FOUND, resp.GetStatus().GetCode())

	as, err := n.cli.QueryAssignment(n.ctx(), &grpcapi.QueryAssignmentRequest{Topic: res("RouteT"), Group: res("G")})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, as.GetStatus().GetCode())
	require.Len(t, as.GetAssignments(), 1)
	assert.Equal(t, int32(-1), as.GetAssignments()[0].GetMessageQueue().GetId())
}

func TestHeartbeatAndTelemetry(t *testing.T) {
	n := startNode(t)
	hb, err := n.cli.Heartbeat(n.ctx(), &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, hb.GetStatus().GetCode())

	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	settings := &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(), PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{Topics: []*grpcapi.Resource{res("T")}}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: settings}}))
	got, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
	assert.Equal(t, int32(n.b.Config().MaxMessageSize), got.GetSettings().GetPublishing().GetMaxBodySize())
	assert.Equal(t, "T", got.GetSettings().GetPublishing().GetTopics()[0].GetName())

	sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res("G")}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
	got, err = stream.Recv()
	require.NoError(t, err)
	assert.NotNil(t, got.GetSettings().GetBackoffPolicy(), "a subscriber gets a retry policy")
	require.NoError(t, stream.CloseSend())

	bye, err := n.cli.NotifyClientTermination(n.ctx(), &grpcapi.NotifyClientTerminationRequest{})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, bye.GetStatus().GetCode())
}

// TestSendNormalPulledBy4x sends over gRPC and reads with a 4.x remoting
// pull: tag, keys, user properties and the client's message id survive.
func TestSendNormalPulledBy4x(t *testing.T) {
	n := startNode(t)
	n.topic("SendT", 1)
	m := msg("SendT", "01AABBCCDDEEFF00112233445566", "hello 4.x", &grpcapi.SystemProperties{Tag: proto.String("TagA"), Keys: []string{"k1", "k2"}})
	m.UserProperties = map[string]string{"color": "red", "n": "1"}
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	require.Len(t, resp.GetEntries(), 1)
	assert.Equal(t, "01AABBCCDDEEFF00112233445566", resp.GetEntries()[0].GetMessageId())
	assert.Equal(t, int64(0), resp.GetEntries()[0].GetOffset())

	got := n.pull("SendT", 0, 0)
	require.Len(t, got, 1)
	g := got[0]
	assert.Equal(t, "hello 4.x", string(g.Body))
	assert.Equal(t, "TagA", g.Tag())
	assert.Equal(t, []string{"k1", "k2"}, g.Keys())
	assert.Equal(t, "01AABBCCDDEEFF00112233445566", g.MsgID)
	assert.Equal(t, "red", g.Property("color"))
	assert.Equal(t, "1", g.Property("n"))

	// A gzip body is stored inflated, so 4.x consumers read it as is.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte("zipped"))
	require.NoError(t, zw.Close())
	m = msg("SendT", "02", "", &grpcapi.SystemProperties{BodyEncoding: grpcapi.Encoding_GZIP})
	m.Body = z.Bytes()
	resp, err = n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	got = n.pull("SendT", 0, 1)
	require.Len(t, got, 1)
	assert.Equal(t, "zipped", string(got[0].Body))
}

func TestSendRefusals(t *testing.T) {
	n := startNode(t)
	n.topic("RefT", 2)
	tests := []struct {
		name string
		give *grpcapi.Message
		want grpcapi.Code
	}{
		{"missing topic", msg("Nope", "1", "b", nil), grpcapi.Code_TOPIC_NOT_FOUND},
		{"empty body", msg("RefT", "1", "", nil), grpcapi.Code_MESSAGE_BODY_EMPTY},
		{"no message id", msg("RefT", "", "b", nil), grpcapi.Code_ILLEGAL_MESSAGE_ID},
		{"tag with bar", msg("RefT", "1", "b", &grpcapi.SystemProperties{Tag: proto.String("a|b")}), grpcapi.Code_ILLEGAL_MESSAGE_TAG},
		{"fifo without group", msg("RefT", "1", "b", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_FIFO}), grpcapi.Code_ILLEGAL_MESSAGE_GROUP},
		{"delay without time", msg("RefT", "1", "b", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_DELAY}), grpcapi.Code_ILLEGAL_DELIVERY_TIME},
		{"normal with group", msg("RefT", "1", "b", &grpcapi.SystemProperties{MessageGroup: proto.String("g")}), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"transaction without a transaction service", msg("RefT", "1", "b", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_TRANSACTION}), grpcapi.Code_FORBIDDEN},
		{"reserved property", func() *grpcapi.Message {
			m := msg("RefT", "1", "b", nil)
			m.UserProperties = map[string]string{message.PropertyTimerDeliverMS: "1"}
			return m
		}(), grpcapi.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"bad gzip", msg("RefT", "1", "not gzip", &grpcapi.SystemProperties{BodyEncoding: grpcapi.Encoding_GZIP}), grpcapi.Code_MESSAGE_CORRUPTED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{tt.give}})
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		})
	}
	// The endpoint keeps serving after refusals.
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("RefT", "ok", "b", nil)}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode())
}

// TestSendFIFO: one message group lands on one queue, in send order.
func TestSendFIFO(t *testing.T) {
	n := startNode(t)
	n.topic("FifoT", 8)
	const count = 20
	for i := range count {
		m := msg("FifoT", "id-"+strconv.Itoa(i), "m"+strconv.Itoa(i), &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_FIFO, MessageGroup: proto.String("order-42")})
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		assert.Equal(t, int64(i), resp.GetEntries()[0].GetOffset(), "offsets of one group are consecutive on one queue")
	}
	var found []string
	for q := int32(0); q < 8; q++ {
		for _, m := range n.pull("FifoT", q, 0) {
			found = append(found, fmt.Sprintf("%d:%s", q, m.Body))
			assert.Equal(t, "order-42", m.Property("__SHARDINGKEY"))
		}
	}
	require.Len(t, found, count)
	q0 := found[0][:2]
	for i, f := range found {
		assert.Equal(t, q0+"m"+strconv.Itoa(i), f, "one queue, send order")
	}
}

// TestSendDelay: a delivery timestamp parks the message on the timer
// wheel; it reaches its queue only at that time.
func TestSendDelay(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("DelayT", 1)
	at := time.Now().Add(1500 * time.Millisecond)
	m := msg("DelayT", "delayed-1", "later", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(at), Tag: proto.String("D")})
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	assert.Empty(t, n.pull("DelayT", 0, 0), "not visible before its delivery time")
	eventually(t, 15*time.Second, func() bool { return len(n.pull("DelayT", 0, 0)) == 1 }, "delayed message delivered")
	assert.False(t, time.Now().Before(at), "delivered no earlier than the delivery timestamp")
	d := n.pull("DelayT", 0, 0)[0]
	assert.Equal(t, "later", string(d.Body))
	assert.Equal(t, "D", d.Tag())
	assert.Equal(t, "delayed-1", d.MsgID)

	// A 5.x consumer sees the delivery timestamp on the delivered message
	// (RocketMQ keeps TIMER_DELIVER_MS), and the timer wheel's properties
	// as system properties, not user ones.
	st, got := n.receive("DelayG", "DelayT", "*", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)
	sp := got[0].GetSystemProperties()
	assert.Equal(t, grpcapi.MessageType_DELAY, sp.GetMessageType())
	assert.Equal(t, at.UnixMilli(), sp.GetDeliveryTimestamp().AsTime().UnixMilli())
	for _, k := range []string{message.PropertyTimerOut, message.PropertyTimerEnqueue, message.PropertyTimerDequeue, message.PropertyRealTopic} {
		assert.NotContains(t, got[0].GetUserProperties(), k)
	}
}

func TestNotImplementedRPCs(t *testing.T) {
	n := startNode(t)
	ack, err := n.cli.AckMessage(n.ctx(), &grpcapi.AckMessageRequest{})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_NOT_IMPLEMENTED, ack.GetStatus().GetCode())
	rs, err := n.cli.ReceiveMessage(n.ctx(), &grpcapi.ReceiveMessageRequest{})
	require.NoError(t, err)
	r, err := rs.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_NOT_IMPLEMENTED, r.GetStatus().GetCode())
}

// TestSendDelayTooFar: a delivery time past schedule.max_delay is the
// client's error, answered ILLEGAL_DELIVERY_TIME.
func TestSendDelayTooFar(t *testing.T) {
	n := startNode(t)
	n.topic("FarT", 1)
	at := time.Now().Add(10 * 365 * 24 * time.Hour)
	m := msg("FarT", "far-1", "never", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(at)})
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_ILLEGAL_DELIVERY_TIME, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
}

// TestStopEndsTelemetry: an open Telemetry stream does not hold Stop up.
func TestStopEndsTelemetry(t *testing.T) {
	n := startNode(t)
	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	settings := &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(), PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: settings}}))
	_, err = stream.Recv()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, n.srv.Stop(ctx))
	assert.NoError(t, ctx.Err(), "Stop returned before its deadline: the stream ended, not forced")
	_, err = stream.Recv()
	assert.Error(t, err, "the stream is over")
}
