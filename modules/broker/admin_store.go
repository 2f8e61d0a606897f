package broker

// Store-facing admin codes: QUERY_CONSUME_QUEUE (321),
// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), CLEAN_EXPIRED_CONSUMEQUEUE
// (306), DELETE_EXPIRED_COMMITLOG (312), CLEAN_UNUSED_TOPIC (316) and
// RESUME_CHECK_HALF_MESSAGE (323).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// maxConsumeQueueRows bounds one QUERY_CONSUME_QUEUE answer (Java is bound
// by the rest of one consume-queue file, 300,000 entries; each row here
// costs a record read).
const maxConsumeQueueRows = 2000

// ConsumeQueueData is one consume-queue entry (Java ConsumeQueueData;
// fastjson leaves out its null fields).
type ConsumeQueueData struct {
	Eval         bool  `json:"eval"`
	PhysicOffset int64 `json:"physicOffset"`
	PhysicSize   int32 `json:"physicSize"`
	TagsCode     int64 `json:"tagsCode"`
}

// queryConsumeQueueBody is Java's QueryConsumeQueueResponseBody.
type queryConsumeQueueBody struct {
	FilterData       *string                    `json:"filterData,omitempty"`
	MaxQueueIndex    int64                      `json:"maxQueueIndex"`
	MinQueueIndex    int64                      `json:"minQueueIndex"`
	QueueData        []ConsumeQueueData         `json:"queueData,omitempty"`
	SubscriptionData *protocol.SubscriptionData `json:"subscriptionData,omitempty"`
}

// queueExists reports whether the store has q, as Java's getConsumeQueue
// (a configured queue of a known topic, or one holding messages).
func (b *Broker) queueExists(q store.Queue) bool {
	if tc, ok := b.topics.get(q.Topic); ok && q.ID >= 0 && q.ID < max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return true
	}
	_, mx, err := b.store.Offsets(q)
	return err == nil && mx > 0
}

// consumeQueueRows reads up to count entries of q from index.
func (b *Broker) consumeQueueRows(ctx context.Context, q store.Queue, index int64, count int) ([]ConsumeQueueData, error) {
	rows := []ConsumeQueueData{}
	var res store.ReadResult
	for off := index; len(rows) < count; {
		res.Reset()
		if err := b.store.Read(ctx, q, off, store.ReadOptions{MaxMessages: count - len(rows), MaxBytes: 8 << 20}, &res); err != nil {
			return nil, err
		}
		for _, rec := range res.Records {
			h, err := message.PeekHeader(rec)
			if err != nil {
				return nil, err
			}
			m, _, err := message.DecodeStored(rec)
			if err != nil {
				return nil, err
			}
			rows = append(rows, ConsumeQueueData{PhysicOffset: h.CommitLogOffset, PhysicSize: int32(len(rec)), TagsCode: b.tagsCode(m.Properties[message.PropertyTags])})
		}
		if len(res.Records) == 0 || res.NextOffset <= off {
			break
		}
		off = res.NextOffset
	}
	return rows, nil
}

func (b *Broker) handleQueryConsumeQueue(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, qid := e.OptString("topic"), e.OptInt32("queueId", 0)
	index, count := e.OptInt64("index", 0), e.OptInt32("count", 0)
	group, hasGroup := req.ExtMap()["consumerGroup"]
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	q := store.Queue{Topic: topic, ID: qid}
	if !b.queueExists(q) {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("%d@%s is not exist!", qid, topic))
	}
	lo, hi, err := b.store.Offsets(q)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	body := queryConsumeQueueBody{MaxQueueIndex: hi, MinQueueIndex: lo}
	if hasGroup {
		if sub, ok := b.clients.subscriptionOf(group, topic); ok {
			data := sub.data
			body.SubscriptionData = &data
			// Java's ConsumerFilterData exists for SQL92 subscriptions
			// only; it prints "null" for the others.
			fd := "null"
			if sub.data.ExpressionType != "" && sub.data.ExpressionType != filter.TypeTag {
				pretty, _ := json.MarshalIndent(map[string]any{
					"consumerGroup": group, "expression": sub.data.SubString, "expressionType": sub.data.ExpressionType,
					"topic": topic, "version": sub.data.SubVersion,
				}, "", "\t")
				fd = string(pretty)
			}
			body.FilterData = &fd
		} else {
			fd := fmt.Sprintf("%s@%s is not online!", group, topic)
			body.FilterData = &fd
		}
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	if index < lo || index >= hi {
		resp.Remark = fmt.Sprintf("Index %d of %d@%s is not exist!", index, qid, topic)
		return resp
	}
	n := min(max(int(count), 0), maxConsumeQueueRows)
	rows, err := b.consumeQueueRows(ctx, q, index, n)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	body.QueueData = rows
	resp.Body, _ = json.Marshal(body)
	return resp
}

