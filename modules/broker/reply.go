package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// Request-reply (RocketMQ 4.6's RPC): a requester sends an ordinary
// message carrying CORRELATION_ID, REPLY_TO_CLIENT (its client id) and
// TTL; the consumer that handles it answers with a message to the
// cluster's reply topic, sent as SEND_REPLY_MESSAGE(_V2). The broker
// pushes that reply to the requester's connection with
// PUSH_REPLY_MESSAGE_TO_CLIENT and, as Java does by default
// (storeReplyMessageEnable), stores it in the reply topic too. Java's
// ReplyMessageProcessor.

const (
	// replyTopicSuffix is MixAll.REPLY_TOPIC_POSTFIX.
	replyTopicSuffix = "REPLY_TOPIC"
	// propReplyToClient names the requester's client id
	// (MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT).
	propReplyToClient = "REPLY_TO_CLIENT"
	// propPushReplyTime is when the broker pushed the reply, in Unix
	// milliseconds (PROPERTY_PUSH_REPLY_TIME).
	propPushReplyTime = "PUSH_REPLY_TIME"
)

// replyPushTimeout bounds the wait for the requester's answer to a push:
// Java's Broker2Client.callClient waits 10 s. A variable for tests.
var replyPushTimeout = 10 * time.Second

// ReplyTopic is the reply topic of a cluster, which every broker of the
// cluster creates at start (MixAll.getReplyTopic).
func ReplyTopic(cluster string) string { return cluster + "_" + replyTopicSuffix }

// registerReply routes SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2.
// Not scoped: the answer is built after the handler returns.
func (b *Broker) registerReply() {
	b.router.Register(remoting.SendReplyMessage, b.handleSendReply)
	b.router.Register(remoting.SendReplyMessageV2, b.handleSendReply)
}

// findProducer returns the connection of the producer client clientID,
// from the producer heartbeats (Java's ProducerManager.findChannel).
func (t *clientTable) findProducer(clientID string) *remoting.Peer {
	if clientID == "" {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found *clientChannel
	for _, g := range t.producers {
		if c, ok := g.clients[clientID]; ok && (found == nil || c.lastUpdate.After(found.lastUpdate)) {
			found = c
		}
	}
	if found == nil {
		return nil
	}
	return found.peer
}

// handleSendReply serves SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2:
// the header and checks of a send, then the push to the requester and
// the put, side by side. The replier's answer waits for both and goes out
// on its connection's writer (Peer.ReplyLater), so no goroutine waits on
// the requester's socket.
func (b *Broker) handleSendReply(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	var h sendHeader
	asked := remoting.ReadExt(req).OptInt32(sendKey(req.Code, shQueueID), -1)
	if resp := b.sendPrologue(ctx, req, &h); resp != nil {
		return resp
	}
	defer b.gate.leave()
	if max := b.current().MaxMessageSize; len(req.Body) > int(max) {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("the message body size %d is over the limit %d", len(req.Body), max))
	}
	if len(h.properties) > message.MaxPropertiesLength {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("the message properties length %d is over the limit %d", len(h.properties), message.MaxPropertiesLength))
	}
	props := message.ParseProperties(h.properties)
	w := &replyWait{b: b, peer: p, opaque: req.Opaque, serialize: req.SerializeType, queueID: h.queueID, oneway: req.IsOneway()}
	w.left.Store(2)

	target := b.clients.findProducer(props[propReplyToClient])
	switch {
	case props[propReplyToClient] == "":
		b.log.Warn("reply message without " + propReplyToClient + ": cannot push it")
		w.remark = "reply message properties[" + propReplyToClient + "] is null"
		w.left.Add(-1)
	case target == nil:
		w.remark = "push reply message fail, channel of <" + props[propReplyToClient] + "> not found."
		b.log.Warn(w.remark)
		w.left.Add(-1)
	default:
		push := b.replyPush(p, &h, asked, req)
		sender := props[propReplyToClient]
		err := target.InvokeAsyncDeadline(b.ctx, push, time.Now().Add(replyPushTimeout), func(resp *remoting.Command, err error) {
			switch {
			case err != nil:
				w.remark = "push reply message to " + sender + "fail."
				b.log.Warn("push reply message failed", "client", sender, "err", err)
			case resp.Code != remoting.Success:
				w.remark = "push reply message to " + sender + "fail."
				b.log.Warn("push reply message refused", "client", sender, "code", resp.Code, "remark", resp.Remark)
			default:
				w.pushed = true
			}
			w.done()
		})
		if err != nil {
			w.remark = "push reply message to " + sender + "fail."
			b.log.Warn("push reply message failed", "client", sender, "err", err)
			w.left.Add(-1)
		}
	}

	// Java stores the reply whatever became of the push
	// (storeReplyMessageEnable, true by default); the put's outcome only
	// fills the answer's message id and offset.
	sa := &sendAlloc{m: message.Ext{
		Message: message.Message{Topic: h.topic, Flag: h.flag, Properties: props, Body: req.Body},
		QueueID: h.queueID, SysFlag: h.sysFlag, BornTimestamp: h.bornTimestamp,
		BornHost: bornHost(p), ReconsumeTimes: h.reconsumeTimes,
	}}
	sa.msgs[0] = &sa.m
	if sa.m.BornTimestamp == 0 {
		sa.m.BornTimestamp = time.Now().UnixMilli()
	}
	b.gate.storeWrite()
	w.pos, w.putErr = b.put(ctx, sa.msgs[:], sa.batch[:])
	b.gate.storeWritten()
	if w.putErr != nil {
		b.log.Warn("store reply message", "topic", h.topic, "err", w.putErr)
	}
	w.done()
	return nil
}

