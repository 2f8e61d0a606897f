package schedule

// RECALL_MESSAGE (370) over the 4.x remoting protocol: RocketMQ 5.3's
// RecallMessageProcessor, for the Java remoting producer
// (DefaultMQProducer.recallMessage) and a proxy in cluster mode.
//
// The request header is RecallMessageRequestHeader: producerGroup
// (optional), topic and recallHandle (required), plus the RPC header's
// bname, ns, nsd, oway and lo, which the broker ignores. The answer is
// RecallMessageResponseHeader (msgId: the recalled message's UNIQ_KEY)
// and, on every answer, MSG_REGION. The checks run in Java's order with
// Java's codes and remarks:
//
//   - a missing topic or recallHandle: SYSTEM_ERROR "the custom field
//     <topic> is null" (Java's header decoding);
//   - schedule.enabled=false: NO_PERMISSION "recall failed, operation is
//     forbidden" (Java's answer with recallMessageEnable=false);
//   - a slave: SLAVE_NOT_AVAILABLE "recall failed, broker service not
//     available";
//   - an unknown topic: TOPIC_NOT_EXIST "recall failed, the topic[T] not
//     exist";
//   - a handle that is not base64url of "v1 topic broker time id":
//     ILLEGAL_OPERATION "recall handle is invalid" (an empty one too);
//   - another topic's handle: ILLEGAL_OPERATION "recall failed, topic not
//     match"; another broker's: "recall failed, broker service not
//     available";
//   - a time not in (now, now + schedule.max_delay): ILLEGAL_OPERATION
//     "recall failed, timestamp invalid".
//
// Then Java writes a delete marker and answers SUCCESS whatever the
// handle names; Quiver recalls the held message (Service.Recall) and
// answers SUCCESS only when it found it, or recalled it before (a second
// recall is SUCCESS, as in Java). A handle that names no held message is
// refused with ILLEGAL_OPERATION "recall failed, no such scheduled
// message ...", so a made-up handle never recalls another message; one
// the wheel passed meanwhile with "recall failed, timestamp invalid".
// Java's remaining check, the broker's write permission, is off by
// default there (allowRecallWhenBrokerNotWriteable) and Quiver has no
// broker permission to check.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// Java's remarks (RecallMessageProcessor, RecallMessageHandle).
const (
	remarkRecallForbidden   = "recall failed, operation is forbidden"
	remarkRecallUnavailable = "recall failed, broker service not available"
	remarkRecallBadHandle   = "recall handle is invalid"
	remarkRecallTopic       = "recall failed, topic not match"
	remarkRecallTimestamp   = "recall failed, timestamp invalid"
	remarkRecallFailed      = "recall failed, execute error"
)

// msgRegion is the MSG_REGION Java adds to every recall answer (its
// default regionId, as the send answers carry).
const msgRegion = "DefaultRegion"

// recallHeader is RecallMessageRequestHeader's fields the broker reads.
type recallHeader struct {
	producerGroup string
	topic         string
	handle        string
}

// parseRecallHeader reads req's header as Java's decodeCommandCustomHeader
// does: topic and recallHandle must be present (empty is present),
// everything else is optional and unknown fields are ignored.
func parseRecallHeader(req *remoting.Command) (recallHeader, error) {
	e := remoting.ReadExt(req)
	h := recallHeader{producerGroup: e.OptString("producerGroup"), topic: e.String("topic"), handle: e.String("recallHandle")}
	return h, e.Err
}

// javaHandle is a handle as Java's RecallMessageHandle.decodeHandle reads
// it: fields kept as strings, the time read by the processor.
type javaHandle struct {
	topic, brokerName, timestamp, messageID string
}