// systemTopics is Java's TopicValidator.getSystemTopicSet() for this
// broker (the fixed set, its cluster, broker-name and reply topics) plus
// Quiver's timer topic.
func (b *Broker) systemTopics() []string {
	set := map[string]bool{
		protocol.AutoCreateTopic: true, protocol.ScheduleTopic: true, "BenchmarkTest": true,
		protocol.TransHalfTopic: true, protocol.TraceTopic: true, protocol.TransOpHalfTopic: true,
		protocol.TransCheckMaxTopic: true, protocol.SelfTestTopic: true, protocol.OffsetMovedEvent: true,
		b.cfg.Cluster: true, b.cfg.Name: true, TimerTopic: true,
		ReplyTopic(b.cfg.Cluster): true, // TopicConfigManager adds it (reply.go)
		checkpointTopic:           true,
	}
	if b.cfg.TraceTopicEnable {
		set[b.cfg.TraceTopicName] = true // TopicConfigManager adds it (trace.go)
	}
	return sortedKeys(set)
}

func (b *Broker) handleSystemTopicList(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(struct {
		TopicList []string `json:"topicList"`
	}{b.systemTopics()})
	return resp
}

// keepUnconfigured reports the topics a store keeps without a topic
// config: Java's exceptions (schedule, transaction op, LMQ) and Quiver's
// internal topics (half messages, timers, rmq_sys_*), whose data must
// survive a clean-up.
func keepUnconfigured(topic string) bool {
	return protocol.IsSystemTopic(topic) || topic == TimerTopic || topic == protocol.TraceTopic ||
		strings.HasPrefix(topic, protocol.SystemTopicPrefix) || strings.HasPrefix(topic, "%LMQ%")
}

