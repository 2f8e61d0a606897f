package grpc

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// Java MessageConst names the 5.x proxy sets that core/message lacks.
const (
	propShardingKey = "__SHARDINGKEY" // message group (MessageConst.PROPERTY_SHARDING_KEY)
	propTraceCtx    = "TRACE_CONTEXT"
	propBornHost    = "__BORNHOST"
)

// reserved are the property names a client may not set as user properties:
// the endpoint derives them from system properties, and the broker's
// modules act on them.
var reserved = map[string]bool{
	message.PropertyKeys: true, message.PropertyTags: true, message.PropertyUniqKey: true,
	message.PropertyDelayTimeLevel: true, message.PropertyTimerDeliverMS: true,
	message.PropertyTimerDelayMS: true, message.PropertyStartDeliverTime: true,
	message.PropertyTransactionPrepared: true, message.PropertyRealTopic: true,
	message.PropertyRealQueueID: true, message.PropertyRetryTopic: true,
	message.PropertyCluster: true, message.PropertyShardingKey: true, propShardingKey: true,
	message.PropertyMaxReconsumeTimes: true, message.PropertyReconsumeTime: true,
	message.PropertyTranPreparedQueueOffset: true, message.PropertyOriginMessageID: true,
	message.PropertyWaitStoreMsgOK: true, message.PropertyCheckImmunityTime: true,
	message.PropertyProducerGroup: true, propBornHost: true, propTraceCtx: true,
	message.PropertyPriority: true,
}

// sendError is a per-message refusal.
type sendError struct {
	code grpcapi.Code
	msg  string
}

func (e *sendError) Error() string { return e.msg }

func refuse(c grpcapi.Code, format string, args ...any) *sendError {
	return &sendError{code: c, msg: fmt.Sprintf(format, args...)}
}

// maxGunzip bounds a gzip body once inflated (the broker's message limit).
func (s *Server) gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	limit := int64(s.b.Config().MaxMessageSize)
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, refuse(grpcapi.Code_MESSAGE_BODY_TOO_LARGE, "the inflated message body is over the limit %d", limit)
	}
	return out, nil
}

