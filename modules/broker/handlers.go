package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

func (b *Broker) registerProcessors() {
	r := b.router
	// Sends and pulls keep nothing of req's map or body once they return
	// (a held pull keeps req for its opaque), and sends read their header
	// without the map (send_header.go); sends answer from memory when
	// sendsInline says so, the offset codes always do.
	send := remoting.Mode{KeepsNothing: true, NoExtMap: true, Inline: b.sendsInline}
	inline := remoting.Mode{Inline: remoting.Always}
	r.Register(remoting.SendMessage, b.handleSend, send)
	r.Register(remoting.SendMessageV2, b.handleSend, send)
	r.Register(remoting.SendBatchMessage, b.handleSendBatch, send)
	r.Register(remoting.PullMessage, b.handlePull, remoting.Mode{KeepsNothing: true})
	r.Register(remoting.HeartBeat, b.handleHeartbeat)
	r.Register(remoting.UnregisterClient, b.handleUnregisterClient)
	r.Register(remoting.GetConsumerListByGroup, b.handleConsumerList)
	r.Register(remoting.QueryConsumerOffset, b.handleQueryOffset, inline)
	r.Register(remoting.UpdateConsumerOffset, b.handleUpdateOffset, inline)
	r.Register(remoting.GetMaxOffset, b.handleMaxOffset, inline)
	r.Register(remoting.GetMinOffset, b.handleMinOffset, inline)
	r.Register(remoting.SearchOffsetByTimestamp, b.handleSearchOffset)
	r.Register(remoting.GetEarliestMsgStoreTime, b.handleEarliestTime)
	r.Register(remoting.ViewMessageByID, b.handleViewMessage)
	r.Register(remoting.QueryMessage, b.handleQueryMessage)
	r.Register(remoting.UpdateAndCreateTopic, b.handleCreateTopic)
	r.Register(remoting.DeleteTopicInBroker, b.handleDeleteTopic)
	r.Register(remoting.GetAllTopicConfig, b.handleAllTopicConfig)
	r.Register(remoting.GetAllConsumerOffset, b.handleAllConsumerOffset)
	r.Register(remoting.GetAllSubscriptionGroupConfig, b.handleAllGroupConfig)
	r.Register(remoting.UpdateAndCreateSubscriptionGroup, b.handleCreateGroup)
	r.Register(remoting.DeleteSubscriptionGroup, b.handleDeleteGroup)
	r.Register(remoting.CheckClientConfig, b.handleCheckClientConfig)
	locks := newLockTable(b.cfg.RebalanceLockMaxLiveTime)
	r.Register(remoting.LockBatchMQ, locks.handleLock)
	r.Register(remoting.UnlockBatchMQ, locks.handleUnlock)
	b.registerStats()    // runtime.go, stats.go
	b.registerACLAdmin() // acl_admin.go
	b.registerAdmin()    // admin_*.go
}

func (b *Broker) handleHeartbeat(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	var hb protocol.HeartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("bad heartbeat body: %v", err))
	}
	if hb.ClientID == "" {
		return remoting.Errorf(req, remoting.SystemError, "heartbeat without clientID")
	}
	var changed []string
	// One heartbeat carries every group of a client process: a group
	// whose subscription does not compile is refused, the others and the
	// producers are still registered.
	var refused *remoting.Command
	// New groups and their retry topics: one write each (send.go).
	if resp := b.ensureConsumerGroups(req, hb.ConsumerDataSet); resp != nil {
		return resp
	}
