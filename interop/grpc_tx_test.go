package interop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestTransaction4xBeside5x: on one topic, a half message of the official
// 4.x Go client's transactional producer and one of a 5.x producer (the
// gRPC API driven directly, with an open Telemetry stream publishing the
// topic) are both left undecided. The 4.x one is checked back to its own
// producer only (CHECK_TRANSACTION_STATE), the 5.x one to the 5.x client
// only (RecoverOrphanedTransactionCommand); each commits its own, and a
// 4.x consumer gets both once.
func TestTransaction4xBeside5x(t *testing.T) {
	port := testserver.FreePort(t)
	endpoints := fmt.Sprintf("127.0.0.1:%d", port)
	srv := testserver.StartDev(t, testserver.Options{Sets: append([]string{"grpc.listen=" + endpoints}, txSets...)})
	topic := uniq("TxMix")
	rawCreateTopic(t, srv, topic, 2)

	// The 5.x client: a Telemetry stream whose settings publish the topic.
	conn, err := grpclib.NewClient(endpoints, grpclib.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	cli := grpcapi.NewMessagingServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", uniq("tx5"), "x-mq-language", "GOLANG", "x-mq-protocol", "v2")
	stream, err := cli.Telemetry(ctx)
	require.NoError(t, err)
	settings := &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(),
		PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{Topics: []*grpcapi.Resource{{Name: topic}}}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: settings}}))
	first, err := stream.Recv()
	require.NoError(t, err)
	require.NotNil(t, first.GetSettings())
	var (
		mu      sync.Mutex
		recover []*grpcapi.RecoverOrphanedTransactionCommand
	)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			c, err := stream.Recv()
			if err != nil {
				return // the test closed the connection
			}
			if r := c.GetRecoverOrphanedTransactionCommand(); r != nil {
				mu.Lock()
				recover = append(recover, r)
				mu.Unlock()
			}
		}
	}()
	defer func() { cancel(); <-recvDone }()
	recovered := func() []*grpcapi.RecoverOrphanedTransactionCommand {
		mu.Lock()
		defer mu.Unlock()
		return append([]*grpcapi.RecoverOrphanedTransactionCommand(nil), recover...)
	}

	// The 4.x producer: its local transaction stays unknown; a check-back
	// commits it.
	l := &txListener{exec: state(primitive.UnkonwnState), check: state(primitive.CommitMessageState)}
	p := newTxProducer(t, srv.Namesrv, uniq("TxMixPG"), uniq("txmix"), l)
	sendTx(t, p, topic, "4x-undecided")

	// The 5.x producer's half message, left undecided too.
	resp, err := cli.SendMessage(ctx, &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{{
		Topic: &grpcapi.Resource{Name: topic}, Body: []byte("5x-undecided"),
		SystemProperties: &grpcapi.SystemProperties{MessageId: "tx5-mix-1", MessageType: grpcapi.MessageType_TRANSACTION, BornTimestamp: timestamppb.Now()},
	}}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())

	waitFor(t, 30*time.Second, "the 5.x check-back", func() bool { return len(recovered()) > 0 })
	r := recovered()[0]
	require.Equal(t, "tx5-mix-1", r.GetMessage().GetSystemProperties().GetMessageId())
	end, err := cli.EndTransaction(ctx, &grpcapi.EndTransactionRequest{Topic: &grpcapi.Resource{Name: topic}, MessageId: "tx5-mix-1",
		TransactionId: r.GetTransactionId(), Resolution: grpcapi.TransactionResolution_COMMIT, Source: grpcapi.TransactionSource_SOURCE_SERVER_CHECK})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, end.GetStatus().GetCode(), end.GetStatus().GetMessage())

	d := newDeliveries()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("TxMixCG")}, d.handle)
	waitFor(t, 60*time.Second, "both committed messages", func() bool { return d.count("4x-undecided") > 0 && d.count("5x-undecided") > 0 })
	waitFor(t, 10*time.Second, "the 4.x check-back counted", func() bool { return l.checked("4x-undecided") > 0 })
	time.Sleep(2 * time.Second) // two more check rounds: a stray check-back or delivery would show
	assert.Equal(t, map[string]int{"4x-undecided": 1, "5x-undecided": 1}, d.snapshot())
	assert.Equal(t, []string{"4x-undecided"}, l.checkedBodies(), "the 4.x producer is asked about its own half message only")
	for _, c := range recovered() {
		assert.Equal(t, "tx5-mix-1", c.GetMessage().GetSystemProperties().GetMessageId(), "the 5.x client is asked about its own half message only")
	}
}
