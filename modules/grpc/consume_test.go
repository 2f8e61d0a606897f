package grpc_test

import (
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// receive runs one ReceiveMessage call and collects its status and messages.
func (n *node) receive(group, topic, tagExpr string, invisible time.Duration) (*grpcapi.Status, []*grpcapi.Message) {
	n.t.Helper()
	rs, err := n.cli.ReceiveMessage(n.ctx(), &grpcapi.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(topic), Id: -1},
		FilterExpression:   &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: tagExpr},
		BatchSize:          16,
		InvisibleDuration:  durationpb.New(invisible),
		LongPollingTimeout: durationpb.New(time.Second),
	})
	require.NoError(n.t, err)
	var st *grpcapi.Status
	var msgs []*grpcapi.Message
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return st, msgs
		}
		require.NoError(n.t, err)
		if r.GetStatus() != nil {
			st = r.GetStatus()
		}
		if r.GetMessage() != nil {
			msgs = append(msgs, r.GetMessage())
		}
	}
}

// TestReceiveAckChangeInvisible: a 5.x SimpleConsumer's cycle over the pop
// service — receive with a tag filter, ack, change the invisible time and
// get the message again with attempt 2.
func TestReceiveAckChangeInvisible(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("PopT", 2)
	for i, tag := range []string{"A", "B", "A"} {
		m := msg("PopT", "pop-"+tag+string(rune('0'+i)), "body-"+tag, &grpcapi.SystemProperties{Tag: proto.String(tag), Keys: []string{"k"}})
		m.UserProperties = map[string]string{"p": "v"}
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode())
	}
	st, got := n.receive("G5", "PopT", "A", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 2, "the tag filter keeps the two A messages")
	for _, m := range got {
		sp := m.GetSystemProperties()
		assert.Equal(t, "A", sp.GetTag())
		assert.Equal(t, []string{"k"}, sp.GetKeys())
		assert.Equal(t, "v", m.GetUserProperties()["p"])
		assert.Equal(t, int32(1), sp.GetDeliveryAttempt())
		assert.NotEmpty(t, sp.GetReceiptHandle())
		assert.Equal(t, "body-A", string(m.GetBody()))
		assert.Equal(t, grpcapi.DigestType_CRC32, sp.GetBodyDigest().GetType())
	}
	st, again := n.receive("G5", "PopT", "A", 30*time.Second)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode(), "both in flight")
	assert.Empty(t, again)

	first, second := got[0].GetSystemProperties(), got[1].GetSystemProperties()
	ack, err := n.cli.AckMessage(n.ctx(), &grpcapi.AckMessageRequest{Group: res("G5"), Topic: res("PopT"),
		Entries: []*grpcapi.AckMessageEntry{{MessageId: first.GetMessageId(), ReceiptHandle: first.GetReceiptHandle()}}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, ack.GetStatus().GetCode(), ack.GetStatus().GetMessage())

	ci, err := n.cli.ChangeInvisibleDuration(n.ctx(), &grpcapi.ChangeInvisibleDurationRequest{Group: res("G5"), Topic: res("PopT"),
		ReceiptHandle: second.GetReceiptHandle(), InvisibleDuration: durationpb.New(0), MessageId: second.GetMessageId()})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, ci.GetStatus().GetCode(), ci.GetStatus().GetMessage())
	assert.NotEqual(t, second.GetReceiptHandle(), ci.GetReceiptHandle())

	st, again = n.receive("G5", "PopT", "A", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, again, 1, "only the unacked message comes back")
	assert.Equal(t, second.GetMessageId(), again[0].GetSystemProperties().GetMessageId())
	assert.Equal(t, int32(2), again[0].GetSystemProperties().GetDeliveryAttempt())

	// The acked handle's message stays acked; a forged handle is refused.
	bad, err := n.cli.AckMessage(n.ctx(), &grpcapi.AckMessageRequest{Group: res("G5"), Topic: res("PopT"),
		Entries: []*grpcapi.AckMessageEntry{{MessageId: "x", ReceiptHandle: "forged"}}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_INVALID_RECEIPT_HANDLE, bad.GetStatus().GetCode())
}

// TestReceiveFIFO: a client that declares its group FIFO in Telemetry gets
// a message group's messages in send order, and nothing more of that queue
// while they are in flight.
func TestReceiveFIFO(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("FifoPopT", 4)
	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res("GF"), Fifo: proto.Bool(true)}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
	_, err = stream.Recv()
	require.NoError(t, err)
	for i := range 5 {
		m := msg("FifoPopT", "f-"+string(rune('0'+i)), "m"+string(rune('0'+i)), &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_FIFO, MessageGroup: proto.String("grp")})
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode())
	}
	st, got := n.receive("GF", "FifoPopT", "*", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 5)
	for i, m := range got {
		assert.Equal(t, "m"+string(rune('0'+i)), string(m.GetBody()), "send order")
		assert.Equal(t, "grp", m.GetSystemProperties().GetMessageGroup())
		assert.Equal(t, grpcapi.MessageType_FIFO, m.GetSystemProperties().GetMessageType())
	}
	st, more := n.receive("GF", "FifoPopT", "*", 30*time.Second)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode(), "the group's queue is blocked while its batch is in flight")
	assert.Empty(t, more)
	require.NoError(t, stream.CloseSend())
}

// TestSent4xReceived5x: a message a 4.x producer sends over remoting
// (SEND_MESSAGE) reaches a 5.x consumer with its tag, keys, properties and
// message id.
func TestSent4xReceived5x(t *testing.T) {
	n := startNodeWith(t, true)
	n.topic("X4T", 1)
	props := message.Properties{message.PropertyTags: "T4", message.PropertyKeys: "a b", message.PropertyUniqKey: "7F00000100002A9F0000000000000001", "shade": "green"}
	req := client.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "P4", "topic": "X4T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false",
	}, []byte("from 4.x"))
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	st, got := n.receive("G45", "X4T", "T4", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	require.Len(t, got, 1)
	sp := got[0].GetSystemProperties()
	assert.Equal(t, "from 4.x", string(got[0].GetBody()))
	assert.Equal(t, "T4", sp.GetTag())
	assert.Equal(t, []string{"a", "b"}, sp.GetKeys())
	assert.Equal(t, "7F00000100002A9F0000000000000001", sp.GetMessageId())
	assert.Equal(t, map[string]string{"shade": "green"}, got[0].GetUserProperties())
	assert.Equal(t, grpcapi.MessageType_NORMAL, sp.GetMessageType())
}
