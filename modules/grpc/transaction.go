package grpc

// Transactional messages for 5.x producers, on modules/transaction:
//
//   - SendMessage with message_type TRANSACTION stores a half message
//     through the same put hook as a 4.x prepared send (TRAN_MSG), with
//     PGROUP set to the topic's name: a 5.x producer has no group, and
//     RocketMQ 5's proxy uses the topic as the producer group of its
//     transactional messages (SendMessageActivity: "here use topicName as
//     producerGroup for transactional checker"). A 4.x producer group of
//     the same name as a topic therefore shares its check-backs with the
//     5.x producers of that topic, as on RocketMQ 5.
//   - The answer's transaction_id names the half message: its commit-log
//     and half-queue offsets with an HMAC-SHA256 over them, the topic and
//     the message id, keyed by a random broker-local key kept in the
//     broker's metadata (so ids outlive a restart). EndTransaction opens it
//     and refuses, with INVALID_TRANSACTION_ID, an id this broker did not
//     issue for that topic and message; the transaction service then
//     checks the half message itself (group, offsets, real topic) before
//     deciding, through the same End as END_TRANSACTION.
//   - Check-backs (transaction_check.go): the transaction service asks the
//     endpoint's check transport before 4.x remoting producers; it sends a
//     RecoverOrphanedTransactionCommand on the Telemetry stream of a client
//     that publishes to the topic, and the client's checker answers with
//     EndTransaction(source=SERVER_CHECK).

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/transaction"
)

// txKeyMeta is the broker metadata document holding the transaction id key.
const txKeyMeta = "grpcTransactionKey"

// maxRecovery bounds orphaned_transaction_recovery_duration (RocketMQ 5
// proxy's maxTransactionRecoverySecond default).
const maxRecovery = time.Hour

type txKeyDoc struct {
	Key []byte `json:"key"`
}

// loadTxKey reads the broker's transaction id key, making and saving one
// the first time.
func loadTxKey(s *Server) ([]byte, error) {
	var doc txKeyDoc
	found, err := s.b.LoadMeta(txKeyMeta, &doc)
	if err != nil {
		return nil, fmt.Errorf("grpc: transaction id key: %w", err)
	}
	if found && len(doc.Key) >= 32 {
		return doc.Key, nil
	}
	doc.Key = make([]byte, 32)
	if _, err := rand.Read(doc.Key); err != nil {
		return nil, fmt.Errorf("grpc: transaction id key: %w", err)
	}
	if err := s.b.SaveMeta(txKeyMeta, doc); err != nil {
		return nil, fmt.Errorf("grpc: transaction id key: %w", err)
	}
	return doc.Key, nil
}

const (
	txOffsets = 16 // commit-log offset, half-queue offset
	txMAC     = 16 // truncated HMAC-SHA256
)

func (s *Server) txMAC(offsets []byte, topic, msgID string) []byte {
	h := hmac.New(sha256.New, s.txKey)
	h.Write([]byte("quiver-tx-v1\x00"))
	h.Write(offsets)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(topic)))
	h.Write(n[:])
	h.Write([]byte(topic))
	h.Write([]byte(msgID))
	return h.Sum(nil)[:txMAC]
}

