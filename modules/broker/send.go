package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// sendAlloc is what one SEND_MESSAGE stores, allocated at once: the
// message and the one-element batch handed to Put.
type sendAlloc struct {
	m     message.Ext
	msgs  [1]*message.Ext
	batch [1]store.Message
}

// sendsInline reports whether a send may run on its connection's reading
// goroutine (remoting.Mode.Inline): with storage.flush=async the store
// copies the message into the page cache (the commit log's mapped
// segment) and returns, so the send answers from memory. With sync flush
// it waits for an fdatasync, with a synchronous replica for the slave's
// ack: those sends go to worker goroutines, where one connection's
// pipelined sends wait together (and share the fdatasync). A replica
// that starts waiting for acks (SetAckWaiter) turns it off for the
// following sends.
func (b *Broker) sendsInline() bool {
	return b.deps.StoreFlush == store.FlushAsync && b.replica.ackWaiter.Load() == nil
}

// A send, single or batch, runs in three steps: sendPrologue (the header,
// the send gate, the topic and queue checks), the handler's own checks and
// messages, then the put and sendAnswer.

// sendPrologue reads req's header into h, enters the send gate and checks
// the topic and queue (checkSend). It returns the error answer; without
// one the send is in the gate, and the caller defers b.gate.leave.
func (b *Broker) sendPrologue(ctx context.Context, req *remoting.Command, h *sendHeader) (resp *remoting.Command) {
	if err := parseSendHeader(req, h); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if busy := b.gate.enter(ctx, req, h.topic, h.producerGroup, 1, len(req.Body)); busy != nil {
		return busy
	}
	if resp := b.checkSend(ctx, req, h); resp != nil {
		b.gate.leave()
		return resp
	}
	return nil
}

// sendAnswer answers a put of msgs: the store's error, or SUCCESS with the
// message ids (comma-separated for a batch), the queue asked for (as Java
// answers, even when a put hook parked a message elsewhere: half message,
// delay), the first queue offset and, for a prepared transactional
// message, its transaction id; the code is SYNC_MASTER's (replica.go).
func (b *Broker) sendAnswer(ctx context.Context, req *remoting.Command, queueID int32, pos []store.Position, err error, tid string) *remoting.Command {
	if err != nil {
		return b.storeErrorResponse(req, err)
	}
	var msgID string
	if len(pos) == 1 {
		msgID = message.OffsetMsgID(b.storeHost, pos[0].CommitLogOffset)
	} else {
		ids := make([]string, len(pos))
		for i, ps := range pos {
			ids[i] = message.OffsetMsgID(b.storeHost, ps.CommitLogOffset)
		}
		msgID = strings.Join(ids, ",")
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExt("msgId", msgID)
	resp.SetExt("queueId", strconv.Itoa(int(queueID)))
	resp.SetExtInt("queueOffset", pos[0].QueueOffset)
	resp.SetExt("MSG_REGION", "DefaultRegion")
	resp.SetExt("TRACE_ON", "true")
	if tid != "" {
		resp.SetExt("transactionId", tid)
	}
	resp.Code = b.awaitReplicas(ctx, pos)
	return resp
}

func (b *Broker) handleSend(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	var hdr sendHeader
	h := &hdr
	resp := b.sendPrologue(ctx, req, h)
	if resp != nil {
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
	topic := h.topic
	queueID := h.queueID
	reconsume := h.reconsumeTimes
	if protocol.IsRetryTopic(topic) {
		group := strings.TrimPrefix(topic, protocol.RetryGroupPrefix)
		max := h.maxReconsumeTimes
		if v, ok := props[message.PropertyMaxReconsumeTimes]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				max = int32(n)
			}
		}
		if reconsume >= max || max < 0 {
			dlq, err := b.ensureDLQ(group)
			if err != nil {
				return remoting.Errorf(req, remoting.SystemError, err.Error())
			}
			topic, queueID = dlq, 0
			delete(props, message.PropertyDelayTimeLevel)
		}
	}
	if _, ok := props[message.PropertyPriority]; ok && topic == h.topic {
		queueID = b.placePriority(topic, queueID, h.sysFlag, props) // priority.go
	}
	delete(props, message.PropertyWaitStoreMsgOK)
	props[message.PropertyCluster] = b.cfg.Cluster
	sa := &sendAlloc{m: message.Ext{
		Message: message.Message{Topic: topic, Flag: h.flag, Properties: props, Body: req.Body},
		QueueID: queueID, SysFlag: h.sysFlag, BornTimestamp: h.bornTimestamp,
		BornHost: bornHost(p), ReconsumeTimes: reconsume,
	}}
	m := &sa.m
	sa.msgs[0] = m
	if m.BornTimestamp == 0 {
		m.BornTimestamp = time.Now().UnixMilli()
	}
	b.gate.storeWrite()
	pos, err := b.put(ctx, sa.msgs[:], sa.batch[:])
	b.gate.storeWritten()
	if e2etrace.On && err == nil && p != nil {
		e2etrace.SendDone(p.ID, req.Opaque, m.Topic, m.QueueID, pos[0].QueueOffset, 1)
	}
	var tid string
	if m.SysFlag&message.TransactionMask == message.TransactionPrepared {
		tid = props[message.PropertyUniqKey]
	}
	resp = b.sendAnswer(ctx, req, queueID, pos, err, tid)
	if err == nil {
		b.addSendExt(resp, m) // a held timer's recall handle: sendext.go
	}
	return resp
}