groups:
	for i := range hb.ConsumerDataSet {
		cd := &hb.ConsumerDataSet[i]
		if why := b.groupHeldElsewhere(cd.GroupName); why != "" {
			if refused == nil {
				refused = remoting.Errorf(req, remoting.NoPermission, why)
			}
			continue
		}
		subs := make(map[string]*subscription, len(cd.SubscriptionDataSet))
		for _, sd := range cd.SubscriptionDataSet {
			typ := sd.ExpressionType
			if typ == "" {
				typ = filter.TypeTag
			}
			m, err := b.filters.compile(typ, sd.SubString)
			if err != nil {
				if refused == nil {
					refused = remoting.Errorf(req, remoting.SubscriptionParseFailed, fmt.Sprintf("parse the consumer's subscription[%s] of topic %s failed, group: %s: %v", sd.SubString, sd.Topic, cd.GroupName, err))
				}
				continue groups
			}
			subs[sd.Topic] = &subscription{data: sd, matcher: m}
		}
		if b.clients.registerConsumer(p, hb.ClientID, cd, subs) {
			changed = append(changed, cd.GroupName)
			b.log.Info("consumer registered", "group", cd.GroupName, "client", hb.ClientID, "remote", p.RemoteAddr())
		}
	}
	for _, pd := range hb.ProducerDataSet {
		b.clients.registerProducer(p, hb.ClientID, pd.GroupName)
	}
	if len(changed) > 0 {
		b.notifyChanged(ctx, changed)
	}
	if refused != nil {
		return refused
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleUnregisterClient(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	id := e.String("clientID")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	changed := b.clients.unregister(id, e.OptString("producerGroup"), e.OptString("consumerGroup"))
	b.notifyChanged(ctx, changed)
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleConsumerList(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group := e.String("consumerGroup")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	ids := b.clients.consumerIDs(group)
	if len(ids) == 0 {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("no consumer for this group, %s", group))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(protocol.ConsumerIDList{ConsumerIDList: ids})
	return resp
}

func (b *Broker) handleQueryOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group, topic, q := e.String("consumerGroup"), e.String("topic"), e.Int32("queueId")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	if off, ok := b.offsets.query(group, topic, q); ok {
		resp.SetExtInt("offset", off)
		return resp
	}
	// Like Java: a queue that still starts at 0 is consumed from the start
	// by a new group, whatever its consume-from-where.
	min, _, err := b.store.Offsets(store.Queue{Topic: topic, ID: q})
	if err == nil && min <= 0 {
		resp.SetExt("offset", "0")
		return resp
	}
	return remoting.Errorf(req, remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
}

func (b *Broker) handleUpdateOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group, topic, q, off := e.String("consumerGroup"), e.String("topic"), e.Int32("queueId"), e.Int64("commitOffset")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if off < 0 {
		// Stored, it would come back to the consumer as where to resume.
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("commitOffset %d of %s queue %d is negative", off, topic, q))
	}
	if _, ok := b.topics.get(topic); !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist", topic))
	}
	b.offsets.commit(group, topic, q, off)
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) queueArg(req *remoting.Command) (store.Queue, *remoting.Ext) {
	e := remoting.ReadExt(req)
	return store.Queue{Topic: e.String("topic"), ID: e.Int32("queueId")}, e
}

func (b *Broker) handleMaxOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	q, e := b.queueArg(req)
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	_, max, err := b.store.Offsets(q)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("offset", max)
	return resp
}

func (b *Broker) handleMinOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	q, e := b.queueArg(req)
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	min, _, err := b.store.Offsets(q)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("offset", min)
	return resp
}

func (b *Broker) handleSearchOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	q, e := b.queueArg(req)
	ts := e.Int64("timestamp")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	off, err := b.store.OffsetByTime(ctx, q, ts)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("offset", off)
	return resp
}

func (b *Broker) handleEarliestTime(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	q, e := b.queueArg(req)
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	min, max, err := b.store.Offsets(q)
	if err != nil || min >= max {
		return remoting.Errorf(req, remoting.SystemError, "no message in queue")
	}
	var res store.ReadResult
	if err := b.store.Read(ctx, q, min, store.ReadOptions{MaxMessages: 1}, &res); err != nil || len(res.Records) == 0 {
		return remoting.Errorf(req, remoting.SystemError, "no message in queue")
	}
	h, err := message.PeekHeader(res.Records[0])
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("timestamp", h.StoreTimestamp)
	return resp
}

