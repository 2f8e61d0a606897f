package grpc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/grpcapi"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/modules/schedule"
)

// TestRecallMessage: a delay message's send answers a recall handle in
// Java's format; RecallMessage with it keeps the message from ever being
// delivered, while another delay message of the topic arrives. A handle
// for another topic, a made-up one and a garbled one are refused, and
// nothing else is recalled by them.
func TestRecallMessage(t *testing.T) {
	n := startNode(t)
	n.topic("RecallT", 1)
	n.topic("OtherT", 1)
	at := time.Now().Add(2 * time.Second)
	send := func(id string) string {
		m := msg("RecallT", id, "body-"+id, &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(at)})
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		return resp.GetEntries()[0].GetRecallHandle()
	}
	recalled, kept := send("recall-1"), send("keep-1")
	h, err := schedule.DecodeHandle(recalled)
	require.NoError(t, err, "the handle is Java's v1 format")
	assert.Equal(t, schedule.Handle{Topic: "RecallT", BrokerName: n.b.Config().Name, Timestamp: at.UnixMilli() + 1, MessageID: "recall-1"}, h)

	normal, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("RecallT", "now-1", "now", nil)}})
	require.NoError(t, err)
	assert.Empty(t, normal.GetEntries()[0].GetRecallHandle(), "a normal message has no recall handle")

	tests := []struct {
		name   string
		topic  string
		handle string
		want   grpcapi.Code
	}{
		{"other topic", "OtherT", recalled, grpcapi.Code_BAD_REQUEST},
		{"no such topic", "NoSuchT", recalled, grpcapi.Code_TOPIC_NOT_FOUND},
		{"garbled", "RecallT", "not-a-handle!", grpcapi.Code_BAD_REQUEST},
		{"empty", "RecallT", "", grpcapi.Code_BAD_REQUEST},
		{"made-up id", "RecallT", schedule.EncodeHandle("RecallT", n.b.Config().Name, at.UnixMilli(), "other-id"), grpcapi.Code_MESSAGE_NOT_FOUND},
		{"other time", "RecallT", schedule.EncodeHandle("RecallT", n.b.Config().Name, at.UnixMilli()+5, "keep-1"), grpcapi.Code_MESSAGE_NOT_FOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := n.cli.RecallMessage(n.ctx(), &grpcapi.RecallMessageRequest{Topic: res(tt.topic), RecallHandle: tt.handle})
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		})
	}

	resp, err := n.cli.RecallMessage(n.ctx(), &grpcapi.RecallMessageRequest{Topic: res("RecallT"), RecallHandle: recalled})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	assert.Equal(t, "recall-1", resp.GetMessageId())

	eventually(t, 15*time.Second, func() bool { return len(n.pull("RecallT", 0, 0)) == 2 }, "the kept delay message delivered")
	time.Sleep(500 * time.Millisecond) // a recalled message would come with the kept one
	var ids []string
	for _, m := range n.pull("RecallT", 0, 0) {
		ids = append(ids, m.MsgID)
	}
	assert.ElementsMatch(t, []string{"now-1", "keep-1"}, ids, "the recalled message is never delivered")

	late, err := n.cli.RecallMessage(n.ctx(), &grpcapi.RecallMessageRequest{Topic: res("RecallT"), RecallHandle: kept})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, late.GetStatus().GetCode(), "too late once delivered: %s", late.GetStatus().GetMessage())
}

// TestRecallWithoutSchedule: with schedule off there is nothing to recall.
func TestRecallWithoutSchedule(t *testing.T) {
	n := startNodeWith(t, false, func(_ *grpcmod.Config, d *grpcmod.Deps) { d.Schedule = nil })
	n.topic("RecallT", 1)
	resp, err := n.cli.RecallMessage(n.ctx(), &grpcapi.RecallMessageRequest{Topic: res("RecallT"), RecallHandle: schedule.EncodeHandle("RecallT", "b", 1, "x")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_NOT_IMPLEMENTED, resp.GetStatus().GetCode())
}
