package consumer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// ExpressionType names a subscription language.
type ExpressionType string

// Expression types.
const (
	TAG   ExpressionType = "TAG"
	SQL92 ExpressionType = "SQL92"
)

// Selector is a subscription expression.
type Selector struct {
	Type       ExpressionType
	Expression string
}

// All subscribes to every message.
func All() Selector { return Selector{Type: TAG, Expression: "*"} }

// Tags subscribes to messages with one of the tags ("a || b").
func Tags(expr string) Selector { return Selector{Type: TAG, Expression: expr} }

// SQL subscribes with an SQL92 expression over message properties.
func SQL(expr string) Selector { return Selector{Type: SQL92, Expression: expr} }

func (s Selector) norm() Selector {
	if s.Type == "" {
		s.Type = TAG
	}
	if s.Type == TAG && strings.TrimSpace(s.Expression) == "" {
		s.Expression = "*"
	}
	return s
}

// tagFilter re-checks tags on the client, as the official client does.
func (s Selector) tagFilter() func(*client.MessageExt) bool {
	if s.Type != TAG || strings.TrimSpace(s.Expression) == "*" {
		return nil
	}
	set := map[string]bool{}
	for _, t := range client.ParseTags(s.Expression) {
		set[t] = true
	}
	return func(m *client.MessageExt) bool { return set[m.Tag()] }
}

// PullStatus is a pull's outcome.
type PullStatus int

// Pull statuses.
const (
	Found PullStatus = iota
	NoNewMsg
	NoMatchedMsg
	OffsetIllegal
)

func (s PullStatus) String() string {
	switch s {
	case Found:
		return "FOUND"
	case NoNewMsg:
		return "NO_NEW_MSG"
	case NoMatchedMsg:
		return "NO_MATCHED_MSG"
	}
	return "OFFSET_ILLEGAL"
}

// PullResult is one pull's answer.
type PullResult struct {
	Status          PullStatus
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	SuggestBrokerID int64
	Messages        []*client.MessageExt
}

// Pull sysFlag bits.
const (
	flagCommitOffset = 1
	flagSuspend      = 2
	flagSubscription = 4
)

type pullArgs struct {
	group        string
	mq           client.MessageQueue
	offset       int64
	max          int
	sysFlag      int
	commitOffset int64
	suspend      time.Duration
	timeout      time.Duration
	sel          Selector
	brokerID     int64
	// each, when set, gets the messages one by one instead of the result
	// (PullEach); the answer's frame is recycled afterwards.
	each func(*client.MessageExt)
}

// pullMaps recycles PULL_MESSAGE header maps.
var pullMaps = sync.Pool{New: func() any { return make(map[string]string, 16) }}

// pullOnce sends one PULL_MESSAGE.
func pullOnce(ctx context.Context, c *client.Client, a pullArgs) (*PullResult, error) {
	addr, ok := c.BrokerAddrFor(a.mq.BrokerName, a.brokerID)
	if !ok {
		if _, err := c.FetchRoute(ctx, a.mq.Topic); err == nil {
			addr, ok = c.BrokerAddrFor(a.mq.BrokerName, a.brokerID)
		}
		if !ok {
			return nil, fmt.Errorf("consumer: pull %s: %w", a.mq, client.ErrBrokerNotFound)
		}
	}
	sub := ""
	if a.sysFlag&flagSubscription != 0 {
		sub = a.sel.Expression
	}
	// The header map is reused: the request is encoded before Invoke
	// returns and nothing keeps the map.
	ext := pullMaps.Get().(map[string]string)
	defer func() { clear(ext); pullMaps.Put(ext) }()
	ext["consumerGroup"] = a.group
	ext["topic"] = a.mq.Topic
	ext["queueId"] = strconv.Itoa(a.mq.QueueID)
	ext["queueOffset"] = strconv.FormatInt(a.offset, 10)
	ext["maxMsgNums"] = strconv.Itoa(a.max)
	ext["sysFlag"] = strconv.Itoa(a.sysFlag)
	ext["commitOffset"] = strconv.FormatInt(a.commitOffset, 10)
	ext["suspendTimeoutMillis"] = strconv.FormatInt(a.suspend.Milliseconds(), 10)
	ext["subscription"] = sub
	ext["subVersion"] = "0"
	ext["expressionType"] = string(TAG)
	ext["bname"] = a.mq.BrokerName
	if a.sysFlag&flagSubscription != 0 {
		ext["expressionType"] = string(a.sel.Type)
	}
	req := client.NewRequest(remoting.PullMessage, ext, nil)
	// The timeout is a deadline the connection sweeps, not a derived
	// context (a timer per pull).
	resp, err := c.InvokeDeadline(ctx, addr, req, time.Now().Add(a.timeout))
	if err != nil {
		return nil, fmt.Errorf("consumer: pull %s: %w", a.mq, err)
	}
	r := &PullResult{}
	r.NextBeginOffset, _ = strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
	r.MinOffset, _ = strconv.ParseInt(resp.Ext("minOffset"), 10, 64)
	r.MaxOffset, _ = strconv.ParseInt(resp.Ext("maxOffset"), 10, 64)
	r.SuggestBrokerID, _ = strconv.ParseInt(resp.Ext("suggestWhichBrokerId"), 10, 64)
	switch resp.Code {
	case remoting.Success:
		r.Status = Found
		if a.each != nil {
			keep := a.sel.tagFilter()
			minOff, maxOff := resp.Ext("minOffset"), resp.Ext("maxOffset")
			err := client.DecodeEach(resp.Body, a.mq.BrokerName, func(m *client.MessageExt) bool {
				m.Queue = a.mq
				if keep == nil || keep(m) {
					m.Properties["MIN_OFFSET"] = minOff
					m.Properties["MAX_OFFSET"] = maxOff
					a.each(m)
				}
				return true
			})
			resp.Release()
			if err != nil {
				return nil, fmt.Errorf("consumer: pull %s: %w", a.mq, err)
			}
			break
		}
		msgs, err := client.DecodeMessages(resp.Body, a.mq.BrokerName)
		if err != nil {
			return nil, fmt.Errorf("consumer: pull %s: %w", a.mq, err)
		}
		keep := a.sel.tagFilter()
		for _, m := range msgs {
			m.Queue = a.mq
			if keep == nil || keep(m) {
				m.Properties["MIN_OFFSET"] = resp.Ext("minOffset")
				m.Properties["MAX_OFFSET"] = resp.Ext("maxOffset")
				r.Messages = append(r.Messages, m)
			}
		}
	case remoting.PullNotFound:
		r.Status = NoNewMsg
	case remoting.PullRetryImmediately:
		r.Status = NoMatchedMsg
	case remoting.PullOffsetMoved:
		r.Status = OffsetIllegal
	default:
		return nil, fmt.Errorf("consumer: pull %s: %w", a.mq, client.NewBrokerError(addr, resp))
	}
	return r, nil
}