// build turns a 5.x message into the broker's, with its properties named as
// RocketMQ's proxy names them, so 4.x consumers read the same tags, keys
// and message id.
func (s *Server) build(m *grpcapi.Message, born netip.AddrPort) (*message.Ext, *sendError) {
	tc, st := s.topic(m.GetTopic())
	if st != nil {
		return nil, &sendError{code: st.Code, msg: st.Message}
	}
	if tc.Perm&protocol.PermWrite == 0 {
		return nil, refuse(grpcapi.Code_FORBIDDEN, "topic %s is not writable", tc.TopicName)
	}
	sp := m.GetSystemProperties()
	if sp == nil {
		return nil, refuse(grpcapi.Code_BAD_REQUEST, "message has no system properties")
	}
	if sp.GetMessageId() == "" {
		return nil, refuse(grpcapi.Code_ILLEGAL_MESSAGE_ID, "message id is empty")
	}
	body := m.GetBody()
	switch sp.GetBodyEncoding() {
	case grpcapi.Encoding_GZIP:
		var err error
		if body, err = s.gunzip(body); err != nil {
			var se *sendError
			if errors.As(err, &se) {
				return nil, se
			}
			return nil, refuse(grpcapi.Code_MESSAGE_CORRUPTED, "gzip body: %v", err)
		}
	case grpcapi.Encoding_IDENTITY, grpcapi.Encoding_ENCODING_UNSPECIFIED:
	default:
		return nil, refuse(grpcapi.Code_BAD_REQUEST, "unknown body encoding %v", sp.GetBodyEncoding())
	}
	if len(body) == 0 {
		return nil, refuse(grpcapi.Code_MESSAGE_BODY_EMPTY, "message body is empty")
	}
	if limit := int(s.b.Config().MaxMessageSize); len(body) > limit {
		return nil, refuse(grpcapi.Code_MESSAGE_BODY_TOO_LARGE, "the message body size %d is over the limit %d", len(body), limit)
	}
	props := make(message.Properties, len(m.GetUserProperties())+6)
	for k, v := range m.GetUserProperties() {
		if k == "" || reserved[k] {
			return nil, refuse(grpcapi.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property key %q is reserved", k)
		}
		props[k] = v
	}
	props[message.PropertyUniqKey] = sp.GetMessageId()
	if sp.Tag != nil {
		tag := sp.GetTag()
		if strings.TrimSpace(tag) == "" || strings.Contains(tag, "|") {
			return nil, refuse(grpcapi.Code_ILLEGAL_MESSAGE_TAG, "tag %q is blank or has '|'", tag)
		}
		props[message.PropertyTags] = tag
	}
	if keys := sp.GetKeys(); len(keys) > 0 {
		for _, k := range keys {
			if strings.TrimSpace(k) == "" {
				return nil, refuse(grpcapi.Code_ILLEGAL_MESSAGE_KEY, "a message key is blank")
			}
		}
		props[message.PropertyKeys] = strings.Join(keys, " ")
	}
	if tc := sp.GetTraceContext(); tc != "" {
		props[propTraceCtx] = tc
	}
	if h := sp.GetBornHost(); h != "" {
		props[propBornHost] = h
	}
	queues := tc.WriteQueueNums
	if queues <= 0 {
		return nil, refuse(grpcapi.Code_FORBIDDEN, "topic %s has no write queues", tc.TopicName)
	}
	if se := s.liteBuild(tc, sp, props); se != nil { // lite.go
		return nil, se
	}
	if se := checkMessageType(tc, sp); se != nil { // msgtype.go
		return nil, se
	}
	if sp.Priority != nil {
		switch sp.GetMessageType() {
		case grpcapi.MessageType_FIFO, grpcapi.MessageType_DELAY, grpcapi.MessageType_TRANSACTION, grpcapi.MessageType_LITE:
			return nil, refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a %v message has no priority", sp.GetMessageType())
		}
	}
	var queue int32
	switch sp.GetMessageType() {
	case grpcapi.MessageType_PRIORITY:
		if sp.Priority == nil {
			return nil, refuse(grpcapi.Code_BAD_REQUEST, "a priority message needs a priority")
		}
		if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
			return nil, refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a priority message has no message group or delivery timestamp")
		}
		q, se := priorityQueue(s, tc, sp.GetPriority(), props)
		if se != nil {
			return nil, se
		}
		queue = q
	case grpcapi.MessageType_FIFO:
		g := sp.GetMessageGroup()
		if g == "" {
			return nil, refuse(grpcapi.Code_ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
		}
		props[propShardingKey] = g
		h := fnv.New32a()
		h.Write([]byte(g))
		queue = int32(h.Sum32() % uint32(queues))
	case grpcapi.MessageType_DELAY:
		at := sp.GetDeliveryTimestamp()
		if at == nil || at.CheckValid() != nil {
			return nil, refuse(grpcapi.Code_ILLEGAL_DELIVERY_TIME, "a delay message needs a delivery timestamp")
		}
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(at.AsTime().UnixMilli(), 10)
		queue = s.nextQueue(queues)
	case grpcapi.MessageType_NORMAL, grpcapi.MessageType_MESSAGE_TYPE_UNSPECIFIED:
		if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
			return nil, refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a normal message has no message group or delivery timestamp")
		}
		queue = s.nextQueue(queues)
		if sp.Priority != nil { // priority 0 from the official clients: msgtype.go
			q, se := priorityQueue(s, tc, sp.GetPriority(), props)
			if se != nil {
				return nil, se
			}
			queue = q
		}
	case grpcapi.MessageType_LITE:
		queue = liteQueue(sp.GetLiteTopic(), queues) // lite.go
	case grpcapi.MessageType_TRANSACTION:
		if se := s.txSend(sp, tc.TopicName, props); se != nil { // transaction.go
			return nil, se
		}
		queue = s.nextQueue(queues)
	default:
		return nil, refuse(grpcapi.Code_BAD_REQUEST, "unknown message type %v", sp.GetMessageType())
	}
	props[message.PropertyCluster] = s.b.Config().Cluster
	if len(props.Encode()) > message.MaxPropertiesLength {
		return nil, refuse(grpcapi.Code_MESSAGE_PROPERTIES_TOO_LARGE, "message properties are over %d bytes", message.MaxPropertiesLength)
	}
	bornAt := time.Now().UnixMilli()
	if t := sp.GetBornTimestamp(); t != nil && t.CheckValid() == nil {
		bornAt = t.AsTime().UnixMilli()
	}
	return &message.Ext{
		Message:       message.Message{Topic: tc.TopicName, Properties: props, Body: body},
		QueueID:       queue,
		BornTimestamp: bornAt,
		BornHost:      born,
	}, nil
}

func (s *Server) nextQueue(n int32) int32 { return int32(s.rr.Add(1) % uint64(n)) }

