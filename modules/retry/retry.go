// Package retry owns what happens to messages consumers fail on:
// CONSUMER_SEND_MSG_BACK puts them in %RETRY%<group> with a back-off delay
// level of 3+reconsumeTimes (the schedule module applies it), or in
// %DLQ%<group> once they ran out of attempts. It also serves the dead-letter
// tools (RESEND_DLQ, a Quiver request code) and rewinding a group's offsets
// by time (INVOKE_BROKER_TO_RESET_OFFSET, telling online consumers with
// RESET_CONSUMER_CLIENT_OFFSET).
package retry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// Quiver-specific request codes (outside RocketMQ's range).
const (
	// ResendDLQ re-delivers dead letters of a group to %RETRY%<group>:
	// ext group, and msgId (UNIQ_KEY, ORIGIN_MESSAGE_ID or offsetMsgId) or
	// all=true. The answer's body is a ResendResult.
	ResendDLQ = remoting.ResendDLQ
)

// Service registers the retry processors on a broker.
type Service struct {
	cfg    *Config
	b      *broker.Broker
	log    *slog.Logger
	fences *fences
	// afterResetCommit, when set (tests), runs after resetOffsets commits
	// a queue's reset offset.
	afterResetCommit func(queue int32)
}

// New registers CONSUMER_SEND_MSG_BACK, RESEND_DLQ and
// INVOKE_BROKER_TO_RESET_OFFSET on b's router.
func New(cfg *Config, b *broker.Broker) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, b: b, log: b.Logger().With("component", "retry"), fences: newFences()}
	r := b.Router()
	r.Use(s.intercept, remoting.Mode{NoExtMap: true}) // reads the extFields of no send
	if cfg.Enabled {
		r.Register(remoting.ConsumerSendMsgBack, s.handleSendBack)
	} else {
		r.Register(remoting.ConsumerSendMsgBack, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
			return remoting.Errorf(req, remoting.SystemError, "retry is disabled on this broker (retry.enabled=false); send the message back as a normal message")
		})
	}
	r.Register(ResendDLQ, s.handleResend)
	r.Register(remoting.InvokeBrokerToResetOffset, s.handleResetOffset)
	return s, nil
}

// RetryLevel is the delay level of a message's next attempt: the
// requested one, else 3+reconsumeTimes (10 s, 30 s, 1 m, ... by default).
func RetryLevel(requested, reconsumeTimes int32) int32 {
	if requested > 0 {
		return requested
	}
	return 3 + reconsumeTimes
}

// ToDLQ reports whether a message consumed reconsumeTimes times goes to
// the dead-letter queue rather than back to the retry topic.
func ToDLQ(reconsumeTimes, maxReconsumeTimes, requestedLevel int32) bool {
	return reconsumeTimes >= maxReconsumeTimes || requestedLevel < 0
}

// handleSendBack stores a message a consumer failed to process in its
// group's retry topic (or DLQ once it ran out of attempts), as Java's
// SendMessageProcessor.consumerSendMsgBack does.
func (s *Service) handleSendBack(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group := e.String("group")
	off := e.Int64("offset")
	delay := e.OptInt32("delayLevel", 0)
	maxRe := e.OptInt32("maxReconsumeTimes", 16)
	origin := e.OptString("originMsgId")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	gc, err := s.b.GroupConfig(group)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if gc.RetryQueueNums <= 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	rec, err := s.b.Lookup(ctx, off)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("look back message by offset %d: %v", off, err))
	}
	old, _, err := message.DecodeStored(rec)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	props := old.Properties.Clone()
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = old.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		if origin == "" {
			origin = old.UniqKey()
		}
		props[message.PropertyOriginMessageID] = origin
	}
	var topic string
	var queue int32
	if ToDLQ(old.ReconsumeTimes, maxRe, delay) {
		topic, err = s.b.EnsureDLQ(group)
		delete(props, message.PropertyDelayTimeLevel)
	} else {
		topic, err = s.b.EnsureRetryTopic(group, gc.RetryQueueNums)
		props[message.PropertyDelayTimeLevel] = strconv.Itoa(int(RetryLevel(delay, old.ReconsumeTimes)))
		queue = int32(uint32(old.QueueOffset) % uint32(gc.RetryQueueNums))
		// A retry topic made a PRIORITY topic keeps the levels: a retried
		// message goes to the queue of its priority there, so a retried
		// high one is not behind every retried low one (RocketMQ's
		// inversion in retry queues); the pull path serves it first.
		if p, ok := props.Priority(); ok && err == nil {
			if tc, found := s.b.TopicConfig(topic); found && tc.IsPriority() {
				queue = protocol.PriorityQueue(p, tc.WriteQueueNums)
			}
		}
	}
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	m := &message.Ext{
		Message: message.Message{Topic: topic, Flag: old.Flag, Properties: props, Body: old.Body},
		QueueID: queue, SysFlag: old.SysFlag, BornTimestamp: old.BornTimestamp, BornHost: old.BornHost,
		ReconsumeTimes: old.ReconsumeTimes + 1,
	}
	if _, err := s.b.Put(ctx, []*message.Ext{m}); err != nil {
		return s.b.ErrorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}
