package grpc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
)

// TestTopicMessageType: a topic with RocketMQ 5's message.type attribute
// takes only messages of its type, as the proxy's
// DefaultTopicMessageTypeValidator checks them (a mismatch is
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE with the proxy's reason), and its
// route offers only that type; MIXED and a topic without the attribute
// take every type.
func TestTopicMessageType(t *testing.T) {
	n := startNode(t)
	typed := func(name, typ string) {
		var attrs map[string]string
		if typ != "" {
			attrs = map[string]string{protocol.AttrMessageType: typ}
		}
		_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite, Attributes: attrs})
		require.NoError(t, err)
	}
	typed("FifoT", protocol.MessageTypeFIFO)
	typed("DelayT", protocol.MessageTypeDelay)
	typed("TxT", protocol.MessageTypeTransaction)
	typed("NormalT", protocol.MessageTypeNormal)
	typed("MixedT", protocol.MessageTypeMixed)
	typed("UntypedT", "")

	normal := func(topic string) *grpcapi.Message { return msg(topic, "", "n", nil) }
	fifo := func(topic string) *grpcapi.Message {
		return msg(topic, "", "f", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_FIFO, MessageGroup: proto.String("g1")})
	}
	delay := func(topic string) *grpcapi.Message {
		return msg(topic, "", "d", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(time.Now().Add(time.Minute))})
	}
	tests := []struct {
		give *grpcapi.Message
		want grpcapi.Code
		msg  string
	}{
		{fifo("FifoT"), grpcapi.Code_OK, ""},
		{normal("FifoT"), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"},
		{delay("FifoT"), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "the expected type is FIFO, but actual type is DELAY"},
		{delay("DelayT"), grpcapi.Code_OK, ""},
		{fifo("DelayT"), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "the expected type is DELAY, but actual type is FIFO"},
		{normal("TxT"), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "the expected type is TRANSACTION, but actual type is NORMAL"},
		{normal("NormalT"), grpcapi.Code_OK, ""},
		{fifo("NormalT"), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "the expected type is NORMAL, but actual type is FIFO"},
		{normal("MixedT"), grpcapi.Code_OK, ""},
		{fifo("MixedT"), grpcapi.Code_OK, ""},
		{normal("UntypedT"), grpcapi.Code_OK, ""},
		{fifo("UntypedT"), grpcapi.Code_OK, ""},
		{delay("UntypedT"), grpcapi.Code_OK, ""},
	}
	for i, tt := range tests {
		tt.give.SystemProperties.MessageId = "01AABBCCDDEEFF0011223344" + string(rune('A'+i)) + "0"
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{tt.give}})
		require.NoError(t, err)
		assert.Equal(t, tt.want, resp.GetStatus().GetCode(), "%s %v: %s", tt.give.GetTopic().GetName(), tt.give.GetSystemProperties().GetMessageType(), resp.GetStatus().GetMessage())
		assert.Contains(t, resp.GetStatus().GetMessage(), tt.msg)
	}

	for topic, want := range map[string][]grpcapi.MessageType{
		"FifoT":    {grpcapi.MessageType_FIFO},
		"TxT":      {grpcapi.MessageType_TRANSACTION},
		"MixedT":   {grpcapi.MessageType_NORMAL, grpcapi.MessageType_FIFO, grpcapi.MessageType_DELAY, grpcapi.MessageType_TRANSACTION, grpcapi.MessageType_PRIORITY},
		"UntypedT": {grpcapi.MessageType_NORMAL, grpcapi.MessageType_FIFO, grpcapi.MessageType_DELAY, grpcapi.MessageType_TRANSACTION, grpcapi.MessageType_PRIORITY},
	} {
		route, err := n.cli.QueryRoute(n.ctx(), &grpcapi.QueryRouteRequest{Topic: res(topic)})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, route.GetStatus().GetCode(), route.GetStatus().GetMessage())
		require.NotEmpty(t, route.GetMessageQueues())
		for _, q := range route.GetMessageQueues() {
			assert.Equal(t, want, q.GetAcceptMessageTypes(), topic)
		}
	}
}
