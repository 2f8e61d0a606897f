package grpc

import (
	"context"
	"errors"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/modules/schedule"
)

// recallHandle is the recall handle SendMessage answers for a message
// the put held as a timer (modules/schedule: Java's RecallMessageHandle
// format, so the 5.x clients' recallMessage works); "" for anything else.
func (s *Server) recallHandle(ext *message.Ext) string {
	if s.sched == nil {
		return ""
	}
	return schedule.HandleOf(s.b.Config().Name, ext)
}

// RecallMessage recalls a timer message by the handle its send was
// answered with (RocketMQ 5.3's RecallMessageActivity). The handle's
// topic must be the request's; a handle that names no held message of
// that topic — made up, already delivered or already due — is refused
// with MESSAGE_NOT_FOUND, a malformed one or another broker's with
// BAD_REQUEST. Authorization: PUB on the topic (auth.go).
func (s *Server) RecallMessage(ctx context.Context, req *grpcapi.RecallMessageRequest) (*grpcapi.RecallMessageResponse, error) {
	if s.sched == nil {
		return &grpcapi.RecallMessageResponse{Status: status(grpcapi.Code_NOT_IMPLEMENTED, "scheduled messages are off on this broker (schedule.enabled=false): nothing to recall")}, nil
	}
	tc, st := s.topic(req.GetTopic())
	if st != nil {
		return &grpcapi.RecallMessageResponse{Status: st}, nil
	}
	if req.GetRecallHandle() == "" {
		return &grpcapi.RecallMessageResponse{Status: status(grpcapi.Code_BAD_REQUEST, "recall handle is empty")}, nil
	}
	id, err := s.sched.Recall(ctx, tc.TopicName, req.GetRecallHandle())
	if err != nil {
		return &grpcapi.RecallMessageResponse{Status: s.recallStatus(tc.TopicName, err)}, nil
	}
	return &grpcapi.RecallMessageResponse{Status: ok(), MessageId: id}, nil
}

func (s *Server) recallStatus(topic string, err error) *grpcapi.Status {
	switch {
	case errors.Is(err, schedule.ErrRecallInvalid):
		return status(grpcapi.Code_BAD_REQUEST, err.Error())
	case errors.Is(err, schedule.ErrRecallNotFound), errors.Is(err, schedule.ErrRecallTooLate):
		return status(grpcapi.Code_MESSAGE_NOT_FOUND, err.Error())
	case errors.Is(err, schedule.ErrRecallUnavailable):
		return status(grpcapi.Code_HA_NOT_AVAILABLE, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status(grpcapi.Code_PROXY_TIMEOUT, "recall: "+err.Error())
	}
	s.log.Warn("grpc: recall", "topic", topic, "err", err)
	return status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error())
}
