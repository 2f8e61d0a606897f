package grpc

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/pop"
)

const (
	defaultInvisible   = 30 * time.Second
	defaultLongPolling = 20 * time.Second
	maxLongPolling     = 30 * time.Second
	maxReceiveBatch    = 32
)

// systemProps are the stored properties a 5.x consumer sees as system
// properties, not user properties.
var systemProps = map[string]bool{
	message.PropertyKeys: true, message.PropertyTags: true, message.PropertyUniqKey: true,
	message.PropertyCluster: true, propShardingKey: true, propTraceCtx: true, propBornHost: true,
	message.PropertyTimerDeliverMS: true, message.PropertyTimerDelayMS: true,
	message.PropertyStartDeliverTime: true, message.PropertyDelayTimeLevel: true,
	message.PropertyTimerOut: true, message.PropertyTimerEnqueue: true, message.PropertyTimerDequeue: true,
	message.PropertyRealTopic: true, message.PropertyRealQueueID: true,
	message.PropertyMsgRegion: true, message.PropertyTraceSwitch: true,
	message.PropertyWaitStoreMsgOK: true, message.PropertyConsumeStartTime: true,
	message.PropertyMinOffset: true, message.PropertyMaxOffset: true,
	store.PropertyRecordCRC:  true,
	message.PropertyPriority: true,
	// transactions (transaction.go)
	message.PropertyProducerGroup: true, message.PropertyTransactionPrepared: true,
	message.PropertyCheckImmunityTime: true, message.PropertyTransactionCheckTimes: true,
	message.PropertyTranPreparedQueueOffset: true,
}

func popStatus(err error) *grpcapi.Status {
	switch {
	case errors.Is(err, pop.ErrInvalidHandle):
		return status(grpcapi.Code_INVALID_RECEIPT_HANDLE, err.Error())
	case errors.Is(err, pop.ErrTopicNotFound):
		return status(grpcapi.Code_TOPIC_NOT_FOUND, err.Error())
	case errors.Is(err, pop.ErrBadArgument):
		return status(grpcapi.Code_BAD_REQUEST, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status(grpcapi.Code_PROXY_TIMEOUT, err.Error())
	}
	return status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error())
}

// fifoGroup says whether group is consumed in order: the subscription
// group's consumeMessageOrderly (RocketMQ 5's switch, answered to the
// clients in their settings), or the client declared it FIFO in its
// Telemetry settings.
func (s *Server) fifoGroup(ctx context.Context, group string) bool {
	if gc, err := s.b.GroupConfig(group); err == nil && gc.ConsumeMessageOrderly {
		return true
	}
	id := clientID(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[id]; c != nil {
		return c.settings.GetSubscription().GetFifo()
	}
	return false
}

// toProto converts a stored message to what a 5.x consumer receives.
func (s *Server) toProto(r pop.Received, invisible time.Duration) *grpcapi.Message {
	m := r.Message
	body, err := m.UncompressedBody()
	if err != nil {
		// A body that does not inflate goes as stored: the client sees it
		// (and can forward it to the DLQ) rather than it coming back forever.
		s.log.Warn("grpc: receive: body does not inflate", "topic", m.Topic, "offset", r.Offset, "err", err)
		body = m.Body
	}
	props := m.Properties
	user := map[string]string{}
	for k, v := range props {
		if !systemProps[k] {
			user[k] = v
		}
	}
	id := props[message.PropertyUniqKey]
	if id == "" {
		id = message.OffsetMsgID(m.StoreHost, m.CommitLogOffset)
	}
	sp := &grpcapi.SystemProperties{
		Keys:              strings.Fields(props[message.PropertyKeys]),
		MessageId:         id,
		BodyDigest:        &grpcapi.Digest{Type: grpcapi.DigestType_CRC32, Checksum: strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)},
		BodyEncoding:      grpcapi.Encoding_IDENTITY,
		MessageType:       grpcapi.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(m.BornTimestamp)),
		BornHost:          m.BornHost.Addr().String(),
		StoreTimestamp:    timestamppb.New(time.UnixMilli(m.StoreTimestamp)),
		StoreHost:         m.StoreHost.String(),
		ReceiptHandle:     &r.Handle,
		QueueId:           r.Queue,
		QueueOffset:       &r.Offset,
		InvisibleDuration: durationpb.New(invisible),
		DeliveryAttempt:   &r.Attempt,
	}
	if h := props[propBornHost]; h != "" {
		sp.BornHost = h
	}
	if t, ok := props[message.PropertyTags]; ok {
		sp.Tag = &t
	}
	if g := props[propShardingKey]; g != "" {
		sp.MessageGroup = &g
		sp.MessageType = grpcapi.MessageType_FIFO
	}
	if at, err := strconv.ParseInt(props[message.PropertyTimerDeliverMS], 10, 64); err == nil {
		sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(at))
		sp.MessageType = grpcapi.MessageType_DELAY
	}
	if tc := props[propTraceCtx]; tc != "" {
		sp.TraceContext = &tc
	}
	if p, ok := props.Priority(); ok && sp.MessageType == grpcapi.MessageType_NORMAL {
		sp.Priority = &p
		sp.MessageType = grpcapi.MessageType_PRIORITY
	}
	return &grpcapi.Message{
		Topic:            &grpcapi.Resource{Name: m.Topic},
		UserProperties:   user,
		SystemProperties: sp,
		Body:             body,
	}
}

