package grpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/remoting"
)

// pulled is one PullMessage answer.
type pulled struct {
	status  *grpcapi.Status
	msgs    []*grpcapi.Message
	next    int64
	hasNext bool
}

func (n *node) pull5x(group, topic string, queue int32, offset int64, batch int32, tagExpr string, wait time.Duration) pulled {
	n.t.Helper()
	p, err := n.tryPull5x(group, topic, queue, offset, batch, tagExpr, wait)
	require.NoError(n.t, err)
	return p
}

// tryPull5x is pull5x for goroutines other than the test's: it reports
// errors instead of failing the test.
func (n *node) tryPull5x(group, topic string, queue int32, offset int64, batch int32, tagExpr string, wait time.Duration) (pulled, error) {
	req := &grpcapi.PullMessageRequest{Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(topic), Id: queue},
		Offset: offset, BatchSize: batch, LongPollingTimeout: durationpb.New(wait)}
	if tagExpr != "" {
		req.FilterExpression = &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: tagExpr}
	}
	var p pulled
	stream, err := n.cli.PullMessage(n.ctx(), req)
	if err != nil {
		return p, err
	}
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return p, err
		}
		switch c := r.GetContent().(type) {
		case *grpcapi.PullMessageResponse_Status:
			if p.status != nil {
				return p, fmt.Errorf("a second status %v after %v", c.Status, p.status)
			}
			p.status = c.Status
		case *grpcapi.PullMessageResponse_Message:
			p.msgs = append(p.msgs, c.Message)
		case *grpcapi.PullMessageResponse_NextOffset:
			p.next, p.hasNext = c.NextOffset, true
		}
	}
}

func (n *node) sendTagged(topic, id, body, tag string) {
	n.t.Helper()
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg(topic, id, body, &grpcapi.SystemProperties{Tag: proto.String(tag)})}})
	require.NoError(n.t, err)
	require.Equal(n.t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
}

func TestPullFromOffset(t *testing.T) {
	n := startNode(t)
	n.topic("PullT", 1)
	for i := range 5 {
		tag := "A"
		if i%2 == 1 {
			tag = "B"
		}
		n.sendTagged("PullT", "ID"+strconv.Itoa(i), "m"+strconv.Itoa(i), tag)
	}

	p := n.pull5x("PG", "PullT", 0, 1, 2, "", 0)
	require.Equal(t, grpcapi.Code_OK, p.status.GetCode(), p.status.GetMessage())
	require.Len(t, p.msgs, 2)
	assert.Equal(t, "m1", string(p.msgs[0].GetBody()))
	assert.Equal(t, int64(1), p.msgs[0].GetSystemProperties().GetQueueOffset())
	assert.Equal(t, "ID2", p.msgs[1].GetSystemProperties().GetMessageId())
	assert.Nil(t, p.msgs[0].GetSystemProperties().ReceiptHandle, "a pulled message has no receipt handle")
	require.True(t, p.hasNext)
	assert.Equal(t, int64(3), p.next)

	// Tag filter through the filter plugins: only A from 0.
	p = n.pull5x("PG", "PullT", 0, 0, 32, "A", 0)
	require.Equal(t, grpcapi.Code_OK, p.status.GetCode(), p.status.GetMessage())
	var bodies []string
	for _, m := range p.msgs {
		bodies = append(bodies, string(m.GetBody()))
		assert.Equal(t, "A", m.GetSystemProperties().GetTag())
	}
	assert.Equal(t, []string{"m0", "m2", "m4"}, bodies)
	assert.Equal(t, int64(5), p.next)

	// At the end: long-polls, then MESSAGE_NOT_FOUND with the same offset.
	t0 := time.Now()
	p = n.pull5x("PG", "PullT", 0, 5, 32, "", 300*time.Millisecond)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, p.status.GetCode(), p.status.GetMessage())
	assert.Equal(t, int64(5), p.next)
	assert.GreaterOrEqual(t, time.Since(t0), 250*time.Millisecond, "the pull waited")

	// A message stored while the pull waits answers it.
	done := make(chan pulled, 1)
	go func() {
		p, err := n.tryPull5x("PG", "PullT", 0, 5, 32, "", 20*time.Second)
		if err != nil {
			p.status = &grpcapi.Status{Message: err.Error()}
		}
		done <- p
	}()
	eventually(t, 5*time.Second, func() bool { return n.srv.WaitingPulls() > 0 }, "the pull is waiting")
	n.sendTagged("PullT", "ID5", "m5", "A")
	select {
	case p = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting pull was not answered by the send")
	}
	require.Equal(t, grpcapi.Code_OK, p.status.GetCode(), p.status.GetMessage())
	require.Len(t, p.msgs, 1)
	assert.Equal(t, "m5", string(p.msgs[0].GetBody()))
	assert.Equal(t, int64(6), p.next)
}