// sendKey is the extFields key of a send header field for code.
func sendKey(code int32, field int) string {
	if shortSendKeys(code) {
		return shortKeys[field]
	}
	return longKeys[field]
}

// replyPush builds the PUSH_REPLY_MESSAGE_TO_CLIENT request of a reply:
// Java's ReplyMessageRequestHeader, the send header's fields plus the
// replier's address (bornHost), the broker's (storeHost) and the push
// time; the properties gain PUSH_REPLY_TIME. The body is the reply's, as
// sent (compressed when its sysFlag says so).
func (b *Broker) replyPush(p *remoting.Peer, h *sendHeader, askedQueue int32, req *remoting.Command) *remoting.Command {
	now := time.Now().UnixMilli()
	props := message.ParseProperties(h.properties)
	props[propPushReplyTime] = strconv.FormatInt(now, 10)
	unitMode := remoting.ReadExt(req).OptString(sendKey(req.Code, shUnitMode))
	if unitMode != "true" {
		unitMode = "false"
	}
	ext := map[string]string{
		"producerGroup":         h.producerGroup,
		"topic":                 h.topic,
		"defaultTopic":          h.defaultTopic,
		"defaultTopicQueueNums": strconv.Itoa(int(h.defaultTopicQueueNums)),
		"queueId":               strconv.Itoa(int(askedQueue)),
		"sysFlag":               strconv.Itoa(int(h.sysFlag)),
		"bornTimestamp":         strconv.FormatInt(h.bornTimestamp, 10),
		"flag":                  strconv.Itoa(int(h.flag)),
		"properties":            javaProperties(props),
		"reconsumeTimes":        strconv.Itoa(int(h.reconsumeTimes)),
		"unitMode":              unitMode,
		"bornHost":              bornHost(p).String(),
		"storeHost":             b.storeHost.String(),
		"storeTimestamp":        strconv.FormatInt(now, 10),
	}
	return remoting.NewRequest(remoting.PushReplyMessageToClient, ext, req.Body)
}

// javaProperties encodes props as Java's
// MessageDecoder.messageProperties2String: every pair ends with the
// separator.
func javaProperties(props message.Properties) string {
	b := props.AppendEncoded(nil)
	if len(b) > 0 {
		b = append(b, message.PropertySeparator)
	}
	return string(b)
}

// replyWait is a reply waiting for its push and its put; the second of
// the two to finish queues the replier's answer.
type replyWait struct {
	b         *Broker
	peer      *remoting.Peer
	opaque    int32
	serialize uint8
	queueID   int32
	oneway    bool // the replier wants no answer
	left      atomic.Int32

	// Written by the push's callback before its done.
	pushed bool
	remark string
	// Written by the handler before its done.
	pos    []store.Position
	putErr error
}

func (w *replyWait) done() {
	if w.left.Add(-1) != 0 || w.oneway {
		return
	}
	if err := w.peer.ReplyLater(w); err != nil {
		w.b.log.Debug("answer a reply message: the replier is gone", "err", err)
	}
}

// MakeReply is the replier's answer, as Java's ReplyMessageProcessor
// gives it: SUCCESS when the requester took the push (message id "0" and
// offset 0 unless the put stored it), SYSTEM_ERROR with the reason
// otherwise; a failed put is only logged.
func (w *replyWait) MakeReply() *remoting.Command {
	req := &remoting.Command{Opaque: w.opaque, SerializeType: w.serialize}
	var resp *remoting.Command
	if w.pushed {
		resp = remoting.NewResponse(req, remoting.Success, "")
	} else {
		resp = remoting.NewResponse(req, remoting.SystemError, w.remark)
	}
	resp.SetExt("MSG_REGION", "DefaultRegion")
	resp.SetExt("TRACE_ON", "true")
	if w.putErr == nil && len(w.pos) == 1 {
		resp.SetExt("msgId", message.OffsetMsgID(w.b.storeHost, w.pos[0].CommitLogOffset))
		resp.SetExt("queueId", strconv.Itoa(int(w.queueID)))
		resp.SetExtInt("queueOffset", w.pos[0].QueueOffset)
	} else if w.pushed {
		resp.SetExt("msgId", "0")
		resp.SetExt("queueId", strconv.Itoa(int(w.queueID)))
		resp.SetExt("queueOffset", "0")
	}
	return resp
}
