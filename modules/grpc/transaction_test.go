package grpc_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/modules/transaction"
)

// withTx adds a transaction service (its check loop not started: the
// tests run check rounds with CheckNow) whose clock runs ahead by skew, so
// half messages are old enough to check at once.
func withTx(t testing.TB, skew time.Duration, out **transaction.Service) nodeOpt {
	return func(_ *grpcmod.Config, d *grpcmod.Deps) {
		tx, err := transaction.New(transaction.NewConfig(), transaction.Deps{Broker: d.Broker, Now: func() time.Time { return time.Now().Add(skew) }})
		require.NoError(t, err)
		d.Transaction = tx
		*out = tx
	}
}

// sendTx sends one transactional message and returns its send entry.
func (n *node) sendTx(topic, id, body string, sp *grpcapi.SystemProperties) *grpcapi.SendResultEntry {
	n.t.Helper()
	if sp == nil {
		sp = &grpcapi.SystemProperties{}
	}
	sp.MessageType = grpcapi.MessageType_TRANSACTION
	m := msg(topic, id, body, sp)
	m.UserProperties = map[string]string{"color": "blue"}
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(n.t, err)
	require.Equal(n.t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	e := resp.GetEntries()[0]
	require.NotEmpty(n.t, e.GetTransactionId())
	return e
}

func (n *node) endTx(topic, msgID, txID string, r grpcapi.TransactionResolution, src grpcapi.TransactionSource) *grpcapi.Status {
	n.t.Helper()
	resp, err := n.cli.EndTransaction(n.ctx(), &grpcapi.EndTransactionRequest{
		Topic: res(topic), MessageId: msgID, TransactionId: txID, Resolution: r, Source: src,
	})
	require.NoError(n.t, err)
	return resp.GetStatus()
}

// pullAll reads every queue of a topic from offset 0 over 4.x pulls.
func (n *node) pullAll(topic string, queues int32) []*client.MessageExt {
	var all []*client.MessageExt
	for q := range queues {
		all = append(all, n.pull(topic, q, 0)...)
	}
	return all
}

// TestTransactionCommitRollback: a transactional message is invisible
// until committed; a committed one reaches 4.x and 5.x consumers once,
// with only the user's properties for the 5.x consumer; a rolled-back one
// never; a second decision changes nothing.
func TestTransactionCommitRollback(t *testing.T) {
	var tx *transaction.Service
	n := startNodeWith(t, true, withTx(t, 0, &tx))
	n.topic("TxT", 2)

	a := n.sendTx("TxT", "tx-a", "commit me", &grpcapi.SystemProperties{Tag: proto.String("TA"),
		OrphanedTransactionRecoveryDuration: durationpb.New(30 * time.Second)})
	b := n.sendTx("TxT", "tx-b", "roll me back", nil)
	assert.Empty(t, n.pullAll("TxT", 2), "half messages are invisible")
	assert.False(t, tx.Decided(a.GetOffset()))

	st := n.endTx("TxT", "tx-a", a.GetTransactionId(), grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_CLIENT)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	st = n.endTx("TxT", "tx-b", b.GetTransactionId(), grpcapi.TransactionResolution_ROLLBACK, grpcapi.TransactionSource_SOURCE_CLIENT)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	assert.True(t, tx.Decided(a.GetOffset()))
	assert.True(t, tx.Decided(b.GetOffset()))

	// A second decision, even the opposite one, is answered OK and ignored.
	st = n.endTx("TxT", "tx-a", a.GetTransactionId(), grpcapi.TransactionResolution_ROLLBACK, grpcapi.TransactionSource_SOURCE_CLIENT)
	assert.Equal(t, grpcapi.Code_OK, st.GetCode())
	assert.Equal(t, "transaction already decided", st.GetMessage())
	st = n.endTx("TxT", "tx-b", b.GetTransactionId(), grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_CLIENT)
	assert.Equal(t, grpcapi.Code_OK, st.GetCode())

	got := n.pullAll("TxT", 2)
	require.Len(t, got, 1, "only the committed message")
	assert.Equal(t, "tx-a", got[0].MsgID)
	assert.Equal(t, "commit me", string(got[0].Body))
	assert.Equal(t, "TA", got[0].Tag())
	assert.Equal(t, "TxT", got[0].Property(message.PropertyProducerGroup), "4.x consumers see PGROUP, as on RocketMQ")

	st5, recv := n.receive("GTx", "TxT", "*", 30*time.Second)
	require.Equal(t, grpcapi.Code_OK, st5.GetCode(), st5.GetMessage())
	require.Len(t, recv, 1)
	assert.Equal(t, "tx-a", recv[0].GetSystemProperties().GetMessageId())
	assert.Equal(t, map[string]string{"color": "blue"}, recv[0].GetUserProperties(), "no PGROUP, CHECK_IMMUNITY_TIME_IN_SECONDS or TRAN_MSG for a 5.x consumer")
}

// TestTransactionForgedID: EndTransaction with an id this broker did not
// issue for that topic and message is refused INVALID_TRANSACTION_ID and
// decides nothing.
func TestTransactionForgedID(t *testing.T) {
	var tx *transaction.Service
	n := startNodeWith(t, false, withTx(t, 0, &tx))
	n.topic("TxF", 1)
	n.topic("TxG", 1)
	a := n.sendTx("TxF", "f-a", "a", nil)
	c := n.sendTx("TxG", "f-c", "c", nil)

	raw, err := base64.RawURLEncoding.DecodeString(a.GetTransactionId())
	require.NoError(t, err)
	flipped := append([]byte(nil), raw...)
	flipped[7] ^= 1 // another commit-log offset, same MAC
	cRaw, err := base64.RawURLEncoding.DecodeString(c.GetTransactionId())
	require.NoError(t, err)
	spliced := append(append([]byte(nil), cRaw[:16]...), raw[16:]...) // c's offsets, a's MAC

	tests := []struct {
		name, topic, msgID, txID string
		want                     grpcapi.Code
	}{
		{"empty", "TxF", "f-a", "", grpcapi.Code_INVALID_TRANSACTION_ID},
		{"garbage", "TxF", "f-a", "not-an-id", grpcapi.Code_INVALID_TRANSACTION_ID},
		{"offset changed", "TxF", "f-a", base64.RawURLEncoding.EncodeToString(flipped), grpcapi.Code_INVALID_TRANSACTION_ID},
		{"offsets of another half message", "TxF", "f-a", base64.RawURLEncoding.EncodeToString(spliced), grpcapi.Code_INVALID_TRANSACTION_ID},
		{"another message id", "TxF", "f-c", a.GetTransactionId(), grpcapi.Code_INVALID_TRANSACTION_ID},
		{"another topic", "TxG", "f-a", a.GetTransactionId(), grpcapi.Code_INVALID_TRANSACTION_ID},
		{"no such topic", "NoTx", "f-a", a.GetTransactionId(), grpcapi.Code_TOPIC_NOT_FOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := n.endTx(tt.topic, tt.msgID, tt.txID, grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_CLIENT)
			assert.Equal(t, tt.want, st.GetCode(), st.GetMessage())
		})
	}
	assert.False(t, tx.Decided(a.GetOffset()), "no forged id decided a")
	assert.False(t, tx.Decided(c.GetOffset()), "no forged id decided c")
	assert.Empty(t, n.pullAll("TxF", 1))
	assert.Empty(t, n.pullAll("TxG", 1))

	// The genuine ids still work, each for its own message only.
	st := n.endTx("TxG", "f-c", c.GetTransactionId(), grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_CLIENT)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	assert.True(t, tx.Decided(c.GetOffset()))
	assert.False(t, tx.Decided(a.GetOffset()))
	require.Len(t, n.pullAll("TxG", 1), 1)
	assert.Empty(t, n.pullAll("TxF", 1))
}