func TestPullRefusals(t *testing.T) {
	n := startNode(t)
	n.topic("PullR", 1)
	n.sendTagged("PullR", "ID0", "m0", "A")
	tests := []struct {
		name     string
		group    string
		topic    string
		queue    int32
		offset   int64
		wantCode grpcapi.Code
		wantNext bool
	}{
		{"offset past the end", "PG", "PullR", 0, 7, grpcapi.Code_ILLEGAL_OFFSET, true},
		{"negative offset", "PG", "PullR", 0, -1, grpcapi.Code_ILLEGAL_OFFSET, false},
		{"queue out of range", "PG", "PullR", 3, 0, grpcapi.Code_BAD_REQUEST, false},
		{"negative queue", "PG", "PullR", -1, 0, grpcapi.Code_BAD_REQUEST, false},
		{"no topic", "PG", "NoSuchTopic", 0, 0, grpcapi.Code_TOPIC_NOT_FOUND, false},
		{"no group", "", "PullR", 0, 0, grpcapi.Code_ILLEGAL_CONSUMER_GROUP, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := n.pull5x(tt.group, tt.topic, tt.queue, tt.offset, 32, "", 0)
			assert.Equal(t, tt.wantCode, p.status.GetCode(), p.status.GetMessage())
			assert.Equal(t, tt.wantNext, p.hasNext)
			assert.Empty(t, p.msgs)
		})
	}
	p := n.pull5x("PG", "PullR", 0, 7, 32, "", 0)
	assert.Equal(t, int64(1), p.next, "an overflowing offset is answered the queue's end")

	bad, err := n.cli.PullMessage(n.ctx(), &grpcapi.PullMessageRequest{Group: res("PG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("PullR")},
		FilterExpression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_SQL, Expression: "a >"}})
	require.NoError(t, err)
	r, err := bad.Recv()
	require.NoError(t, err)
	assert.NotEqual(t, grpcapi.Code_OK, r.GetStatus().GetCode(), "a bad SQL92 expression is refused")
}

// query4x asks QUERY_CONSUMER_OFFSET over the 4.x remoting protocol.
func (n *node) query4x(group, topic string, queue int32) *remoting.Command {
	n.t.Helper()
	req := client.NewRequest(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(queue))}, nil)
	resp, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(n.t, err)
	return resp
}