// decodeJavaHandle decodes h as Java does: base64url (padding optional),
// split on single spaces with trailing empty fields dropped
// (String.split), "v1" and at least five fields. ok is false where Java
// throws "recall handle is invalid".
func decodeJavaHandle(h string) (javaHandle, bool) {
	if h == "" {
		return javaHandle{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(h, "="))
	if err != nil {
		return javaHandle{}, false
	}
	items := strings.Split(string(raw), " ")
	for len(items) > 1 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	if items[0] != handleVersion || len(items) < 5 {
		return javaHandle{}, false
	}
	return javaHandle{topic: items[1], brokerName: items[2], timestamp: items[3], messageID: items[4]}, true
}

// handleRecall serves RECALL_MESSAGE.
func (s *Service) handleRecall(ctx context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExt("MSG_REGION", msgRegion)
	refuse := func(code int32, remark string) *remoting.Command {
		resp.Code, resp.Remark = code, remark
		return resp
	}
	h, err := parseRecallHeader(req)
	if err != nil {
		return refuse(remoting.SystemError, err.Error())
	}
	if s.b.IsSlave() {
		return refuse(remoting.SlaveNotAvailable, remarkRecallUnavailable)
	}
	if _, ok := s.b.TopicConfig(h.topic); !ok {
		return refuse(remoting.TopicNotExist, "recall failed, the topic["+h.topic+"] not exist")
	}
	jh, ok := decodeJavaHandle(h.handle)
	if !ok {
		return refuse(remoting.IllegalOperation, remarkRecallBadHandle)
	}
	if jh.topic != h.topic {
		return refuse(remoting.IllegalOperation, remarkRecallTopic)
	}
	if jh.brokerName != s.b.Config().Name {
		return refuse(remoting.IllegalOperation, remarkRecallUnavailable)
	}
	ts, err := strconv.ParseInt(jh.timestamp, 10, 64) // NumberUtils.toLong(s, -1)
	if err != nil {
		ts = -1
	}
	if left := ts - s.now().UnixMilli(); left <= 0 || left >= s.cfg.MaxDelay.Milliseconds() {
		return refuse(remoting.IllegalOperation, remarkRecallTimestamp)
	}
	id, err := s.Recall(ctx, h.topic, h.handle)
	if err != nil {
		code, remark := s.recallRefusal(err)
		if code == remoting.SystemError {
			s.log.Warn("recall", "topic", h.topic, "producerGroup", h.producerGroup, "err", err)
		}
		return refuse(code, remark)
	}
	resp.SetExt("msgId", id)
	return resp
}

// recallRefusal is the answer to a Recall error once the header checks
// passed.
func (s *Service) recallRefusal(err error) (int32, string) {
	switch {
	case errors.Is(err, ErrRecallNotFound):
		return remoting.IllegalOperation, "recall failed, no such scheduled message: " + strings.TrimPrefix(err.Error(), "schedule: ")
	case errors.Is(err, ErrRecallTooLate):
		return remoting.IllegalOperation, remarkRecallTimestamp
	case errors.Is(err, ErrRecallInvalid):
		// A handle Java reads but Quiver's stricter decoding refuses
		// (an empty message id, a handle over 4 KiB).
		return remoting.IllegalOperation, remarkRecallBadHandle
	case errors.Is(err, ErrRecallUnavailable):
		if s.b.IsSlave() {
			return remoting.SlaveNotAvailable, remarkRecallUnavailable
		}
		return remoting.ServiceNotAvailable, remarkRecallUnavailable
	}
	return remoting.SystemError, fmt.Sprintf("%s: %v", remarkRecallFailed, err)
}

// registerRecallOff answers RECALL_MESSAGE on a broker whose schedule
// module is off (schedule.enabled=false): there is nothing to recall, as
// on a Java broker with recallMessageEnable=false. The header is read
// first, as Java decodes it before its checks.
func registerRecallOff(b *broker.Broker) {
	b.Router().Register(remoting.RecallMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.NoPermission, remarkRecallForbidden+" (schedule.enabled=false)")
		resp.SetExt("MSG_REGION", msgRegion)
		if _, err := parseRecallHeader(req); err != nil {
			resp.Code, resp.Remark = remoting.SystemError, err.Error()
		}
		return resp
	}, remoting.Mode{KeepsNothing: true})
}

// sendAnswerExt adds the recall handle to the send answer of a held timer
// message (broker.SendAnswerExt; Java's attachRecallHandle).
func (s *Service) sendAnswerExt(m *message.Ext) (string, string) {
	if m.Topic != broker.TimerTopic {
		return "", ""
	}
	if h := HandleOf(s.b.Config().Name, m); h != "" {
		return "recallHandle", h
	}
	return "", ""
}