func (b *Broker) handleViewMessage(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	off := e.Int64("offset")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	rec, err := b.store.Lookup(ctx, off)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("can not find message by the offset, %d: %v", off, err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = b.forClient(slices.Clone(rec))
	return resp
}

func (b *Broker) handleQueryMessage(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, key := e.String("topic"), e.String("key")
	max := int(e.OptInt32("maxNum", 32))
	begin, end := e.OptInt64("beginTimestamp", 0), e.OptInt64("endTimestamp", 1<<62)
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if e.Bool("_UNIQUE_KEY_QUERY") || max <= 0 || max > 64 {
		max = 64
	}
	ki, ok := b.store.(store.KeyIndexer)
	if !ok {
		return remoting.Errorf(req, remoting.QueryNotFound, "this store keeps no key index")
	}
	recs, err := ki.QueryByKey(ctx, topic, key, begin, end, max)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if len(recs) == 0 {
		return remoting.Errorf(req, remoting.QueryNotFound, "can not find message, maybe time range not correct")
	}
	for i, rec := range recs {
		recs[i] = b.forClient(slices.Clone(rec))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.BodyParts = recs
	resp.SetExt("indexLastUpdateTimestamp", "0")
	resp.SetExt("indexLastUpdatePhyoffset", "0")
	return resp
}

// invalidParameter is Java's ResponseCode.INVALID_PARAMETER.
const invalidParameter int32 = 29

func (b *Broker) handleCreateTopic(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	tc := &protocol.TopicConfig{
		TopicName:       e.String("topic"),
		ReadQueueNums:   e.OptInt32("readQueueNums", int32(b.cfg.DefaultTopicQueues)),
		WriteQueueNums:  e.OptInt32("writeQueueNums", int32(b.cfg.DefaultTopicQueues)),
		Perm:            e.OptInt32("perm", protocol.PermRead|protocol.PermWrite),
		TopicFilterType: e.OptString("topicFilterType"),
		TopicSysFlag:    e.OptInt32("topicSysFlag", 0),
		Order:           e.Bool("order"),
	}
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if err := protocol.ValidateTopic(tc.TopicName); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if resp := b.refuseSystemTopic(req, tc.TopicName); resp != nil {
		return resp
	}
	if tc.ReadQueueNums < 1 || tc.WriteQueueNums < 1 || tc.ReadQueueNums > 1024 || tc.WriteQueueNums > 1024 {
		return remoting.Errorf(req, remoting.SystemError, "queue numbers must be within 1..1024")
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = "SINGLE_TAG"
	}
	// RocketMQ 5's attribute modifications (protocol.ParseAttributeMods),
	// refused as Java's AdminBrokerProcessor and TopicConfigManager do.
	mods, err := protocol.ParseAttributeMods(e.OptString("attributes"))
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if mods["+"+protocol.AttrMessageType] == protocol.MessageTypeMixed {
		// Java's enableMixedMessageType, false by default.
		return remoting.Errorf(req, invalidParameter, "MIXED message type is not supported.")
	}
	if _, ok := mods["+"+protocol.AttrReserveTime]; ok {
		// Java refuses it without its tiered store.
		return remoting.Errorf(req, remoting.SystemError, "Update topic reserveTime not supported")
	}
	tc, changed, err := b.topics.putAltered(tc, mods)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if changed {
		b.log.Info("topic updated", "topic", tc.TopicName, "read", tc.ReadQueueNums, "write", tc.WriteQueueNums, "perm", tc.Perm)
		// As Java's registerIncrementBrokerData: the name servers know
		// the topic before the answer, so a producer started right after
		// gets its route (not TBW102's).
		b.registerTopicNow(ctx, *tc)
		b.topicsChanged(tc.TopicName)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleDeleteTopic(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if protocol.IsSystemTopic(topic) || topic == protocol.AutoCreateTopic {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("the topic[%s] is a system topic", topic))
	}
	removed, err := b.topics.remove(topic)
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	b.offsets.removeTopic(topic)
	if d, ok := b.store.(store.TopicDeleter); ok {
		if err := d.DeleteTopic(ctx, topic); err != nil {
			return remoting.Errorf(req, remoting.SystemError, err.Error())
		}
	}
	if removed {
		b.triggerRegister()
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleAllTopicConfig(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	snap := b.topics.snapshot()
	resp.Body, _ = json.Marshal(&snap)
	return resp
}

func (b *Broker) handleAllGroupConfig(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(map[string]any{
		"subscriptionGroupTable": b.groups.snapshot(),
		"dataVersion":            b.topics.snapshot().DataVersion,
	})
	return resp
}

func (b *Broker) handleCreateGroup(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	// Fields the body leaves out keep Java's defaults (fastjson fills a
	// default-constructed SubscriptionGroupConfig): a body of just the
	// name must not make a group with consumption off and 0 retries.
	gc := *defaultGroupConfig("")
	if err := json.Unmarshal(req.Body, &gc); err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("bad subscription group body: %v", err))
	}
	if err := protocol.ValidateGroup(gc.GroupName); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if err := validateRetryPolicy(gc.GroupRetryPolicy); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	if err := b.groups.put(&gc); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleDeleteGroup(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	g := e.String("groupName")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	if err := b.groups.remove(g); err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleCheckClientConfig(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	var body struct {
		Group          string `json:"group"`
		ExpressionType string `json:"expressionType"`
		SubString      string `json:"subString"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("bad body: %v", err))
	}
	if _, err := b.filters.compile(body.ExpressionType, body.SubString); err != nil {
		return remoting.Errorf(req, remoting.SubscriptionParseFailed, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}