// txID is the transaction id of the half message at (clo, qo) for a
// message of topic with message id msgID.
func (s *Server) txID(clo, qo int64, topic, msgID string) string {
	b := make([]byte, txOffsets, txOffsets+txMAC)
	binary.BigEndian.PutUint64(b, uint64(clo))
	binary.BigEndian.PutUint64(b[8:], uint64(qo))
	b = append(b, s.txMAC(b, topic, msgID)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// openTxID returns the half message's offsets of an id this broker issued
// for topic and msgID; ok is false for any other string.
func (s *Server) openTxID(id, topic, msgID string) (clo, qo int64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != txOffsets+txMAC {
		return 0, 0, false
	}
	if !hmac.Equal(b[txOffsets:], s.txMAC(b[:txOffsets], topic, msgID)) {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), true
}

// txSend marks a message of type TRANSACTION as RocketMQ 5's proxy does:
// prepared (TRAN_MSG), the topic as producer group, and the recovery
// duration as CHECK_IMMUNITY_TIME_IN_SECONDS.
func (s *Server) txSend(sp *grpcapi.SystemProperties, topic string, props message.Properties) *sendError {
	if s.tx == nil || !s.tx.Enabled() {
		return refuse(grpcapi.Code_FORBIDDEN, "transactional messages are disabled on this broker (transaction.enabled=false or no transaction module)")
	}
	if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
		return refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a transactional message has no message group or delivery timestamp")
	}
	props[message.PropertyTransactionPrepared] = "true"
	props[message.PropertyProducerGroup] = topic
	if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil {
		if err := d.CheckValid(); err != nil {
			return refuse(grpcapi.Code_BAD_REQUEST, "orphaned transaction recovery duration: %v", err)
		}
		dur := d.AsDuration()
		if dur > maxRecovery {
			return refuse(grpcapi.Code_BAD_REQUEST, "the orphaned transaction recovery duration %s is over the maximum %s", dur, maxRecovery)
		}
		if secs := int64(dur / time.Second); secs > 0 {
			props[message.PropertyCheckImmunityTime] = fmt.Sprint(secs)
		}
	}
	return nil
}

// txSent is the transaction id of a stored half message, and notes the
// client as a publisher of its topic for check-backs.
func (s *Server) txSent(ctx context.Context, ext *message.Ext, pos store.Position) string {
	if ext.Topic != protocol.TransHalfTopic {
		return ""
	}
	topic := ext.Properties[message.PropertyRealTopic]
	s.notePublisher(clientID(ctx), topic)
	return s.txID(pos.CommitLogOffset, pos.QueueOffset, topic, ext.Properties[message.PropertyUniqKey])
}

// EndTransaction commits or rolls back the half message its transaction
// id names, through the transaction service's End (shared with 4.x
// END_TRANSACTION). A second decision, or one after a check-back decided,
// is answered OK and changes nothing.
func (s *Server) EndTransaction(ctx context.Context, req *grpcapi.EndTransactionRequest) (*grpcapi.EndTransactionResponse, error) {
	answer := func(st *grpcapi.Status) (*grpcapi.EndTransactionResponse, error) {
		return &grpcapi.EndTransactionResponse{Status: st}, nil
	}
	if s.tx == nil || !s.tx.Enabled() {
		return answer(status(grpcapi.Code_FORBIDDEN, "transactional messages are disabled on this broker"))
	}
	tc, st := s.topic(req.GetTopic())
	if st != nil {
		return answer(st)
	}
	id := req.GetTransactionId()
	if id == "" {
		return answer(status(grpcapi.Code_INVALID_TRANSACTION_ID, "transaction id is empty"))
	}
	var res transaction.Resolution
	switch req.GetResolution() {
	case grpcapi.TransactionResolution_COMMIT:
		res = transaction.Commit
	case grpcapi.TransactionResolution_ROLLBACK:
		res = transaction.Rollback
	default:
		// Java's proxy passes UNKNOWN on, and the broker leaves the half
		// message to a check-back.
		return answer(ok())
	}
	clo, qo, valid := s.openTxID(id, tc.TopicName, req.GetMessageId())
	if !valid {
		return answer(status(grpcapi.Code_INVALID_TRANSACTION_ID, fmt.Sprintf("transaction id %.64q was not issued by this broker for message %.64q of topic %s", id, req.GetMessageId(), tc.TopicName)))
	}
	dup, err := s.tx.End(ctx, transaction.EndRequest{
		Group: tc.TopicName, Topic: tc.TopicName, QueueOffset: qo, CommitLogOffset: clo, Resolution: res,
		FromCheck: req.GetSource() == grpcapi.TransactionSource_SOURCE_SERVER_CHECK, MsgID: req.GetMessageId(),
	})
	switch {
	case errors.Is(err, transaction.ErrHalfNotFound):
		// Issued here, but the half message is gone (retention) or is not
		// one of this topic's transactions.
		return answer(status(grpcapi.Code_INVALID_TRANSACTION_ID, err.Error()))
	case errors.Is(err, transaction.ErrNotMaster):
		return answer(status(grpcapi.Code_HA_NOT_AVAILABLE, err.Error()))
	case err != nil:
		s.log.Warn("grpc: end transaction", "topic", tc.TopicName, "msg_id", req.GetMessageId(), "err", err)
		return answer(status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error()))
	case dup:
		return answer(status(grpcapi.Code_OK, "transaction already decided"))
	}
	return answer(ok())
}
