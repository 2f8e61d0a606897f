package broker

// Admin statistics: GET_TOPIC_STATS_INFO (202), GET_CONSUMER_CONNECTION_LIST
// (203) and GET_CONSUME_STATS (208), answered in RocketMQ's JSON shapes so
// mqadmin-style tools read them from Quiver and Apache brokers alike.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// registerStats wires the runtime and statistics processors, the broker's
// own stored-message counter and the heartbeat interceptor that remembers
// each connection's client language and version.
func (b *Broker) registerStats() {
	b.obs.bootMs = nowMs()
	b.registerRuntime()
	b.AddStoredListener(b.obs.observeStored)
	b.router.Use(rememberClient, remoting.Mode{NoExtMap: true}) // reads no extFields
	r := b.router
	r.Register(remoting.GetBrokerRuntimeInfo, b.handleRuntimeInfo)
	r.Register(remoting.GetTopicStatsInfo, b.handleTopicStats)
	r.Register(remoting.GetConsumeStats, b.handleConsumeStats)
	r.Register(remoting.GetConsumerConnectionList, b.handleConsumerConnections)
}

type clientVersionKey struct{}

type clientVersion struct {
	language string
	version  int32
}

// rememberClient records the language and version a connection's
// heartbeats carry; it never answers.
func rememberClient(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	if req.Code == remoting.HeartBeat && p != nil {
		if v, ok := p.Value(clientVersionKey{}); !ok || v.(clientVersion) != (clientVersion{req.Language, req.Version}) {
			p.SetValue(clientVersionKey{}, clientVersion{req.Language, req.Version})
		}
	}
	return nil
}

// mqKey writes a MessageQueue as fastjson writes a map key: an object with
// its fields in alphabetical order.
func mqKey(sb *strings.Builder, topic, broker string, q int32) {
	t, _ := json.Marshal(topic)
	bn, _ := json.Marshal(broker)
	fmt.Fprintf(sb, `{"brokerName":%s,"queueId":%d,"topic":%s}`, bn, q, t)
}

// storeTime is the store timestamp of the message at offset of q (0 when
// it cannot be read).
func (b *Broker) storeTime(ctx context.Context, q store.Queue, offset int64) int64 {
	if offset < 0 {
		return 0
	}
	var res store.ReadResult
	if err := b.store.Read(ctx, q, offset, store.ReadOptions{MaxMessages: 1}, &res); err != nil || len(res.Records) == 0 {
		return 0
	}
	h, err := message.PeekHeader(res.Records[0])
	if err != nil {
		return 0
	}
	return h.StoreTimestamp
}

