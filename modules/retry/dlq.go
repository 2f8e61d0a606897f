package retry

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// Resent describes one re-delivered dead letter.
type Resent struct {
	MsgID       string `json:"msgId"`       // UNIQ_KEY
	OffsetMsgID string `json:"offsetMsgId"` // of the dead letter
	Topic       string `json:"topic"`       // original topic (RETRY_TOPIC)
	NewOffset   string `json:"newOffsetMsgId"`
}

// ResendResult is RESEND_DLQ's answer body.
type ResendResult struct {
	Group  string   `json:"group"`
	Resent []Resent `json:"resent"`
	// Skipped were resent before (their copy in the retry topic carries
	// PropertyResentFromDLQ); a request with again=true resends them.
	Skipped []Resent `json:"skipped,omitempty"`
}

// PropertyResentFromDLQ marks the copy of a dead letter resent to the
// retry topic with the dead letter's offsetMsgId, so that a second
// resend of the same dead letter is noticed.
const PropertyResentFromDLQ = "RESENT_FROM_DLQ"

// matchesID reports whether a dead letter is the one an operator named.
func matchesID(m *message.Ext, id string) bool {
	return id == m.UniqKey() || id == m.Properties[message.PropertyOriginMessageID] || id == m.MsgID()
}

// revive rebuilds a dead letter for the group's retry topic: a fresh
// reconsume count, no delay, the original topic kept in RETRY_TOPIC.
func revive(m *message.Ext, retryTopic string) *message.Ext {
	p := m.Properties.Clone()
	delete(p, message.PropertyDelayTimeLevel)
	if p[message.PropertyRetryTopic] == "" {
		p[message.PropertyRetryTopic] = m.Topic
	}
	p[PropertyResentFromDLQ] = m.MsgID()
	return &message.Ext{
		Message: message.Message{Topic: retryTopic, Flag: m.Flag, Properties: p, Body: m.Body},
		SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp, BornHost: m.BornHost,
	}
}

func (s *Service) handleResend(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group := e.String("group")
	id := e.OptString("msgId")
	all := e.Bool("all")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if (id == "") == !all {
		return remoting.Errorf(req, remoting.SystemError, "give either msgId or all=true")
	}
	res, err := s.resend(ctx, group, id, req.ExtFields["again"] == "true")
	if err != nil {
		return s.b.ErrorResponse(req, err)
	}
	if id != "" && len(res.Resent) == 0 && len(res.Skipped) == 0 {
		return remoting.Errorf(req, remoting.QueryNotFound, fmt.Sprintf("no dead letter %s in %s", id, protocol.DLQTopic(group)))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(res)
	return resp
}

// Resend re-delivers the dead letters of group matching id (every one
// when id is empty) to %RETRY%<group>, so only that group consumes them
// again, with their reconsume count reset.
func (s *Service) Resend(ctx context.Context, group, id string) (*ResendResult, error) {
	return s.resend(ctx, group, id, true)
}

// resentBefore reports whether the retry topic holds a copy of dead
// letter m resent earlier (found by its UNIQ_KEY in the key index).
func (s *Service) resentBefore(ctx context.Context, retryTopic string, m *message.Ext) bool {
	ki, ok := s.b.Store().(store.KeyIndexer)
	if !ok || m.UniqKey() == "" {
		return false
	}
	recs, err := ki.QueryByKey(ctx, retryTopic, m.UniqKey(), m.StoreTimestamp, math.MaxInt64, 64)
	if err != nil {
		return false
	}
	for _, rec := range recs {
		c, _, err := message.DecodeStored(rec)
		if err == nil && c.Properties[PropertyResentFromDLQ] == m.MsgID() {
			return true
		}
	}
	return false
}

func (s *Service) resend(ctx context.Context, group, id string, again bool) (*ResendResult, error) {
	out := &ResendResult{Group: group, Resent: []Resent{}}
	q := store.Queue{Topic: protocol.DLQTopic(group)}
	if _, ok := s.b.TopicConfig(q.Topic); !ok {
		return out, nil
	}
	gc, err := s.b.GroupConfig(group)
	if err != nil {
		return nil, err
	}
	retryTopic, err := s.b.EnsureRetryTopic(group, gc.RetryQueueNums)
	if err != nil {
		return nil, err
	}
	min, max, err := s.b.Store().Offsets(q)
	if err != nil {
		return nil, err
	}
	var res store.ReadResult
	for off := min; off < max; {
		res.Reset()
		if err := s.b.Store().Read(ctx, q, off, store.ReadOptions{MaxMessages: 64}, &res); err != nil {
			return nil, err
		}
		if len(res.Records) == 0 {
			break
		}
		var batch []*message.Ext
		var info []Resent
		for _, rec := range res.Records {
			m, _, err := message.DecodeStored(rec)
			if err != nil {
				s.log.Warn("skip malformed dead letter", "group", group, "err", err)
				continue
			}
			if id != "" && !matchesID(m, id) {
				continue
			}
			if !again && s.resentBefore(ctx, retryTopic, m) {
				out.Skipped = append(out.Skipped, Resent{MsgID: m.UniqKey(), OffsetMsgID: m.MsgID(), Topic: m.Properties[message.PropertyRetryTopic]})
				continue
			}
			nm := revive(m, retryTopic)
			if gc.RetryQueueNums > 1 {
				nm.QueueID = int32(uint64(m.QueueOffset) % uint64(gc.RetryQueueNums))
			}
			batch = append(batch, nm)
			info = append(info, Resent{MsgID: m.UniqKey(), OffsetMsgID: m.MsgID(), Topic: nm.Properties[message.PropertyRetryTopic]})
		}
		if len(batch) > 0 {
			pos, err := s.b.Put(ctx, batch)
			if err != nil {
				return nil, err
			}
			for i := range info {
				info[i].NewOffset = message.OffsetMsgID(batch[i].StoreHost, pos[i].CommitLogOffset)
			}
			out.Resent = append(out.Resent, info...)
		}
		off = res.NextOffset
	}
	s.log.Info("dead letters resent", "group", group, "msgId", id, "n", len(out.Resent))
	return out, nil
}