// CleanUnusedTopics drops the stored queues of topics that have no topic
// config (deleted topics whose data stayed), as Java's cleanUnusedTopic;
// it returns the topics dropped. Stores that cannot list or drop queues
// are left alone.
func (b *Broker) CleanUnusedTopics(ctx context.Context) ([]string, error) {
	lister, ok1 := b.store.(store.QueueLister)
	deleter, ok2 := b.store.(store.TopicDeleter)
	if !ok1 || !ok2 {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, q := range lister.Queues() {
		if seen[q.Topic] || keepUnconfigured(q.Topic) {
			continue
		}
		if _, ok := b.topics.get(q.Topic); ok {
			continue
		}
		seen[q.Topic] = true
	}
	dropped := sortedKeys(seen)
	for _, t := range dropped {
		if err := deleter.DeleteTopic(ctx, t); err != nil {
			return nil, fmt.Errorf("broker: clean unused topic %s: %w", t, err)
		}
	}
	return dropped, nil
}

func (b *Broker) handleCleanUnusedTopic(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	dropped, err := b.CleanUnusedTopics(ctx)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	b.log.Warn("clean unused topics", "dropped", dropped, "remote", p.RemoteAddr())
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleCleanExpiredConsumeQueue answers CLEAN_EXPIRED_CONSUMEQUEUE. Java
// destroys consume queues whose entries all point below the commit log's
// first offset; Quiver's stores drop consume-queue entries together with
// the segments retention deletes, so there is nothing left to clean.
func (b *Broker) handleCleanExpiredConsumeQueue(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	b.log.Info("clean expired consume queues: the store drops them with their segments", "remote", p.RemoteAddr())
	return remoting.NewResponse(req, remoting.Success, "")
}

// ResumeCheckHalfMessage puts the transactional half message named by
// msgID (the offsetMsgId of its copy in TRANS_CHECK_MAX_TIME_TOPIC, kept
// when the check-backs gave up) back into RMQ_SYS_TRANS_HALF_TOPIC with
// TRANSACTION_CHECK_TIMES 0, so the check-back service asks its producer
// again (Java AdminBrokerProcessor.resumeCheckHalfMessage). Stricter than
// Java, which re-puts any message: a half message still in the half topic
// may be decided or pending, and a second copy of it could be committed
// twice, so only discarded copies are accepted, each once per broker run.
func (b *Broker) ResumeCheckHalfMessage(ctx context.Context, msgID string) error {
	_, off, err := message.ParseOffsetMsgID(msgID)
	if err != nil {
		return fmt.Errorf("broker: resume check: bad msgId %q: %w", msgID, err)
	}
	rec, err := b.store.Lookup(ctx, off)
	if err != nil {
		return fmt.Errorf("broker: resume check: message %s: %w", msgID, err)
	}
	m, _, err := message.DecodeStored(rec)
	if err != nil {
		return fmt.Errorf("broker: resume check: message %s: %w", msgID, err)
	}
	if m.Topic != protocol.TransCheckMaxTopic || m.Properties[message.PropertyRealTopic] == "" {
		return fmt.Errorf("broker: resume check: message %s is on %s, not a half message the check-backs gave up on (%s)", msgID, m.Topic, protocol.TransCheckMaxTopic)
	}
	b.rt.mu.Lock()
	if b.rt.resumed == nil {
		b.rt.resumed = map[int64]bool{}
	}
	again := b.rt.resumed[off]
	b.rt.resumed[off] = true
	b.rt.mu.Unlock()
	if again {
		return fmt.Errorf("broker: resume check: message %s was already put back for checking", msgID)
	}
	props := m.Properties.Clone()
	props[message.PropertyTransactionCheckTimes] = "0"
	delete(props, message.PropertyTranPreparedQueueOffset)
	half := &message.Ext{
		Message:        message.Message{Topic: protocol.TransHalfTopic, Flag: m.Flag, Properties: props, Body: m.Body},
		QueueID:        0,
		SysFlag:        m.SysFlag,
		BornTimestamp:  m.BornTimestamp,
		BornHost:       m.BornHost,
		ReconsumeTimes: m.ReconsumeTimes,
	}
	if _, err := b.Put(ctx, []*message.Ext{half}); err != nil {
		b.rt.mu.Lock()
		delete(b.rt.resumed, off)
		b.rt.mu.Unlock()
		return fmt.Errorf("broker: resume check: put back: %w", err)
	}
	return nil
}

func (b *Broker) handleResumeCheckHalfMessage(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	id := remoting.ReadExt(req).OptString("msgId")
	if err := b.ResumeCheckHalfMessage(ctx, id); err != nil {
		b.log.Warn("resume check half message", "msg_id", id, "err", err)
		return remoting.Errorf(req, remoting.SystemError, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed: "+err.Error())
	}
	b.log.Info("half message put back for checking", "msg_id", id, "remote", p.RemoteAddr())
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleDeleteExpiredCommitLog answers DELETE_EXPIRED_COMMITLOG: like
// Java's executeDeleteFilesManually it deletes the stored data older than
// storage.retention now (as fileReservedTime last set it), whatever hours
// storage.clean_at allows.
func (b *Broker) handleDeleteExpiredCommitLog(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	retention := b.retention() // fileReservedTime may have changed it
	if retention <= 0 {
		b.log.Warn("delete expired commit log: storage.retention keeps everything", "remote", p.RemoteAddr())
		return remoting.NewResponse(req, remoting.Success, "")
	}
	freed, err := b.store.DeleteBefore(ctx, time.Now().Add(-retention))
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("delete expired commit log: %v", err))
	}
	b.log.Warn("delete expired commit log", "freed_bytes", freed, "retention", retention, "remote", p.RemoteAddr())
	return remoting.NewResponse(req, remoting.Success, "")
}