// TestTransactionDisabled: without a transaction service a transactional
// send and EndTransaction are refused FORBIDDEN, and nothing is stored.
func TestTransactionDisabled(t *testing.T) {
	n := startNode(t)
	n.topic("TxOff", 1)
	m := msg("TxOff", "off-1", "b", &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_TRANSACTION})
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	assert.Empty(t, n.pullAll("TxOff", 1))
	st := n.endTx("TxOff", "off-1", "x", grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_CLIENT)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, st.GetCode())
}

// TestTransactionRecoveryOverTelemetry: an undecided half message of a
// 5.x producer is checked back by a RecoverOrphanedTransactionCommand on
// the Telemetry stream of a client publishing to the topic; the client's
// EndTransaction(SERVER_CHECK) commits it. A 4.x producer group's half
// message on the same topic is not sent to the 5.x client.
func TestTransactionRecoveryOverTelemetry(t *testing.T) {
	var tx *transaction.Service
	n := startNodeWith(t, false, withTx(t, time.Minute, &tx))
	n.topic("TxR", 2)

	// A 4.x-style half message of producer group G4 on the same topic, first
	// in the half queue.
	h4 := &message.Ext{Message: message.Message{Topic: "TxR", Body: []byte("4x half"), Properties: message.Properties{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "G4", message.PropertyUniqKey: "tx-4x",
	}}, BornTimestamp: time.Now().UnixMilli()}
	pos4, err := n.b.Put(context.Background(), []*message.Ext{h4})
	require.NoError(t, err)

	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	settings := &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(), PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{Topics: []*grpcapi.Resource{res("TxR")}}}}
	require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: settings}}))
	_, err = stream.Recv()
	require.NoError(t, err)

	e := n.sendTx("TxR", "tx-orphan", "recover me", &grpcapi.SystemProperties{Tag: proto.String("R")})
	tx.CheckNow(context.Background())

	cmd, err := stream.Recv()
	require.NoError(t, err)
	rec := cmd.GetRecoverOrphanedTransactionCommand()
	require.NotNil(t, rec, "a recover command, got %v", cmd)
	m := rec.GetMessage()
	assert.Equal(t, "tx-orphan", m.GetSystemProperties().GetMessageId(), "the 5.x half message, not G4's")
	assert.Equal(t, "TxR", m.GetTopic().GetName())
	assert.Equal(t, "recover me", string(m.GetBody()))
	assert.Equal(t, "R", m.GetSystemProperties().GetTag())
	assert.Equal(t, grpcapi.MessageType_TRANSACTION, m.GetSystemProperties().GetMessageType())
	assert.Equal(t, map[string]string{"color": "blue"}, m.GetUserProperties(), "no transaction system properties")
	assert.Equal(t, e.GetTransactionId(), rec.GetTransactionId())
	assert.Equal(t, 1, tx.CheckTimes(e.GetOffset()))
	assert.Equal(t, 0, tx.CheckTimes(pos4[0].QueueOffset), "G4 has no producer online: not checked")
	assert.Empty(t, n.pullAll("TxR", 2))

	st := n.endTx("TxR", m.GetSystemProperties().GetMessageId(), rec.GetTransactionId(), grpcapi.TransactionResolution_COMMIT, grpcapi.TransactionSource_SOURCE_SERVER_CHECK)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	got := n.pullAll("TxR", 2)
	require.Len(t, got, 1)
	assert.Equal(t, "tx-orphan", got[0].MsgID)
	assert.True(t, tx.Decided(e.GetOffset()))
	assert.False(t, tx.Decided(pos4[0].QueueOffset))

	// A decided message is not checked again.
	tx.CheckNow(context.Background())
	assert.Equal(t, 0, tx.CheckTimes(e.GetOffset()))
	require.NoError(t, stream.CloseSend())
}
