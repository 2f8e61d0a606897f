package broker

// Client-facing admin codes: GET_PRODUCER_CONNECTION_LIST (204), and the
// calls the broker passes through to a client over the connection that
// client heartbeats on (Java Broker2Client.callClient):
// GET_CONSUMER_RUNNING_INFO (307), CONSUME_MESSAGE_DIRECTLY (309) and
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), which asks every consumer of
// a group with GET_CONSUMER_STATUS_FROM_CLIENT (221) and gathers the
// answers.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Java ResponseCode.CONSUME_MSG_TIMEOUT: a client did not answer in time.
const consumeMsgTimeout int32 = 207

// callClientTimeout bounds a passed-through call (Java: 10 s; 5 s for the
// consumer-status round).
const (
	callClientTimeout   = 10 * time.Second
	clientStatusTimeout = 5 * time.Second
)

// ProducerConnection is the GET_PRODUCER_CONNECTION_LIST answer (Java
// ProducerConnection).
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// connectionOf describes one client channel as Java's Connection.
func connectionOf(c *clientChannel) Connection {
	conn := Connection{ClientID: c.id, ClientAddr: c.peer.RemoteAddr()}
	if v, ok := c.peer.Value(clientVersionKey{}); ok {
		cv := v.(clientVersion)
		conn.Language, conn.Version = cv.language, cv.version
	}
	return conn
}

// producerConnection snapshots a producer group's connections; ok is false
// when the group has none.
func (t *clientTable) producerConnection(group string) (ProducerConnection, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.producers[group]
	if !ok || len(g.clients) == 0 {
		return ProducerConnection{}, false
	}
	pc := ProducerConnection{ConnectionSet: make([]Connection, 0, len(g.clients))}
	for _, c := range g.clients {
		pc.ConnectionSet = append(pc.ConnectionSet, connectionOf(c))
	}
	sort.Slice(pc.ConnectionSet, func(i, j int) bool { return pc.ConnectionSet[i].ClientID < pc.ConnectionSet[j].ClientID })
	return pc, true
}

// ProducerConnections returns a producer group's live connections; ok is
// false when none is known.
func (b *Broker) ProducerConnections(group string) (ProducerConnection, bool) {
	return b.clients.producerConnection(group)
}

// consumerChannel is one consumer's connection, found by client id.
type consumerChannel struct {
	id   string
	peer *remoting.Peer
}

// consumerChannels lists a consumer group's connections sorted by client
// id; with clientID set, only that client's.
func (t *clientTable) consumerChannels(group, clientID string) []consumerChannel {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.consumers[group]
	if !ok {
		return nil
	}
	out := make([]consumerChannel, 0, len(g.clients))
	for id, c := range g.clients {
		if clientID == "" || id == clientID {
			out = append(out, consumerChannel{id: id, peer: c.peer})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (b *Broker) handleProducerConnections(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group := e.String("producerGroup")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	pc, ok := b.clients.producerConnection(group)
	if !ok {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("the producer group[%s] not exist", group))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(pc)
	return resp
}

// callConsumer passes req through to the consumer clientID of group and
// relays its answer (Java AdminBrokerProcessor.callConsumer).
func (b *Broker) callConsumer(ctx context.Context, req *remoting.Command, code int32, group, clientID string, body []byte) *remoting.Command {
	chans := b.clients.consumerChannels(group, clientID)
	if clientID == "" || len(chans) == 0 {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("The Consumer <%s> <%s> not online", group, clientID))
	}
	ext := make(map[string]string, len(req.ExtMap()))
	for k, v := range req.ExtMap() {
		ext[k] = v
	}
	ctx, cancel := context.WithTimeout(ctx, callClientTimeout)
	defer cancel()
	got, err := chans[0].peer.Invoke(ctx, remoting.NewRequest(code, ext, body))
	if err != nil {
		if ctx.Err() != nil {
			return remoting.Errorf(req, consumeMsgTimeout, fmt.Sprintf("consumer <%s> <%s> Timeout: %v", group, clientID, err))
		}
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("invoke consumer <%s> <%s> Exception: %v", group, clientID, err))
	}
	return relay(req, got)
}

// relay answers req with a client's response to the passed-through call.
func relay(req, got *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, got.Code, got.Remark)
	for k, v := range got.ExtMap() {
		resp.SetExt(k, v)
	}
	resp.Body = got.Body
	return resp
}

func (b *Broker) handleConsumerRunningInfo(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group, clientID := e.String("consumerGroup"), e.String("clientId")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	return b.callConsumer(ctx, req, remoting.GetConsumerRunningInfo, group, clientID, req.Body)
}

// handleConsumeMessageDirectly passes the message named by msgId (an
// offsetMsgId) to one consumer for it to consume now, as Java does,
// telling it which broker sent it.
func (b *Broker) handleConsumeMessageDirectly(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	// Java: only consumerGroup is required; without clientId no consumer
	// is found.
	group, clientID, msgID := e.String("consumerGroup"), e.OptString("clientId"), e.OptString("msgId")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	req.ExtMap()["brokerName"] = b.cfg.Name
	body := req.Body
	if _, off, err := message.ParseOffsetMsgID(msgID); err == nil {
		if rec, err := b.store.Lookup(ctx, off); err == nil {
			body = b.forClient(slices.Clone(rec))
		}
	}
	return b.callConsumer(ctx, req, remoting.ConsumeMessageDirectly, group, clientID, body)
}

// queueOffset is one row of a MessageQueue-keyed offset table.
type queueOffset struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	offset     int64
}