func (b *Broker) handleSendBatch(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	var hdr sendHeader
	h := &hdr
	resp := b.sendPrologue(ctx, req, h)
	if resp != nil {
		return resp
	}
	defer b.gate.leave()
	items, err := message.DecodeBatchLimit(req.Body, MaxBatchMessages)
	if errors.Is(err, message.ErrBatchTooLarge) {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("the batch is over the limit: %v", err))
	}
	if err != nil {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("bad batch body: %v", err))
	}
	if len(items) == 0 {
		return remoting.Errorf(req, remoting.MessageIllegal, "empty batch")
	}
	// The answer lists every message id: refuse, before storing anything,
	// a batch whose answer could not be sent (the client would store it
	// all again on its retry).
	if n := batchAnswerSize(len(items), b.storeHost); n > transport.DefaultMaxFrameSize {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("the batch is over the limit: its answer of %d bytes would pass the frame limit %d", n, transport.DefaultMaxFrameSize))
	}
	outer := message.ParseProperties(h.properties)
	born := bornHost(p)
	msgs := make([]*message.Ext, 0, len(items))
	maxSize := b.current().MaxMessageSize
	for _, it := range items {
		if len(it.Body) > int(maxSize) {
			return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("a batched message body of %d bytes is over the limit %d", len(it.Body), maxSize))
		}
		if it.Properties[message.PropertyDelayTimeLevel] != "" && it.Properties[message.PropertyDelayTimeLevel] != "0" {
			return remoting.Errorf(req, remoting.MessageIllegal, "a batch cannot contain delayed messages")
		}
		if strings.EqualFold(it.Properties[message.PropertyTransactionPrepared], "true") {
			return remoting.Errorf(req, remoting.MessageIllegal, "a batch cannot contain transactional messages")
		}
		props := it.Properties
		for k, v := range outer {
			props[k] = v
		}
		delete(props, message.PropertyWaitStoreMsgOK)
		props[message.PropertyCluster] = b.cfg.Cluster
		msgs = append(msgs, &message.Ext{
			Message: message.Message{Topic: h.topic, Flag: it.Flag, Properties: props, Body: it.Body},
			QueueID: h.queueID, SysFlag: h.sysFlag &^ message.TransactionMask, BornTimestamp: h.bornTimestamp, BornHost: born,
		})
	}
	b.gate.storeWrite()
	pos, err := b.Put(ctx, msgs)
	b.gate.storeWritten()
	if e2etrace.On && err == nil && p != nil {
		e2etrace.SendDone(p.ID, req.Opaque, msgs[0].Topic, msgs[0].QueueID, pos[0].QueueOffset, len(pos))
	}
	return b.sendAnswer(ctx, req, h.queueID, pos, err, "")
}

