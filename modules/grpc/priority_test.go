package grpc_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
)

// priorityTopic makes a PRIORITY topic of queues levels.
func (n *node) priorityTopic(name string, queues int32) {
	n.t.Helper()
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypePriority}})
	require.NoError(n.t, err)
}

// sendPriority sends one message and returns its answer's status and entry.
func (n *node) sendOne(m *grpcapi.Message) (*grpcapi.Status, *grpcapi.SendResultEntry) {
	n.t.Helper()
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(n.t, err)
	var e *grpcapi.SendResultEntry
	if len(resp.GetEntries()) > 0 {
		e = resp.GetEntries()[0]
	}
	return resp.GetStatus(), e
}

// TestPrioritySend: a priority message goes to the queue of its level on
// a PRIORITY topic (capped at the highest queue), carries the
// _SYS_MSG_PRIORITY_ property 4.x consumers read, and comes back to a
// 5.x consumer as a PRIORITY message with its priority. Priority 0 sent
// as NORMAL (what the official clients do) is a priority message too;
// a negative priority, or a priority on a FIFO, delay or transactional
// message, is refused; a topic of another type refuses priority messages.
func TestPrioritySend(t *testing.T) {
	n := startNodeWith(t, true)
	n.priorityTopic("PrioT", 4)
	n.topic("PlainT", 4)
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: "NormT", ReadQueueNums: 2, WriteQueueNums: 2,
		Perm: protocol.PermRead | protocol.PermWrite, Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypeNormal}})
	require.NoError(t, err)

	prio := func(topic, id string, p int32, typ grpcapi.MessageType) *grpcapi.Message {
		return msg(topic, id, "body-"+id, &grpcapi.SystemProperties{MessageType: typ, Priority: proto.Int32(p)})
	}
	for i, tt := range []struct {
		p     int32
		typ   grpcapi.MessageType
		queue int32
	}{
		{2, grpcapi.MessageType_PRIORITY, 2},
		{3, grpcapi.MessageType_PRIORITY, 3},
		{9, grpcapi.MessageType_PRIORITY, 3}, // past the highest queue: the highest
		{0, grpcapi.MessageType_NORMAL, 0},   // the official clients' priority 0
		{1, grpcapi.MessageType_PRIORITY, 1},
	} {
		id := fmt.Sprintf("01AABBCCDDEEFF00112233440%d", i)
		st, _ := n.sendOne(prio("PrioT", id, tt.p, tt.typ))
		require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
		got := n.pull("PrioT", tt.queue, 0)
		require.NotEmpty(t, got, "priority %d in queue %d", tt.p, tt.queue)
		last := got[len(got)-1]
		assert.Equal(t, "body-"+id, string(last.Body))
		assert.Equal(t, fmt.Sprint(tt.p), last.Properties[message.PropertyPriority])
	}

	for _, tt := range []struct {
		give *grpcapi.Message
		want grpcapi.Code
	}{
		{prio("PrioT", "neg", -1, grpcapi.MessageType_PRIORITY), grpcapi.Code_BAD_REQUEST},
		{msg("PrioT", "nopri", "x", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_PRIORITY}), grpcapi.Code_BAD_REQUEST},
		{msg("PrioT", "fifo", "x", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_FIFO, MessageGroup: proto.String("g"), Priority: proto.Int32(1)}), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{msg("PrioT", "plain", "x", nil), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE}, // a priority topic takes priority messages
		{prio("NormT", "onnorm", 1, grpcapi.MessageType_PRIORITY), grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{prio("PlainT", "onplain", 1, grpcapi.MessageType_PRIORITY), grpcapi.Code_OK}, // an untyped topic takes every type
	} {
		st, _ := n.sendOne(tt.give)
		assert.Equal(t, tt.want, st.GetCode(), "%s: %s", tt.give.GetSystemProperties().GetMessageId(), st.GetMessage())
	}

	// A 5.x consumer gets them highest first, each with its priority.
	st, got := n.receive("g5", "PrioT", "*", time.Minute)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	var prios []int32
	for _, m := range got {
		sp := m.GetSystemProperties()
		assert.Equal(t, grpcapi.MessageType_PRIORITY, sp.GetMessageType())
		require.NotNil(t, sp.Priority)
		assert.Empty(t, m.GetUserProperties()[message.PropertyPriority])
		prios = append(prios, sp.GetPriority())
	}
	assert.Equal(t, []int32{3, 9, 2, 1, 0}, prios)

	// The route of a priority topic offers PRIORITY only.
	route, err := n.cli.QueryRoute(n.ctx(), &grpcapi.QueryRouteRequest{Topic: res("PrioT")})
	require.NoError(t, err)
	for _, q := range route.GetMessageQueues() {
		assert.Equal(t, []grpcapi.MessageType{grpcapi.MessageType_PRIORITY}, q.GetAcceptMessageTypes())
	}
}
