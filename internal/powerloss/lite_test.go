package powerloss_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// The lite topic index (modules/grpc/lite*.go) as a row of the crash
// matrix: a lite topic's messages (records of its parent) and its group's
// committed offset (the lite journal) are exactly what was acknowledged.
// Each change or read runs a gRPC endpoint on the world's broker, which
// loads the index from its snapshot (written at the endpoint's clean
// stop; derived state) and the records after it, or rebuilds it from the
// store when a power loss left the snapshot stale, then replays the
// journal.

func init() { durableStates = append(durableStates, liteState) }

// liteEndpoint serves the world's broker over gRPC until stop.
type liteEndpoint struct {
	srv  *grpcmod.Server
	conn *grpclib.ClientConn
	cli  grpcapi.MessagingServiceClient
}

func openLiteEndpoint(t *testing.T, w *world) *liteEndpoint {
	t.Helper()
	gc := grpcmod.NewConfig()
	gc.Enabled = true
	gc.Listen = "127.0.0.1:0"
	srv, err := grpcmod.New(gc, grpcmod.Deps{Broker: w.b, Pop: w.pop})
	require.NoError(t, err)
	require.NoError(t, srv.Start(bgCtx))
	conn, err := grpclib.NewClient(srv.Addr().String(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	return &liteEndpoint{srv: srv, conn: conn, cli: grpcapi.NewMessagingServiceClient(conn)}
}

func (e *liteEndpoint) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(bgCtx, 10*time.Second)
	defer cancel()
	require.NoError(t, e.conn.Close())
	require.NoError(t, e.srv.Stop(ctx))
}

func liteCtx(client string) context.Context {
	return metadata.AppendToOutgoingContext(bgCtx, "x-mq-client-id", client)
}

// subscribe makes client the group's reader of the lite topic from opt.
func (e *liteEndpoint) subscribe(t *testing.T, client, group string, opt grpcapi.OffsetOption_Policy) {
	r, err := e.cli.SyncLiteSubscription(liteCtx(client), &grpcapi.SyncLiteSubscriptionRequest{
		Action: grpcapi.LiteSubscriptionAction_PARTIAL_ADD, Topic: &grpcapi.Resource{Name: "ML-T"}, Group: &grpcapi.Resource{Name: group},
		LiteTopicSet: []string{"chat"}, OffsetOption: &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: opt}}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode())
}

// receive answers up to batch messages of client's lite topics.
func (e *liteEndpoint) receive(t *testing.T, client, group string, batch int32) []*grpcapi.Message {
	ctx, cancel := context.WithTimeout(liteCtx(client), 10*time.Second)
	defer cancel()
	rs, err := e.cli.ReceiveMessage(ctx, &grpcapi.ReceiveMessageRequest{Group: &grpcapi.Resource{Name: group},
		MessageQueue: &grpcapi.MessageQueue{Topic: &grpcapi.Resource{Name: "ML-T"}}, BatchSize: batch,
		InvisibleDuration: durationpb.New(time.Hour), LongPollingTimeout: durationpb.New(200 * time.Millisecond)})
	require.NoError(t, err)
	var out []*grpcapi.Message
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if m := r.GetMessage(); m != nil {
			out = append(out, m)
		}
	}
}

var liteState = durableState{name: "lite topics",
	change: func(t *testing.T, w *world, run int, want map[string]string) {
		_, err := w.b.EnsureTopic(&protocol.TopicConfig{TopicName: "ML-T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite,
			Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypeLite}})
		require.NoError(t, err)
		e := openLiteEndpoint(t, w)
		defer e.stop(t)
		lite := "chat"
		for k := range 3 {
			r, err := e.cli.SendMessage(liteCtx("producer"), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{{
				Topic: &grpcapi.Resource{Name: "ML-T"}, Body: []byte(fmt.Sprintf("tok-%d-%d", run, k)),
				SystemProperties: &grpcapi.SystemProperties{MessageId: fmt.Sprintf("ml-%d-%d", run, k), MessageType: grpcapi.MessageType_LITE,
					LiteTopic: &lite, BornTimestamp: timestamppb.Now()}}}})
			require.NoError(t, err)
			require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode())
		}
		// A new reader each run resumes from the committed offset and
		// acks two: the group's offset moves by two per run.
		client := "gw-" + strconv.Itoa(run)
		e.subscribe(t, client, "ML-G", grpcapi.OffsetOption_LAST)
		got := e.receive(t, client, "ML-G", 2)
		require.Len(t, got, 2)
		for i, m := range got {
			sp := m.GetSystemProperties()
			require.Equal(t, int64(2*run+i), sp.GetQueueOffset(), "run %d resumes at the committed offset", run)
			a, err := e.cli.AckMessage(liteCtx(client), &grpcapi.AckMessageRequest{Group: &grpcapi.Resource{Name: "ML-G"}, Topic: &grpcapi.Resource{Name: "ML-T"},
				Entries: []*grpcapi.AckMessageEntry{{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle(), LiteTopic: sp.LiteTopic}}})
			require.NoError(t, err)
			require.Equal(t, grpcapi.Code_OK, a.GetStatus().GetCode())
		}
		want["sent"] = strconv.Itoa(3 * (run + 1))
		want["committed"] = strconv.Itoa(2 * (run + 1))
	},
	read: func(t *testing.T, w *world, _ map[string]string) map[string]string {
		got := map[string]string{}
		if _, found := w.b.TopicConfig("ML-T"); !found {
			return got
		}
		e := openLiteEndpoint(t, w)
		defer e.stop(t)
		// Every message, in order, by a group of its own.
		e.subscribe(t, "reader", "ML-ALL", grpcapi.OffsetOption_MIN)
		var n int64
		for range 100 {
			msgs := e.receive(t, "reader", "ML-ALL", 32)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				require.Equal(t, n, m.GetSystemProperties().GetQueueOffset(), "lite offsets in order, none missing")
				n++
				sp := m.GetSystemProperties()
				_, err := e.cli.AckMessage(liteCtx("reader"), &grpcapi.AckMessageRequest{Group: &grpcapi.Resource{Name: "ML-ALL"}, Topic: &grpcapi.Resource{Name: "ML-T"},
					Entries: []*grpcapi.AckMessageEntry{{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle(), LiteTopic: sp.LiteTopic}}})
				require.NoError(t, err)
			}
		}
		if n > 0 {
			got["sent"] = strconv.FormatInt(n, 10)
		}
		// The group's committed offset: where a new reader starts.
		e.subscribe(t, "probe", "ML-G", grpcapi.OffsetOption_LAST)
		if msgs := e.receive(t, "probe", "ML-G", 1); len(msgs) == 1 {
			if off := msgs[0].GetSystemProperties().GetQueueOffset(); off > 0 {
				got["committed"] = strconv.FormatInt(off, 10)
			}
		}
		return got
	},
}