// checkSend validates the topic, creates it when allowed and fixes the
// queue id; it returns the error answer, or nil.
func (b *Broker) checkSend(ctx context.Context, req *remoting.Command, h *sendHeader) *remoting.Command {
	if resp := b.slaveRefusal(req); resp != nil {
		return resp
	}
	if err := protocol.ValidateTopic(h.topic); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if protocol.IsSystemTopic(h.topic) || brokerOnlyTopic(h.topic) {
		return remoting.Errorf(req, remoting.NoPermission, fmt.Sprintf("sending message to topic[%s] is forbidden", h.topic))
	}
	tc, ok := b.topics.view(h.topic)
	if !ok {
		created, err := b.autoCreateTopic(h.topic, h.defaultTopic, h.defaultTopicQueueNums)
		if err != nil {
			return remoting.Errorf(req, remoting.SystemError, err.Error())
		}
		if created == nil {
			return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.topic))
		}
		tc = *created
	}
	if tc.Perm&protocol.PermWrite == 0 {
		return remoting.Errorf(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden", h.topic))
	}
	maxQ := tc.WriteQueueNums
	if tc.ReadQueueNums > maxQ {
		maxQ = tc.ReadQueueNums
	}
	if h.queueID < 0 {
		h.queueID = rand.Int32N(tc.WriteQueueNums)
	}
	if h.queueID >= maxQ {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("request queueId[%d] is illegal, %s producer", h.queueID, h.topic))
	}
	return nil
}

// autoCreateTopic creates topic from the template defaultTopic when it
// exists and is inheritable; retry topics are created with one queue.
// It returns nil, nil when the topic may not be created.
func (b *Broker) autoCreateTopic(topic, defaultTopic string, queues int32) (*protocol.TopicConfig, error) {
	var tc *protocol.TopicConfig
	if def, ok := b.topics.get(defaultTopic); ok && b.current().AutoCreateTopic && def.Perm&protocol.PermInherit != 0 {
		if queues <= 0 || queues > def.WriteQueueNums {
			queues = def.WriteQueueNums
		}
		tc = &protocol.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues,
			Perm: def.Perm &^ protocol.PermInherit, TopicFilterType: def.TopicFilterType}
	} else if protocol.IsRetryTopic(topic) {
		tc = &protocol.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"}
	} else {
		return nil, nil
	}
	return b.createTopic(tc)
}

// createTopic creates tc if absent and re-registers on change.
func (b *Broker) createTopic(tc *protocol.TopicConfig) (*protocol.TopicConfig, error) {
	got, created, err := b.topics.putIfAbsent(tc)
	if err != nil {
		return nil, err
	}
	if created {
		b.log.Info("topic created", "topic", tc.TopicName, "queues", tc.WriteQueueNums, "perm", tc.Perm)
		b.topicsChanged(tc.TopicName)
	}
	return got, nil
}

