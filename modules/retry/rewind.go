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
	tc, ok := s.b.TopicConfig(topic)
	if !ok {
		return nil, 0, fmt.Errorf("retry: topic[%s] not exist", topic)
	}
	name := s.b.Config().Name
	out := make([]QueueOffset, 0, tc.ReadQueueNums)
	for id := int32(0); id < tc.ReadQueueNums; id++ {
		q := store.Queue{Topic: topic, ID: id}
		var off int64
		var err error
		if ts < 0 {
			_, off, err = s.b.Store().Offsets(q)
		} else {
			off, err = s.b.Store().OffsetByTime(ctx, q, ts)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("retry: offset of %s at %d: %w", q, ts, err)
		}
		if cur, ok := s.b.QueryOffset(group, topic, id); ok && !force && cur < off {
			off = cur
		}
		s.b.CommitOffset(group, topic, id, off)
		out = append(out, QueueOffset{Topic: topic, BrokerName: name, QueueID: id, Offset: off})
	}
	if err := s.b.FlushOffsets(); err != nil {
		return nil, 0, err
	}
	body := EncodeOffsetTable(out)
	peers := s.b.ConsumerPeers(group)
	if len(peers) > 0 {
		for _, q := range out {
			s.fences.set(fenceKey{group, topic, q.QueueID}, q.Offset)
		}
	}
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
// group, timestamp (ms, -1 for the end), isForce. The answer's body is the
// offset table; ext consumersNotified counts the online consumers told.
func (s *Service) handleResetOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, group, ts := e.String("topic"), e.String("group"), e.Int64("timestamp")
	force := req.ExtFields["isForce"] == "" || e.Bool("isForce")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	qs, told, err := s.ResetOffsets(ctx, topic, group, ts, force)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = EncodeOffsetTable(qs)
	resp.SetExtInt("consumersNotified", int64(told))
	return resp
}
