package grpc

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
)

// The offset RPCs of the 5.x lite/pull consumers (RocketMQ 5's proxy
// OffsetActivity) work on the broker's consumer-offset table and store,
// the ones the 4.x UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET,
// GET_MIN_OFFSET/GET_MAX_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP handlers
// use: an offset a 5.x client commits is what a 4.x query answers, and
// the other way round.

// queueOf checks a request's message queue: the topic exists and the id
// names one of its queues.
func (s *Server) queueOf(mq *grpcapi.MessageQueue) (*protocol.TopicConfig, store.Queue, *grpcapi.Status) {
	tc, st := s.topic(mq.GetTopic())
	if st != nil {
		return nil, store.Queue{}, st
	}
	id := mq.GetId()
	if n := max(tc.ReadQueueNums, tc.WriteQueueNums); id < 0 || id >= n {
		return nil, store.Queue{}, status(grpcapi.Code_BAD_REQUEST, fmt.Sprintf("queue id %d of topic %s is illegal: it has queues 0..%d", id, tc.TopicName, n-1))
	}
	return tc, store.Queue{Topic: tc.TopicName, ID: id}, nil
}

// groupOf checks a request's consumer group name.
func groupOf(r *grpcapi.Resource) (string, *grpcapi.Status) {
	g := r.GetName()
	if g == "" {
		return "", status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
	}
	if err := protocol.ValidateGroup(g); err != nil {
		return "", status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, err.Error())
	}
	return g, nil
}

// popHeld refuses a group that live 5.x SimpleConsumers or PushConsumers
// consume (the claim of groups.go): their pop state commits the group's
// offsets, and an offset consumer of the group would consume its messages
// a second time. 5.x pull consumers are offset consumers like 4.x ones
// and share a group's offsets with them.
func (s *Server) popHeld(group string) *grpcapi.Status {
	holder, held := s.claim(group)
	if !held {
		return nil
	}
	return status(grpcapi.Code_FORBIDDEN, fmt.Sprintf("consumer group %s is consumed by RocketMQ 5 SimpleConsumers or PushConsumers (%s) on this broker; pull consumers cannot share it: use another group, or stop them first", group, holder))
}

// UpdateOffset commits the group's offset of one queue (0..the queue's
// next offset to write).
func (s *Server) UpdateOffset(ctx context.Context, req *grpcapi.UpdateOffsetRequest) (*grpcapi.UpdateOffsetResponse, error) {
	group, st := groupOf(req.GetGroup())
	if st != nil {
		return &grpcapi.UpdateOffsetResponse{Status: st}, nil
	}
	if st := s.popHeld(group); st != nil {
		return &grpcapi.UpdateOffsetResponse{Status: st}, nil
	}
	_, q, st := s.queueOf(req.GetMessageQueue())
	if st != nil {
		return &grpcapi.UpdateOffsetResponse{Status: st}, nil
	}
	_, hi, err := s.b.Store().Offsets(q)
	if err != nil {
		return &grpcapi.UpdateOffsetResponse{Status: status(grpcapi.Code_INTERNAL_SERVER_ERROR, fmt.Sprintf("offsets of %s: %v", q, err))}, nil
	}
	if off := req.GetOffset(); off < 0 || off > hi {
		// Stored, an offset past the end would come back to the consumer
		// as where to resume.
		return &grpcapi.UpdateOffsetResponse{Status: status(grpcapi.Code_ILLEGAL_OFFSET, fmt.Sprintf("offset %d of %s is outside 0..%d", off, q, hi))}, nil
	}
	s.b.CommitOffset(group, q.Topic, q.ID, req.GetOffset())
	return &grpcapi.UpdateOffsetResponse{Status: ok()}, nil
}

// GetOffset answers the group's committed offset of one queue, as
// QUERY_CONSUMER_OFFSET does: a group with none is answered 0 while the
// queue still starts at 0, OFFSET_NOT_FOUND otherwise.
func (s *Server) GetOffset(ctx context.Context, req *grpcapi.GetOffsetRequest) (*grpcapi.GetOffsetResponse, error) {
	group, st := groupOf(req.GetGroup())
	if st != nil {
		return &grpcapi.GetOffsetResponse{Status: st}, nil
	}
	_, q, st := s.queueOf(req.GetMessageQueue())
	if st != nil {
		return &grpcapi.GetOffsetResponse{Status: st}, nil
	}
	if off, found := s.b.QueryOffset(group, q.Topic, q.ID); found {
		return &grpcapi.GetOffsetResponse{Status: ok(), Offset: off}, nil
	}
	if lo, _, err := s.b.Store().Offsets(q); err == nil && lo <= 0 {
		return &grpcapi.GetOffsetResponse{Status: ok(), Offset: 0}, nil
	}
	return &grpcapi.GetOffsetResponse{Status: status(grpcapi.Code_OFFSET_NOT_FOUND, fmt.Sprintf("group %s has no offset of %s", group, q))}, nil
}

// QueryOffset answers a queue's first offset (BEGINNING), its next offset
// to write (END), or the offset of the first message stored at or after
// a time (TIMESTAMP; END when none is).
func (s *Server) QueryOffset(ctx context.Context, req *grpcapi.QueryOffsetRequest) (*grpcapi.QueryOffsetResponse, error) {
	_, q, st := s.queueOf(req.GetMessageQueue())
	if st != nil {
		return &grpcapi.QueryOffsetResponse{Status: st}, nil
	}
	fail := func(err error) (*grpcapi.QueryOffsetResponse, error) {
		return &grpcapi.QueryOffsetResponse{Status: status(grpcapi.Code_INTERNAL_SERVER_ERROR, fmt.Sprintf("offsets of %s: %v", q, err))}, nil
	}
	var off int64
	switch req.GetQueryOffsetPolicy() {
	case grpcapi.QueryOffsetPolicy_BEGINNING, grpcapi.QueryOffsetPolicy_END:
		lo, hi, err := s.b.Store().Offsets(q)
		if err != nil {
			return fail(err)
		}
		off = lo
		if req.GetQueryOffsetPolicy() == grpcapi.QueryOffsetPolicy_END {
			off = hi
		}
	case grpcapi.QueryOffsetPolicy_TIMESTAMP:
		ts := req.GetTimestamp()
		if ts == nil {
			return &grpcapi.QueryOffsetResponse{Status: status(grpcapi.Code_BAD_REQUEST, "timestamp is required for the TIMESTAMP query offset policy")}, nil
		}
		if err := ts.CheckValid(); err != nil {
			return &grpcapi.QueryOffsetResponse{Status: status(grpcapi.Code_BAD_REQUEST, "timestamp: "+err.Error())}, nil //nolint:nilerr // the refusal is the status in the response
		}
		o, err := s.b.Store().OffsetByTime(ctx, q, ts.AsTime().UnixMilli())
		if err != nil {
			return fail(err)
		}
		off = o
	default:
		return &grpcapi.QueryOffsetResponse{Status: status(grpcapi.Code_BAD_REQUEST, fmt.Sprintf("unsupported query offset policy %v", req.GetQueryOffsetPolicy()))}, nil
	}
	return &grpcapi.QueryOffsetResponse{Status: ok(), Offset: off}, nil
}