// parseQueueOffsets reads the rows of the table held by field in a
// fastjson body ({"messageQueueTable":{{...}:5,...}}).
func parseQueueOffsets(body []byte, field string) ([]queueOffset, error) {
	var fields map[string]json.RawMessage
	if err := protocol.UnmarshalFastjson(body, &fields); err != nil {
		return nil, err
	}
	raw, ok := fields[field]
	if !ok {
		return nil, fmt.Errorf("no %s in %.200q", field, body)
	}
	var t protocol.MQTable[int64]
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	out := make([]queueOffset, 0, len(t))
	for mq, off := range t {
		out = append(out, queueOffset{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID, offset: off})
	}
	return out, nil
}

// writeQueueOffsets writes rows as a fastjson MessageQueue-keyed table.
func writeQueueOffsets(sb *strings.Builder, rows []queueOffset) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
	sb.WriteByte('{')
	for i, r := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		mqKey(sb, r.Topic, r.BrokerName, r.QueueID)
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(r.offset, 10))
	}
	sb.WriteByte('}')
}

// handleConsumerStatus answers INVOKE_BROKER_TO_GET_CONSUMER_STATUS: it
// asks each consumer of the group (or only clientAddr, a client id, when
// set) for its offsets of topic with GET_CONSUMER_STATUS_FROM_CLIENT and
// answers GetConsumerStatusBody {"consumerTable":{clientId:{mq:offset}},
// "messageQueueTable":{}}. A client that fails to answer is left out, as
// in Java.
func (b *Broker) handleConsumerStatus(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, group, only := e.String("topic"), e.String("group"), e.OptString("clientAddr")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	chans := b.clients.consumerChannels(group, only)
	if len(b.clients.consumerChannels(group, "")) == 0 {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("No Any Consumer online in the consumer group: [%s]", group))
	}
	type answer struct {
		id   string
		rows []queueOffset
	}
	answers := make(chan answer, len(chans))
	for _, c := range chans {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, clientStatusTimeout)
			defer cancel()
			r, err := c.peer.Invoke(cctx, remoting.NewRequest(remoting.GetConsumerStatusFromClient, map[string]string{"topic": topic, "group": group}, nil))
			if err != nil || r.Code != remoting.Success || len(r.Body) == 0 {
				b.log.Debug("get consumer status", "group", group, "topic", topic, "client", c.id, "err", err)
				answers <- answer{id: c.id}
				return
			}
			rows, err := parseQueueOffsets(r.Body, "messageQueueTable")
			if err != nil {
				b.log.Debug("get consumer status: bad answer", "client", c.id, "err", err)
				answers <- answer{id: c.id}
				return
			}
			answers <- answer{id: c.id, rows: rows}
		}()
	}
	table := map[string][]queueOffset{}
	for range chans {
		a := <-answers
		if a.rows != nil {
			table[a.id] = a.rows
		}
	}
	var sb strings.Builder
	sb.WriteString(`{"consumerTable":{`)
	for i, id := range sortedKeys(table) {
		if i > 0 {
			sb.WriteByte(',')
		}
		k, _ := json.Marshal(id)
		sb.Write(k)
		sb.WriteByte(':')
		writeQueueOffsets(&sb, table[id])
	}
	sb.WriteString(`},"messageQueueTable":{}}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}

// ProducerInfo is one producer connection in GET_ALL_PRODUCER_INFO (Java
// ProducerInfo; remoteIP as Java's InetSocketAddress.toString writes it).
type ProducerInfo struct {
	ClientID            string `json:"clientId"`
	Language            string `json:"language"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
	RemoteIP            string `json:"remoteIP"`
	Version             int32  `json:"version"`
}

// producerTable snapshots every producer group's connections.
func (t *clientTable) producerTable() map[string][]ProducerInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string][]ProducerInfo, len(t.producers))
	for name, g := range t.producers {
		list := make([]ProducerInfo, 0, len(g.clients))
		for _, c := range g.clients {
			conn := connectionOf(c)
			list = append(list, ProducerInfo{ClientID: conn.ClientID, Language: conn.Language, Version: conn.Version,
				RemoteIP: "/" + conn.ClientAddr, LastUpdateTimestamp: c.lastUpdate.UnixMilli()})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ClientID < list[j].ClientID })
		out[name] = list
	}
	return out
}

// handleAllProducerInfo answers GET_ALL_PRODUCER_INFO with Java's
// ProducerTableInfo: {"data":{group:[ProducerInfo,...]}}.
func (b *Broker) handleAllProducerInfo(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(struct {
		Data map[string][]ProducerInfo `json:"data"`
	}{b.clients.producerTable()})
	return resp
}

// consumersOfTopic lists the online groups subscribing to topic.
func (t *clientTable) consumersOfTopic(topic string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []string
	for name, g := range t.consumers {
		if _, ok := g.subs[topic]; ok {
			out = append(out, name)
		}
	}
	return out
}

// handleTopicConsumeByWho answers QUERY_TOPIC_CONSUME_BY_WHO with Java's
// GroupList: the online groups subscribing to the topic and the groups
// with committed offsets on it.
func (b *Broker) handleTopicConsumeByWho(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	set := map[string]bool{}
	for _, g := range b.clients.consumersOfTopic(topic) {
		set[g] = true
	}
	for _, g := range b.offsets.groupsOf(topic) {
		set[g] = true
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(struct {
		GroupList []string `json:"groupList"`
	}{sortedKeys(set)})
	return resp
}
