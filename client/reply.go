package client

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// Request-reply (RocketMQ 4.6's RPC): producer.Request sends a message
// carrying a correlation id and this client's id; the consumer that
// handles it answers with NewReply, sent by any producer; the broker
// pushes the answer to this client (PUSH_REPLY_MESSAGE_TO_CLIENT), which
// hands it to the request waiting on its correlation id.

// Request-reply properties (Java's MessageConst).
const (
	// PropertyCorrelationID ties a reply to its request.
	PropertyCorrelationID = "CORRELATION_ID"
	// PropertyReplyToClient is the requesting client's id: the broker
	// pushes the reply to that client's connection.
	PropertyReplyToClient = "REPLY_TO_CLIENT"
	// PropertyMessageTTL is how long the requester waits, in
	// milliseconds (Java's; the official Go client writes seconds).
	PropertyMessageTTL = "TTL"
	// PropertyMessageType is "reply" on a reply message.
	PropertyMessageType = "MSG_TYPE"
	// PropertyPushReplyTime is when the broker pushed the reply, in Unix
	// milliseconds.
	PropertyPushReplyTime = "PUSH_REPLY_TIME"
	// PropertyReplyArriveTime is when this client received the reply, in
	// Unix milliseconds.
	PropertyReplyArriveTime = "ARRIVE_TIME"
	// ReplyMessageFlag is PropertyMessageType's value on a reply.
	ReplyMessageFlag = "reply"
)

// ReplyTopic is the topic replies are sent to in a cluster
// (<cluster>_REPLY_TOPIC, which every broker creates at start).
func ReplyTopic(cluster string) string { return cluster + "_REPLY_TOPIC" }

// NewReply builds the reply to a request message, as Java's
// MessageUtil.createReplyMessage: body, the request's cluster's reply
// topic, MSG_TYPE=reply and the request's CORRELATION_ID,
// REPLY_TO_CLIENT and TTL. Send it with any producer's SendSync or
// SendAsync.
func NewReply(request *MessageExt, body []byte) (*Message, error) {
	if request == nil {
		return nil, errors.New("client: create reply message: the request message is nil")
	}
	cluster := request.Property(message.PropertyCluster)
	if cluster == "" {
		return nil, fmt.Errorf("client: create reply message: the request has no property %s", message.PropertyCluster)
	}
	m := NewMessage(ReplyTopic(cluster), body)
	m.SetProperty(PropertyMessageType, ReplyMessageFlag)
	m.SetProperty(PropertyCorrelationID, request.Property(PropertyCorrelationID))
	m.SetProperty(PropertyReplyToClient, request.Property(PropertyReplyToClient))
	m.SetProperty(PropertyMessageTTL, request.Property(PropertyMessageTTL))
	return m, nil
}

// IsReply reports whether m is a reply (MSG_TYPE=reply): producers send
// it with SEND_REPLY_MESSAGE.
func IsReply(m *Message) bool { return m.Property(PropertyMessageType) == ReplyMessageFlag }

// replyTable holds the requests of this client waiting for their reply,
// by correlation id.
type replyTable struct {
	mu      sync.Mutex
	waiting map[string]func(*MessageExt)
}

// ExpectReply registers f for the reply carrying correlationID; f runs
// once, on the connection's reading goroutine, so it must not block. The
// returned cancel forgets the request (after a timeout).
func (c *Client) ExpectReply(correlationID string, f func(*MessageExt)) (cancel func()) {
	t := &c.replies
	t.mu.Lock()
	if t.waiting == nil {
		t.waiting = map[string]func(*MessageExt){}
	}
	t.waiting[correlationID] = f
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.waiting, correlationID)
		t.mu.Unlock()
	}
}

func (t *replyTable) take(correlationID string) func(*MessageExt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.waiting[correlationID]
	delete(t.waiting, correlationID)
	return f
}

// handlePushReply serves PUSH_REPLY_MESSAGE_TO_CLIENT (Java's
// ClientRemotingProcessor.receiveReplyMessage): the reply goes to the
// request waiting on its correlation id; one nobody waits for any more is
// dropped. The answer is SUCCESS either way, as Java's.
func (c *Client) handlePushReply(req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Language, resp.Version = Language, Version
	m, err := DecodeReplyPush(req)
	if err != nil {
		c.log.Warn("bad reply message push", "err", err)
		resp.Code, resp.Remark = remoting.SystemError, "process reply message fail"
		return resp
	}
	m.Properties[PropertyReplyArriveTime] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	id := m.Property(PropertyCorrelationID)
	if f := c.replies.take(id); f != nil {
		f(m)
	} else {
		c.log.Debug("reply message matches no waiting request", "correlationID", id, "replier", m.BornHost)
	}
	return resp
}

// DecodeReplyPush reads the reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries
// (ReplyMessageRequestHeader and the body, inflated when its sysFlag
// says so).
func DecodeReplyPush(req *remoting.Command) (*MessageExt, error) {
	e := remoting.ReadExt(req)
	ext := message.Ext{
		Message: message.Message{Topic: e.String("topic"), Body: req.Body, Flag: e.OptInt32("flag", 0),
			Properties: message.ParseProperties(e.OptString("properties"))},
		QueueID:        e.OptInt32("queueId", 0),
		SysFlag:        e.OptInt32("sysFlag", 0),
		ReconsumeTimes: e.OptInt32("reconsumeTimes", 0),
	}
	born, stored := e.OptInt64("bornTimestamp", 0), e.OptInt64("storeTimestamp", 0)
	if e.Err != nil {
		return nil, fmt.Errorf("client: reply push header: %w", e.Err)
	}
	body, err := ext.UncompressedBody()
	if err != nil {
		return nil, fmt.Errorf("client: reply push body: %w", err)
	}
	props := map[string]string(ext.Properties)
	if props == nil {
		props = map[string]string{}
	}
	m := &MessageExt{
		Message:        Message{Topic: ext.Topic, Body: body, Flag: ext.Flag, Properties: props},
		Queue:          MessageQueue{Topic: ext.Topic, QueueID: int(ext.QueueID)},
		SysFlag:        ext.SysFlag,
		ReconsumeTimes: ext.ReconsumeTimes,
		BornTimestamp:  time.UnixMilli(born),
		StoreTimestamp: time.UnixMilli(stored),
		BornHost:       e.OptString("bornHost"),
		StoreHost:      e.OptString("storeHost"),
	}
	m.MsgID = props[message.PropertyUniqKey]
	return m, nil
}
