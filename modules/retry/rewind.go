package retry

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// QueueOffset is one queue's reset offset.
type QueueOffset struct {
	Topic      string
	BrokerName string
	QueueID    int32
	Offset     int64
}

// EncodeOffsetTable encodes {"offsetTable":{<MessageQueue>:offset,...}}
// the way Java's fastjson does (object keys), which the Go and Java clients
// parse in RESET_CONSUMER_CLIENT_OFFSET.
func EncodeOffsetTable(qs []QueueOffset) []byte {
	var b strings.Builder
	b.WriteString(`{"offsetTable":{`)
	for i, q := range qs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"brokerName":%s,"queueId":%d,"topic":%s}:%d`, strconv.Quote(q.BrokerName), q.QueueID, strconv.Quote(q.Topic), q.Offset)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// ResetOffsets rewinds (or, with force, moves either way) group's offsets
// on topic to the first message stored at or after ts (epoch ms; -1 = the
// end of each queue), commits and persists them, and tells the group's
// online consumers. It returns the offsets set and how many consumers were
// told.
func (s *Service) ResetOffsets(ctx context.Context, topic, group string, ts int64, force bool) ([]QueueOffset, int, error) {
	return s.resetOffsets(ctx, topic, group, ts, force, -1, -1)
}

// offsetRangeError is a queue-level reset to an offset outside the queue.
type offsetRangeError struct{ offset, min, max int64 }

func (e *offsetRangeError) Error() string {
	return fmt.Sprintf("Target offset %d not in consume queue range [%d-%d]", e.offset, e.min, e.max)
}

// resetOffsets is ResetOffsets of every queue (queue < 0) or of one queue,
// to offset when it is not -1 (checked against the queue's range as Java's
// resetOffsetInner does) and else to the first message at or after ts.
func (s *Service) resetOffsets(ctx context.Context, topic, group string, ts int64, force bool, queue int32, offset int64) ([]QueueOffset, int, error) {
	tc, ok := s.b.TopicConfig(topic)
	if !ok {
		return nil, 0, fmt.Errorf("retry: topic[%s] not exist", topic)
	}
	first, last := int32(0), tc.ReadQueueNums
	if queue >= 0 {
		first, last = queue, queue+1
	}
	name := s.b.Config().Name
	out := make([]QueueOffset, 0, last-first)
	// Online consumers keep committing their old offsets until they apply
	// the reset: each queue's fence goes up before its reset offset is
	// committed, or a stale commit landing in between would undo it.
	peers := s.b.ConsumerPeers(group)
	for id := first; id < last; id++ {
		q := store.Queue{Topic: topic, ID: id}
		var off int64
		var err error
		switch {
		case queue >= 0 && offset != -1:
			lo, hi, oerr := s.b.Store().Offsets(q)
			if oerr != nil {
				return nil, 0, fmt.Errorf("retry: offsets of %s: %w", q, oerr)
			}
			if lo >= 0 && offset < lo || offset > hi+1 {
				return nil, 0, &offsetRangeError{offset: offset, min: lo, max: hi}
			}
			off = offset
		case ts < 0:
			_, off, err = s.b.Store().Offsets(q)
		default:
			off, err = s.b.Store().OffsetByTime(ctx, q, ts)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("retry: offset of %s at %d: %w", q, ts, err)
		}
		if cur, ok := s.b.QueryOffset(group, topic, id); ok && !force && cur < off {
			off = cur
		}
		if len(peers) > 0 {
			s.fences.set(fenceKey{group, topic, id}, off)
		}
		s.b.CommitOffset(group, topic, id, off)
		if s.afterResetCommit != nil {
			s.afterResetCommit(id)
		}
		out = append(out, QueueOffset{Topic: topic, BrokerName: name, QueueID: id, Offset: off})
	}
	if err := s.b.FlushOffsets(); err != nil {
		return nil, 0, err
	}
	body := EncodeOffsetTable(out)
	told := 0
	ext := map[string]string{"topic": topic, "group": group, "timestamp": strconv.FormatInt(ts, 10), "isForce": strconv.FormatBool(force)}
	for _, p := range peers {
		req := remoting.NewRequest(remoting.ResetConsumerClientOffset, ext, body)
		if err := p.InvokeOneway(ctx, req); err != nil {
			s.log.Warn("tell consumer to reset offsets", "group", group, "remote", p.RemoteAddr(), "err", err)
			continue
		}
		told++
	}
	s.log.Info("consumer offsets reset", "group", group, "topic", topic, "timestamp", ts, "force", force, "consumers_told", told)
	return out, told, nil
}

// handleResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (222): ext topic,
// group, timestamp (ms, -1 for the end), isForce, and RocketMQ 5's optional
// queueId and offset (one queue, to that offset). The answer's body is the
// offset table; ext consumersNotified counts the online consumers told.
// Refusals are RocketMQ 5's (AdminBrokerProcessor.resetOffsetInner, its
// default): a slave SYSTEM_ERROR, an unknown topic TOPIC_NOT_EXIST, an
// unknown group SUBSCRIPTION_GROUP_NOT_EXIST — a mistyped group is not
// reset to nothing with SUCCESS. A group known only by offsets committed
// on the topic counts as existing: Quiver takes UPDATE_CONSUMER_OFFSET
// from a group without a config, as 4.9 does.
func (s *Service) handleResetOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, group, ts := e.String("topic"), e.String("group"), e.Int64("timestamp")
	force := req.ExtFields["isForce"] == "" || e.Bool("isForce")
	queue := e.OptInt32("queueId", -1)
	offset := int64(-1)
	if v := req.ExtFields["offset"]; v != "null" {
		offset = e.OptInt64("offset", -1)
	}
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if s.b.IsSlave() {
		return remoting.Errorf(req, remoting.SystemError, "Can not reset offset in slave broker")
	}
	tc, ok := s.b.TopicConfig(topic)
	if !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("Topic %s does not exist", topic))
	}
	if !s.b.HasGroup(group) && !s.hasOffsets(group, topic, tc.ReadQueueNums) {
		return remoting.Errorf(req, remoting.SubscriptionGroupNotExist, fmt.Sprintf("Group %s does not exist", group))
	}
	qs, told, err := s.resetOffsets(ctx, topic, group, ts, force, queue, offset)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = EncodeOffsetTable(qs)
	resp.SetExtInt("consumersNotified", int64(told))
	return resp
}

// hasOffsets reports whether group committed an offset on a queue of topic.
func (s *Service) hasOffsets(group, topic string, queues int32) bool {
	for id := range queues {
		if _, ok := s.b.QueryOffset(group, topic, id); ok {
			return true
		}
	}
	return false
}