// ReceiveMessage long-polls the pop state for the group: a status first,
// then the messages, as RocketMQ's proxy answers.
func (s *Server) ReceiveMessage(req *grpcapi.ReceiveMessageRequest, stream grpcapi.MessagingService_ReceiveMessageServer) error {
	send := func(st *grpcapi.Status) error {
		return stream.Send(&grpcapi.ReceiveMessageResponse{Content: &grpcapi.ReceiveMessageResponse_Status{Status: st}})
	}
	if s.pop == nil {
		return send(notImplemented("ReceiveMessage"))
	}
	ctx := stream.Context()
	group := req.GetGroup().GetName()
	if group == "" {
		return send(status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, "consumer group is empty"))
	}
	if st := s.mixedGroup(group); st != nil {
		return send(st)
	}
	tc, st := s.topic(req.GetMessageQueue().GetTopic())
	if st != nil {
		return send(st)
	}
	var typ string
	switch req.GetFilterExpression().GetType() {
	case grpcapi.FilterType_SQL:
		typ = "SQL92"
	default:
		typ = "TAG"
	}
	expr := req.GetFilterExpression().GetExpression()
	if expr == "" {
		expr = "*"
	}
	matcher, err := s.b.CompileFilter(typ, expr)
	if err != nil {
		return send(status(grpcapi.Code_ILLEGAL_FILTER_EXPRESSION, err.Error()))
	}
	batch := int(req.GetBatchSize())
	if batch <= 0 || batch > maxReceiveBatch {
		batch = min(max(batch, 1), maxReceiveBatch)
	}
	invisible := defaultInvisible
	if d := req.GetInvisibleDuration(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() <= 0 || d.AsDuration() > pop.MaxInvisible {
			return send(status(grpcapi.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration out of range"))
		}
		invisible = d.AsDuration()
	}
	wait := defaultLongPolling
	if d := req.GetLongPollingTimeout(); d != nil && d.CheckValid() == nil {
		wait = min(max(d.AsDuration(), 0), maxLongPolling)
	}
	if dl, ok := ctx.Deadline(); ok {
		// Answer before the client gives up on the call.
		wait = min(wait, time.Until(dl)-500*time.Millisecond)
	}
	wait = max(wait, 0)
	if tc.Attributes[protocol.AttrMessageType] == protocol.MessageTypeLite {
		return s.liteReceive(stream, group, tc, batch, invisible, wait) // lite.go
	}
	if s.recvHeld.full() {
		return send(status(grpcapi.Code_TOO_MANY_REQUESTS, fmt.Sprintf("the endpoint holds grpc.receive_buffer (%d bytes) of messages for consumers that do not read: try again later", s.recvHeld.limit)))
	}
	// At most grpc.max_receive_waits receives wait at once (each waiting
	// one holds a goroutine and its stream); beyond them a receive only
	// looks and, finding nothing, answers TOO_MANY_REQUESTS at once, as
	// RocketMQ's broker answers POLLING_FULL when its long-polling queue
	// is full. The clients back off and receive again.
	polling := wait > 0 && s.recvWaits.take()
	full := wait > 0 && !polling
	if full {
		wait = 0
	}
	var got []pop.Received
	if s.fifoGroup(ctx, group) {
		got, err = s.receiveFIFO(ctx, group, tc.TopicName, matcher, batch, invisible, wait)
	} else {
		got, err = s.pop.ReceiveWait(ctx, group, tc.TopicName, matcher, batch, invisible, wait)
	}
	if polling {
		s.recvWaits.give()
	}
	if err != nil {
		return send(popStatus(err))
	}
	if len(got) == 0 {
		if full {
			return send(status(grpcapi.Code_TOO_MANY_REQUESTS, fmt.Sprintf("polling full: grpc.max_receive_waits (%d) receives are waiting for messages; try again later", s.recvWaits.limit)))
		}
		return send(status(grpcapi.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	return s.sendHeld(ctx, stream, send, got, invisible, nil) // held.go
}

// AckMessage acknowledges each entry's receipt handle.
func (s *Server) AckMessage(ctx context.Context, req *grpcapi.AckMessageRequest) (*grpcapi.AckMessageResponse, error) {
	if isLiteAck(req) {
		return s.liteAckMessage(req) // lite.go
	}
	if s.pop == nil {
		return &grpcapi.AckMessageResponse{Status: notImplemented("AckMessage")}, nil
	}
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	entries := make([]*grpcapi.AckMessageResultEntry, 0, len(req.GetEntries()))
	failed := 0
	handles := make([]string, len(req.GetEntries()))
	for i, e := range req.GetEntries() {
		handles[i] = e.GetReceiptHandle()
	}
	// One journal batch (one fsync) for the request's entries.
	errs := s.pop.AckMany(ctx, group, topic, handles)
	for i, e := range req.GetEntries() {
		st := ok()
		if errs[i] != nil {
			st = popStatus(errs[i])
			failed++
		}
		entries = append(entries, &grpcapi.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
	}
	st := ok()
	switch {
	case len(entries) == 1:
		st = entries[0].Status
	case failed > 0:
		st = status(grpcapi.Code_MULTIPLE_RESULTS, strconv.Itoa(failed)+" acks refused")
	}
	return &grpcapi.AckMessageResponse{Status: st, Entries: entries}, nil
}

// ChangeInvisibleDuration moves a delivery's invisible time and answers
// the handle that replaces the old one.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *grpcapi.ChangeInvisibleDurationRequest) (*grpcapi.ChangeInvisibleDurationResponse, error) {
	if req.LiteTopic != nil {
		return s.liteChangeInvisible(req) // lite.go
	}
	if s.pop == nil {
		return &grpcapi.ChangeInvisibleDurationResponse{Status: notImplemented("ChangeInvisibleDuration")}, nil
	}
	d := req.GetInvisibleDuration()
	if d == nil || d.CheckValid() != nil || d.AsDuration() < 0 {
		return &grpcapi.ChangeInvisibleDurationResponse{Status: status(grpcapi.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration missing or negative")}, nil //nolint:nilerr // the refusal is the status in the response
	}
	h, err := s.pop.ChangeInvisible(ctx, req.GetGroup().GetName(), req.GetTopic().GetName(), req.GetReceiptHandle(), d.AsDuration())
	if err != nil {
		st := popStatus(err)
		if errors.Is(err, pop.ErrBadArgument) {
			st.Code = grpcapi.Code_ILLEGAL_INVISIBLE_TIME
		}
		return &grpcapi.ChangeInvisibleDurationResponse{Status: st}, nil
	}
	return &grpcapi.ChangeInvisibleDurationResponse{Status: ok(), ReceiptHandle: h}, nil
}

// ForwardMessageToDeadLetterQueue moves a delivery to %DLQ%<group>.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *grpcapi.ForwardMessageToDeadLetterQueueRequest) (*grpcapi.ForwardMessageToDeadLetterQueueResponse, error) {
	if req.LiteTopic != nil {
		return s.liteForwardToDLQ(ctx, req) // lite.go
	}
	if s.pop == nil {
		return &grpcapi.ForwardMessageToDeadLetterQueueResponse{Status: notImplemented("ForwardMessageToDeadLetterQueue")}, nil
	}
	if err := s.pop.ForwardToDLQ(ctx, req.GetGroup().GetName(), req.GetTopic().GetName(), req.GetReceiptHandle()); err != nil {
		return &grpcapi.ForwardMessageToDeadLetterQueueResponse{Status: popStatus(err)}, nil
	}
	return &grpcapi.ForwardMessageToDeadLetterQueueResponse{Status: ok()}, nil
}

// fifoPoll is how often a FIFO receive looks again while it waits: the pop
// service's long poll serves unordered receives only.
const fifoPoll = 100 * time.Millisecond

// receiveFIFO is pop's ReceiveFIFO, retried until a message is handed out,
// wait passes or ctx ends, so FIFO consumers long-poll too.
func (s *Server) receiveFIFO(ctx context.Context, group, topic string, m filter.Matcher, batch int, invisible, wait time.Duration) ([]pop.Received, error) {
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(fifoPoll)
	defer tick.Stop()
	for {
		got, err := s.pop.ReceiveFIFO(ctx, group, topic, m, batch, invisible)
		if err != nil || len(got) > 0 || !time.Now().Before(deadline) {
			return got, err
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-s.done:
			return nil, nil
		case <-tick.C:
		}
	}
}