func peerAddr(ctx context.Context) netip.AddrPort {
	if p, found := peer.FromContext(ctx); found && p.Addr != nil {
		if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	return netip.AddrPort{}
}

// SendMessage stores each message through the broker's put path (hooks:
// timers for delivery timestamps) and answers one entry per message.
func (s *Server) SendMessage(ctx context.Context, req *grpcapi.SendMessageRequest) (*grpcapi.SendMessageResponse, error) {
	msgs := req.GetMessages()
	if n := refusedCount(req); n > broker.MaxBatchMessages { // codec.go: counted, not decoded
		return &grpcapi.SendMessageResponse{Status: status(grpcapi.Code_PAYLOAD_TOO_LARGE,
			fmt.Sprintf("%d messages in one SendMessage are over the limit %d (as SEND_BATCH_MESSAGE); nothing was stored", n, broker.MaxBatchMessages))}, nil
	}
	if len(msgs) == 0 {
		return &grpcapi.SendMessageResponse{Status: status(grpcapi.Code_BAD_REQUEST, "no messages")}, nil
	}
	if len(msgs) > broker.MaxBatchMessages {
		return &grpcapi.SendMessageResponse{Status: status(grpcapi.Code_PAYLOAD_TOO_LARGE,
			fmt.Sprintf("%d messages in one SendMessage are over the limit %d (as SEND_BATCH_MESSAGE); nothing was stored", len(msgs), broker.MaxBatchMessages))}, nil
	}
	born := peerAddr(ctx)
	entries := make([]*grpcapi.SendResultEntry, len(msgs))
	exts := make([]*message.Ext, len(msgs))
	errs := make([]*sendError, len(msgs))
	// Every message is built (bodies inflated) before any is stored, so
	// that a request over grpc.max_send_bytes stores nothing.
	limit := int64(s.cfg.MaxSendBytes)
	var total int64
	for _, m := range msgs {
		if total += int64(len(m.GetBody())); total > limit {
			return tooLarge(total, limit), nil
		}
	}
	total = 0
	for i, m := range msgs {
		entries[i] = &grpcapi.SendResultEntry{MessageId: m.GetSystemProperties().GetMessageId()}
		exts[i], errs[i] = s.build(m, born)
		if exts[i] != nil {
			if total += int64(len(exts[i].Body)); total > limit {
				return tooLarge(total, limit), nil
			}
		}
	}
	failed := 0
	for i, m := range msgs {
		e, ext, se := entries[i], exts[i], errs[i]
		exts[i] = nil // stored: its body is the store's
		if se == nil {
			pos, err := s.put(ctx, ext) // lite.go: lite messages through the lite index
			if err != nil {
				se = s.putError(m, ext, err)
			} else {
				e.Offset = pos[0].QueueOffset
				e.RecallHandle = s.recallHandle(ext) // a timer held: recall.go
				e.TransactionId = s.txSent(ctx, ext, pos[0])
			}
		}
		if se != nil {
			failed++
			e.Status = status(se.code, se.msg)
			continue
		}
		e.Status = ok()
	}
	st := ok()
	switch {
	case len(msgs) == 1:
		st = entries[0].Status
	case failed > 0:
		st = status(grpcapi.Code_MULTIPLE_RESULTS, fmt.Sprintf("%d of %d messages refused", failed, len(msgs)))
	}
	return &grpcapi.SendMessageResponse{Status: st, Entries: entries}, nil
}

// tooLarge refuses a whole SendMessage over grpc.max_send_bytes.
func tooLarge(total, limit int64) *grpcapi.SendMessageResponse {
	return &grpcapi.SendMessageResponse{Status: status(grpcapi.Code_PAYLOAD_TOO_LARGE,
		fmt.Sprintf("the message bodies of one SendMessage are over grpc.max_send_bytes %d (%d bytes so far, inflated); nothing was stored", limit, total))}
}

// putError maps a refused put to a status: a broker module's rejection
// (a delivery time past schedule.max_delay, a system topic) and a record
// the store refuses as too large (MESSAGE_BODY_TOO_LARGE: not worth a
// retry, as the 4.x send answers MESSAGE_ILLEGAL) are the client's error;
// anything else is the server's, and logged.
func (s *Server) putError(m *grpcapi.Message, ext *message.Ext, err error) *sendError {
	if se := liteSendError(err); se != nil { // lite.go
		return se
	}
	var rej *broker.RejectError
	if errors.As(err, &rej) {
		if m.GetSystemProperties().GetMessageType() == grpcapi.MessageType_DELAY {
			return refuse(grpcapi.Code_ILLEGAL_DELIVERY_TIME, "%s", rej.Reason)
		}
		return refuse(grpcapi.Code_BAD_REQUEST, "%s", rej.Reason)
	}
	if errors.Is(err, store.ErrTooLarge) {
		return refuse(grpcapi.Code_MESSAGE_BODY_TOO_LARGE, "the message is over the limit: %v", err)
	}
	s.log.Warn("grpc: send", "topic", ext.Topic, "err", err)
	return refuse(grpcapi.Code_INTERNAL_SERVER_ERROR, "%v", err)
}

// priorityQueue stores a 5.x message's priority as RocketMQ's proxy does
// (the _SYS_MSG_PRIORITY_ property, which 4.x clients read and set too)
// and picks its queue: on a priority topic the queue of its level
// (protocol.PriorityQueue), elsewhere the next queue, as for a normal
// message, since only priority topics are consumed by priority.
func priorityQueue(s *Server, tc *protocol.TopicConfig, p int32, props message.Properties) (int32, *sendError) {
	if p < 0 {
		return 0, refuse(grpcapi.Code_BAD_REQUEST, "priority %d is negative", p)
	}
	props[message.PropertyPriority] = strconv.FormatInt(int64(p), 10)
	if tc.IsPriority() {
		return protocol.PriorityQueue(p, tc.WriteQueueNums), nil
	}
	return s.nextQueue(tc.WriteQueueNums), nil
}