// ensureRetryTopic creates %RETRY%<group>.
func (b *Broker) ensureRetryTopic(group string, queues int32) (string, error) {
	if queues < 1 {
		queues = 1
	}
	t := protocol.RetryTopic(group)
	_, err := b.createTopic(&protocol.TopicConfig{TopicName: t, ReadQueueNums: queues, WriteQueueNums: queues, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"})
	return t, err
}

// ensureConsumerGroups creates the subscription groups of a heartbeat and
// their retry topics that do not exist yet: all groups in one write of
// the subscription-group document, all retry topics in one write of the
// topic document and one re-registration (a heartbeat naming N new groups
// used to rewrite topics.json N times: 2,000 groups took 42 s). It
// returns the error answer, or nil.
func (b *Broker) ensureConsumerGroups(req *remoting.Command, cds []protocol.ConsumerData) *remoting.Command {
	if len(cds) == 0 {
		return nil
	}
	names := make([]string, len(cds))
	for i := range cds {
		if err := protocol.ValidateGroup(cds[i].GroupName); err != nil {
			return remoting.Errorf(req, remoting.SystemError, err.Error())
		}
		names[i] = cds[i].GroupName
	}
	gcs, err := b.groups.getOrCreateAll(names)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	tcs := make([]*protocol.TopicConfig, len(gcs))
	for i, gc := range gcs {
		q := max(gc.RetryQueueNums, 1)
		tcs[i] = &protocol.TopicConfig{TopicName: protocol.RetryTopic(gc.GroupName), ReadQueueNums: q, WriteQueueNums: q,
			Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"}
	}
	_, created, err := b.topics.putAllIfAbsent(tcs)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	var made []string
	for i, c := range created {
		if c {
			made = append(made, tcs[i].TopicName)
			if len(made) <= 10 {
				b.log.Info("topic created", "topic", tcs[i].TopicName, "queues", tcs[i].WriteQueueNums, "perm", tcs[i].Perm)
			}
		}
	}
	if len(made) > 10 {
		b.log.Info("retry topics created", "count", len(made))
	}
	b.topicsChanged(made...)
	return nil
}

// ensureDLQ creates %DLQ%<group>.
func (b *Broker) ensureDLQ(group string) (string, error) {
	t := protocol.DLQTopic(group)
	_, err := b.createTopic(&protocol.TopicConfig{TopicName: t, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"})
	return t, err
}

// MaxBatchMessages bounds the messages of one SEND_BATCH_MESSAGE. The
// frame limit alone does not bound a batch: 200,000 empty messages fit in
// a 4.4 MB body and cost ~210 MB decoded (each message is an item, a
// message and a properties map), and above ~508,000 the answer's id list
// passes the 16 MiB frame limit. 16,384 messages keep a decoded batch near
// 16 MiB and its answer near 0.5 MiB; a larger batch is answered
// MESSAGE_ILLEGAL before anything is decoded or stored.
const MaxBatchMessages = 16384

// batchAnswerSize estimates the SEND_BATCH_MESSAGE answer for n messages:
// n message ids joined by commas, plus the header.
func batchAnswerSize(n int, host netip.AddrPort) int {
	return n*(len(message.OffsetMsgID(host, 0))+1) + 1024
}

// DiskFullRemark is the answer to a send the store could not write for
// lack of disk space, on either engine: SERVICE_NOT_AVAILABLE, as Java's
// broker answers when its disk is full (the client tries another broker),
// with the cause named.
const DiskFullRemark = "service not available now: the broker's disk is full, the message was not stored"

// isDiskFull reports a store error caused by a full disk (both engines
// wrap ENOSPC).
func isDiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// storeErrorResponse answers a failed store append: MESSAGE_ILLEGAL for a
// message over a size limit (the client must not re-upload it),
// SERVICE_NOT_AVAILABLE for a full disk, a put hook's own code, else
// SYSTEM_ERROR. Errors are logged at most once a second (with a count of
// those not logged): a full disk fails every send.
func (b *Broker) storeErrorResponse(req *remoting.Command, err error) *remoting.Command {
	if code, ok := rejectCode(err); ok {
		return remoting.Errorf(req, code, err.Error())
	}
	if errors.Is(err, store.ErrTooLarge) {
		return remoting.Errorf(req, remoting.MessageIllegal, fmt.Sprintf("the message is over the limit: %v", err))
	}
	if isDiskFull(err) {
		if b.gate != nil {
			b.gate.diskFull.Add(1)
		}
		if n, ok := b.gate.logAllowed(); ok {
			b.log.Error("store append: disk full", "err", err, "suppressed", n)
		}
		return remoting.Errorf(req, remoting.ServiceNotAvailable, DiskFullRemark)
	}
	if b.gate != nil && store.WriteRefusal(err) == store.RefusedStoreFailed {
		b.gate.storeFailed.Add(1)
	}
	if n, ok := b.gate.logAllowed(); ok {
		b.log.Warn("store append", "err", err, "suppressed", n)
	}
	return remoting.Errorf(req, remoting.SystemError, err.Error())
}

// logLimiter lets one log line a second through and counts the others.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// allow reports whether to log now, and how many lines were suppressed
// since the last one logged.
func (l *logLimiter) allow() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.last) < time.Second {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}

// logAllowed is storeErrLog.allow (every line when there is no gate).
func (g *sendGate) logAllowed() (int64, bool) {
	if g == nil {
		return 0, true
	}
	return g.storeErrLog.allow()
}

type bornHostKey struct{}

// bornHost is p's remote address, parsed once per connection (the
// transport formats the address string anew on every call).
func bornHost(p *remoting.Peer) netip.AddrPort {
	if p == nil {
		// No connection (a handler called in-process): no address, and
		// no parse whose error would cost an allocation per send.
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	if v, ok := p.Value(bornHostKey{}); ok {
		return v.(netip.AddrPort)
	}
	ap := parseHost(p.RemoteAddr())
	p.SetValue(bornHostKey{}, ap)
	return ap
}

func parseHost(addr string) netip.AddrPort {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