func TestOffsetsRoundTrip(t *testing.T) {
	n := startNode(t)
	n.topic("OffT", 2)
	for i := range 4 {
		n.sendTagged("OffT", "ID"+strconv.Itoa(i), "m", "A")
	}
	q0 := &grpcapi.MessageQueue{Topic: res("OffT"), Id: 0}

	// No offset yet: the queue starts at 0, so 0 (as QUERY_CONSUMER_OFFSET).
	got, err := n.cli.GetOffset(n.ctx(), &grpcapi.GetOffsetRequest{Group: res("OG"), MessageQueue: q0})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode(), got.GetStatus().GetMessage())
	assert.Equal(t, int64(0), got.GetOffset())

	up, err := n.cli.UpdateOffset(n.ctx(), &grpcapi.UpdateOffsetRequest{Group: res("OG"), MessageQueue: q0, Offset: 2})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, up.GetStatus().GetCode(), up.GetStatus().GetMessage())
	got, err = n.cli.GetOffset(n.ctx(), &grpcapi.GetOffsetRequest{Group: res("OG"), MessageQueue: q0})
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.GetOffset())

	// A 4.x consumer of the group sees it.
	resp := n.query4x("OG", "OffT", 0)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "2", resp.ExtFields["offset"])

	// And a 4.x commit is what 5.x reads.
	req := client.NewRequest(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "OG", "topic": "OffT", "queueId": "1", "commitOffset": "1"}, nil)
	r4, err := n.rc.Invoke(n.ctx(), n.b.Addrs()[0], req)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, r4.Code, r4.Remark)
	got, err = n.cli.GetOffset(n.ctx(), &grpcapi.GetOffsetRequest{Group: res("OG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("OffT"), Id: 1}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.GetOffset())

	tests := []struct {
		name string
		give *grpcapi.UpdateOffsetRequest
		want grpcapi.Code
	}{
		{"negative offset", &grpcapi.UpdateOffsetRequest{Group: res("OG"), MessageQueue: q0, Offset: -1}, grpcapi.Code_ILLEGAL_OFFSET},
		{"past the end", &grpcapi.UpdateOffsetRequest{Group: res("OG"), MessageQueue: q0, Offset: 99}, grpcapi.Code_ILLEGAL_OFFSET},
		{"bad queue", &grpcapi.UpdateOffsetRequest{Group: res("OG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("OffT"), Id: 2}, Offset: 0}, grpcapi.Code_BAD_REQUEST},
		{"no topic", &grpcapi.UpdateOffsetRequest{Group: res("OG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("Nope")}}, grpcapi.Code_TOPIC_NOT_FOUND},
		{"no group", &grpcapi.UpdateOffsetRequest{MessageQueue: q0}, grpcapi.Code_ILLEGAL_CONSUMER_GROUP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := n.cli.UpdateOffset(n.ctx(), tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
		})
	}
	got, err = n.cli.GetOffset(n.ctx(), &grpcapi.GetOffsetRequest{Group: res("OG"), MessageQueue: q0})
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.GetOffset(), "refused updates changed nothing")
}

func TestQueryOffset(t *testing.T) {
	n := startNode(t)
	n.topic("QOffT", 1)
	n.sendTagged("QOffT", "ID0", "m0", "A")
	n.sendTagged("QOffT", "ID1", "m1", "A")
	// The store time of the second message splits the queue.
	p := n.pull5x("QG", "QOffT", 0, 1, 1, "", 0)
	require.Len(t, p.msgs, 1)
	second := p.msgs[0].GetSystemProperties().GetStoreTimestamp().AsTime()
	n.sendTagged("QOffT", "ID2", "m2", "A")
	q := &grpcapi.MessageQueue{Topic: res("QOffT"), Id: 0}
	tests := []struct {
		name string
		give *grpcapi.QueryOffsetRequest
		want int64
	}{
		{"beginning", &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_BEGINNING}, 0},
		{"end", &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_END}, 3},
		{"long ago", &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_TIMESTAMP, Timestamp: timestamppb.New(time.Unix(0, 0))}, 0},
		{"in the future", &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_TIMESTAMP, Timestamp: timestamppb.New(time.Now().Add(time.Hour))}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := n.cli.QueryOffset(n.ctx(), tt.give)
			require.NoError(t, err)
			require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
			assert.Equal(t, tt.want, r.GetOffset())
		})
	}
	// By the second message's store time: at most its offset (messages
	// stored in the same millisecond share it).
	r, err := n.cli.QueryOffset(n.ctx(), &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_TIMESTAMP, Timestamp: timestamppb.New(second)})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode())
	assert.LessOrEqual(t, r.GetOffset(), int64(1))
	first := n.pull5x("QG", "QOffT", 0, r.GetOffset(), 32, "", 0)
	require.NotEmpty(t, first.msgs)
	assert.False(t, first.msgs[0].GetSystemProperties().GetStoreTimestamp().AsTime().After(second))

	noTS, err := n.cli.QueryOffset(n.ctx(), &grpcapi.QueryOffsetRequest{MessageQueue: q, QueryOffsetPolicy: grpcapi.QueryOffsetPolicy_TIMESTAMP})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_BAD_REQUEST, noTS.GetStatus().GetCode())
	badQ, err := n.cli.QueryOffset(n.ctx(), &grpcapi.QueryOffsetRequest{MessageQueue: &grpcapi.MessageQueue{Topic: res("QOffT"), Id: 9}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_BAD_REQUEST, badQ.GetStatus().GetCode())
}

// TestPullGroupHeldByPopConsumers: a group a live 5.x SimpleConsumer
// declared is refused to pull consumers (pulls and offset commits).
func TestPullGroupHeldByPopConsumers(t *testing.T) {
	n := startNode(t)
	n.topic("HeldT", 1)
	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res("PopG")}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
	_, err = stream.Recv()
	require.NoError(t, err)
	defer func() { _ = stream.CloseSend() }()

	p := n.pull5x("PopG", "HeldT", 0, 0, 32, "", 0)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, p.status.GetCode(), p.status.GetMessage())
	assert.Contains(t, p.status.GetMessage(), "SimpleConsumers or PushConsumers")
	up, err := n.cli.UpdateOffset(n.ctx(), &grpcapi.UpdateOffsetRequest{Group: res("PopG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("HeldT")}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, up.GetStatus().GetCode())
	// Another group is free.
	p = n.pull5x("FreeG", "HeldT", 0, 0, 32, "", 0)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, p.status.GetCode(), p.status.GetMessage())
}

// TestStopEndsWaitingPull: a long-polling pull is answered when the
// endpoint stops, instead of holding GracefulStop for its whole wait.
func TestStopEndsWaitingPull(t *testing.T) {
	n := startNode(t)
	n.topic("StopT", 1)
	done := make(chan pulled, 1)
	go func() {
		p, err := n.tryPull5x("SG", "StopT", 0, 0, 32, "", 25*time.Second)
		if err != nil {
			p.status = &grpcapi.Status{Message: err.Error()}
		}
		done <- p
	}()
	eventually(t, 5*time.Second, func() bool { return n.srv.WaitingPulls() > 0 }, "the pull is waiting")
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n.srv.Stop(ctx))
	select {
	case p := <-done:
		assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, p.status.GetCode(), p.status.GetMessage())
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting pull was not answered on Stop")
	}
	assert.Less(t, time.Since(t0), 10*time.Second)
	assert.Equal(t, 0, n.srv.WaitingPulls())
}