// queryOffset asks the broker for a group's committed offset; -1 means
// none (QUERY_NOT_FOUND).
func queryOffset(ctx context.Context, c *client.Client, group string, mq client.MessageQueue) (int64, error) {
	addr, err := brokerOf(ctx, c, mq)
	if err != nil {
		return 0, err
	}
	resp, err := c.Invoke(ctx, addr, client.NewRequest(remoting.QueryConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": mq.Topic, "queueId": strconv.Itoa(mq.QueueID), "bname": mq.BrokerName,
	}, nil))
	if err != nil {
		return 0, fmt.Errorf("consumer: query offset of %s: %w", mq, err)
	}
	switch resp.Code {
	case remoting.Success:
		return strconv.ParseInt(resp.Ext("offset"), 10, 64)
	case remoting.QueryNotFound:
		return -1, nil
	}
	return 0, fmt.Errorf("consumer: query offset of %s: %w", mq, client.NewBrokerError(addr, resp))
}

// maxOffset asks for a queue's next write offset.
func maxOffset(ctx context.Context, c *client.Client, mq client.MessageQueue) (int64, error) {
	return offsetCall(ctx, c, remoting.GetMaxOffset, mq, nil)
}

func offsetCall(ctx context.Context, c *client.Client, code int32, mq client.MessageQueue, extra map[string]string) (int64, error) {
	addr, err := brokerOf(ctx, c, mq)
	if err != nil {
		return 0, err
	}
	ext := map[string]string{"topic": mq.Topic, "queueId": strconv.Itoa(mq.QueueID), "bname": mq.BrokerName}
	for k, v := range extra {
		ext[k] = v
	}
	resp, err := c.Invoke(ctx, addr, client.NewRequest(code, ext, nil))
	if err != nil {
		return 0, fmt.Errorf("consumer: offset request %d for %s: %w", code, mq, err)
	}
	if resp.Code != remoting.Success {
		return 0, fmt.Errorf("consumer: offset request %d for %s: %w", code, mq, client.NewBrokerError(addr, resp))
	}
	return strconv.ParseInt(resp.Ext("offset"), 10, 64)
}

func updateOffset(ctx context.Context, c *client.Client, group string, mq client.MessageQueue, off int64, wait bool) error {
	addr, err := brokerOf(ctx, c, mq)
	if err != nil {
		return err
	}
	req := client.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": mq.Topic, "queueId": strconv.Itoa(mq.QueueID),
		"commitOffset": strconv.FormatInt(off, 10), "bname": mq.BrokerName,
	}, nil)
	if !wait {
		return c.SendOneway(ctx, addr, req)
	}
	resp, err := c.Invoke(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("consumer: commit offset of %s: %w", mq, err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("consumer: commit offset of %s: %w", mq, client.NewBrokerError(addr, resp))
	}
	return nil
}

func brokerOf(ctx context.Context, c *client.Client, mq client.MessageQueue) (string, error) {
	if a, ok := c.BrokerAddr(mq.BrokerName); ok {
		return a, nil
	}
	if _, err := c.FetchRoute(ctx, mq.Topic); err != nil {
		return "", err
	}
	if a, ok := c.BrokerAddr(mq.BrokerName); ok {
		return a, nil
	}
	return "", fmt.Errorf("consumer: %w: %s", client.ErrBrokerNotFound, mq.BrokerName)
}
