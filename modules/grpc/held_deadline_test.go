package grpc_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
)

// TestReceiveLateInLongPoll: messages handed out late in a receive's long
// poll are sent to the client, because their invisible time starts when
// the pop state hands them out, not when the call started. The receive
// here waits longer than its invisible time before three messages come;
// the endpoint used to count the deadline for sending them from the
// call's start, found it passed and let the unsent ones go: popped (an
// attempt used) but never seen by the client. (TestNodeClientCycle's
// "redelivered after the invisible time" failure: a redelivery due late
// in a receive with a 1 s invisible time and a 1 s long poll.)
//
// The client's flow window (64 KiB) is smaller than a message, so the
// second message's send waits until the client reads and the third is
// taken only then: the client reads 300 ms after the status, well within
// the messages' invisible time (the old deadline had passed long before).
func TestReceiveLateInLongPoll(t *testing.T) {
	const body, invisible = 200 << 10, 2 * time.Second
	n := startNodeWith(t, true)
	n.topic("LateT", 3) // a store read answers one such message: one per queue
	rs, err := smallWindowClient(t, n.srv.Addr().String()).ReceiveMessage(n.ctx(), &grpcapi.ReceiveMessageRequest{
		Group: res("LateG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("LateT"), Id: -1},
		FilterExpression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"},
		BatchSize:        16, InvisibleDuration: durationpb.New(invisible), LongPollingTimeout: durationpb.New(8 * time.Second),
	})
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool { return n.srv.ReceiveWaits() == 1 }, "the receive waits")
	time.Sleep(invisible + 500*time.Millisecond) // past the invisible time counted from the call's start

	// In one store batch, so one pop round hands out all three.
	ids := []string{"late-1", "late-2", "late-3"}
	var msgs []*message.Ext
	for q, id := range ids {
		msgs = append(msgs, &message.Ext{Message: message.Message{Topic: "LateT", Body: []byte(strings.Repeat("l", body)),
			Properties: message.Properties{message.PropertyUniqKey: id}}, QueueID: int32(q), BornTimestamp: time.Now().UnixMilli()})
	}
	_, err = n.b.Put(context.Background(), msgs)
	require.NoError(t, err)

	got := readLate(t, rs)
	assert.Equal(t, ids, got, "the messages popped late in the long poll are all sent")
}

// TestLiteReceiveLateInLongPoll is TestReceiveLateInLongPoll for a lite
// receive, which counted its deadline from before its wait loop the same
// way (79babed). The three lite messages are stored first in a lite topic
// the client has not subscribed yet and become its messages all at once,
// late in the long poll, when it subscribes from the topic's start: one
// take hands out all three.
func TestLiteReceiveLateInLongPoll(t *testing.T) {
	const body, invisible = 200 << 10, 2 * time.Second
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("LL-P", 1)
	require.Equal(t, grpcapi.Code_OK, n.sync("late@1", "LL-P", "LL-G", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s-idle").GetCode())
	rs, err := smallWindowClient(t, n.srv.Addr().String()).ReceiveMessage(n.ctxAs("late@1"), &grpcapi.ReceiveMessageRequest{
		Group: res("LL-G"), MessageQueue: &grpcapi.MessageQueue{Topic: res("LL-P"), Id: -1},
		BatchSize: 16, InvisibleDuration: durationpb.New(invisible), LongPollingTimeout: durationpb.New(8 * time.Second),
	})
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool { return n.srv.ReceiveWaits() == 1 }, "the lite receive waits")
	lite := "s-late"
	var ids []string
	for i := range 3 {
		id := "lite-late-" + string(rune('1'+i))
		ids = append(ids, id)
		sr, err := n.cli.SendMessage(n.ctxAs("producer@1"), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{
			msg("LL-P", id, strings.Repeat("l", body), &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_LITE, LiteTopic: &lite})}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, sr.GetStatus().GetCode(), sr.GetStatus().GetMessage())
	}
	time.Sleep(invisible + 500*time.Millisecond) // past the invisible time counted from the call's start
	from := &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_MIN}}
	require.Equal(t, grpcapi.Code_OK, n.sync("late@1", "LL-P", "LL-G", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, from, lite).GetCode())

	got := readLate(t, rs)
	assert.Equal(t, ids, got, "the lite messages taken late in the long poll are all sent")
}

// smallWindowClient is a client whose HTTP/2 flow windows (64 KiB) are
// smaller than one of the tests' messages: a second message is sent only
// once the client reads.
func smallWindowClient(t *testing.T, addr string) grpcapi.MessagingServiceClient {
	t.Helper()
	conn, err := grpclib.NewClient(addr, grpclib.WithTransportCredentials(insecure.NewCredentials()),
		grpclib.WithInitialWindowSize(64<<10), grpclib.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return grpcapi.NewMessagingServiceClient(conn)
}

// readLate reads a receive's OK status, waits 300 ms (a client that reads
// a little later, within the invisible time) and reads its messages to
// the end; each must be a first delivery. It returns their ids, sorted.
func readLate(t *testing.T, rs grpcapi.MessagingService_ReceiveMessageClient) []string {
	t.Helper()
	r, err := rs.Recv()
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
	time.Sleep(300 * time.Millisecond)
	var got []string
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if m := r.GetMessage(); m != nil {
			got = append(got, m.GetSystemProperties().GetMessageId())
			assert.Equal(t, int32(1), m.GetSystemProperties().GetDeliveryAttempt())
		}
	}
	slices.Sort(got)
	return got
}