func (b *Broker) handleTopicStats(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	tc, ok := b.topics.get(topic)
	if !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist", topic))
	}
	var sb strings.Builder
	sb.WriteString(`{"offsetTable":{`)
	for i := int32(0); i < tc.WriteQueueNums; i++ {
		q := store.Queue{Topic: topic, ID: i}
		min, max, err := b.store.Offsets(q)
		if err != nil {
			return remoting.Errorf(req, remoting.SystemError, err.Error())
		}
		var last int64
		if max > 0 {
			last = b.storeTime(ctx, q, max-1)
		}
		if i > 0 {
			sb.WriteByte(',')
		}
		mqKey(&sb, topic, b.cfg.Name, i)
		fmt.Fprintf(&sb, `:{"lastUpdateTimestamp":%d,"maxOffset":%d,"minOffset":%d}`, last, max, min)
	}
	sb.WriteString(`}}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}

// topicsOfGroup lists the topics group has committed offsets on, sorted.
func (o *offsetTable) topicsOfGroup(group string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.table {
		if t, g, _ := cutOffsetKey(k); g == group {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// cutOffsetKey splits an offsetKey into topic and group (topic names hold
// no '@').
func cutOffsetKey(k string) (topic, group string, ok bool) { return strings.Cut(k, "@") }

func (b *Broker) handleConsumeStats(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group, only := e.String("consumerGroup"), e.OptString("topic")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	topics := []string{only}
	if only == "" {
		topics = b.offsets.topicsOfGroup(group)
	}
	online := len(b.clients.consumerIDs(group)) > 0
	var sb strings.Builder
	sb.WriteString(`{"consumeTps":0.0,"offsetTable":{`)
	n := 0
	for _, topic := range topics {
		tc, ok := b.topics.get(topic)
		if !ok {
			continue
		}
		// Like Java: an online group that no longer subscribes to the
		// topic is not reported on it.
		if _, sub := b.clients.subscriptionOf(group, topic); online && !sub && only == "" {
			continue
		}
		for i := int32(0); i < tc.ReadQueueNums; i++ {
			q := store.Queue{Topic: topic, ID: i}
			_, max, err := b.store.Offsets(q)
			if err != nil {
				return remoting.Errorf(req, remoting.SystemError, err.Error())
			}
			off, ok := b.offsets.query(group, topic, i)
			if !ok || off < 0 {
				off = 0
			}
			var last int64
			if off > 0 {
				last = b.storeTime(ctx, q, off-1)
			}
			if n > 0 {
				sb.WriteByte(',')
			}
			n++
			mqKey(&sb, topic, b.cfg.Name, i)
			fmt.Fprintf(&sb, `:{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":%d}`, max, off, last)
		}
	}
	sb.WriteString(`}}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}

// Connection is one client connection of a group (Java Connection).
type Connection struct {
	// Fields in fastjson's (alphabetical) order, so the bytes are Java's.
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection is the GET_CONSUMER_CONNECTION_LIST answer (Java
// ConsumerConnection).
type ConsumerConnection struct {
	ConnectionSet     []Connection               `json:"connectionSet"`
	SubscriptionTable map[string]json.RawMessage `json:"subscriptionTable"`
	ConsumeType       string                     `json:"consumeType"`
	MessageModel      string                     `json:"messageModel"`
	ConsumeFromWhere  string                     `json:"consumeFromWhere"`
}

// consumerConnection snapshots a consumer group's connections and
// subscriptions; ok is false when no client of the group is online.
func (t *clientTable) consumerConnection(group string) (ConsumerConnection, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.consumers[group]
	if !ok || len(g.clients) == 0 {
		return ConsumerConnection{}, false
	}
	cc := ConsumerConnection{ConsumeType: g.consumeType, MessageModel: g.messageModel, ConsumeFromWhere: g.consumeFromWhere,
		SubscriptionTable: make(map[string]json.RawMessage, len(g.subs))}
	for _, c := range g.clients {
		conn := Connection{ClientID: c.id, ClientAddr: c.peer.RemoteAddr()}
		if v, ok := c.peer.Value(clientVersionKey{}); ok {
			cv := v.(clientVersion)
			conn.Language, conn.Version = cv.language, cv.version
		}
		cc.ConnectionSet = append(cc.ConnectionSet, conn)
	}
	sort.Slice(cc.ConnectionSet, func(i, j int) bool { return cc.ConnectionSet[i].ClientID < cc.ConnectionSet[j].ClientID })
	for topic, s := range g.subs {
		cc.SubscriptionTable[topic], _ = json.Marshal(s.data)
	}
	return cc, true
}

// ConsumerConnections returns a group's online connections (metrics,
// console); ok is false when none is online.
func (b *Broker) ConsumerConnections(group string) (ConsumerConnection, bool) {
	return b.clients.consumerConnection(group)
}

// ConsumerGroups lists the groups with an online consumer, sorted.
func (b *Broker) ConsumerGroups() []string { return b.clients.groups() }

func (b *Broker) handleConsumerConnections(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	group := e.String("consumerGroup")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	cc, ok := b.clients.consumerConnection(group)
	if !ok {
		return remoting.Errorf(req, remoting.ConsumerNotOnline, fmt.Sprintf("the consumer group[%s] not online", group))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(cc)
	return resp
}
