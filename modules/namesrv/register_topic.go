package namesrv

import (
	"context"
	"encoding/json"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Incremental registration. A broker that creates or changes one topic
// registers just that topic (REGISTER_TOPIC_IN_NAMESRV, RocketMQ 5's code:
// header "topic", body a TopicRouteData whose queueDatas are the topic's
// queue layout on the broker) instead of its whole topic table, so a
// change costs the same at 100 topics and at 100,000.
//
// Quiver's brokers add two header fields: DataVersionExt, the broker's
// topic-table data version after the change, and PrevDataVersionExt, the
// version before it. When the version this name server holds for the
// broker is the previous one, it takes the new one, so the broker's next
// periodic QUERY_DATA_VERSION finds nothing changed and no full
// registration follows. Otherwise (a change missed, a Java broker) the
// version stays and the next periodic registration sends the whole table.
const (
	DataVersionExt     = "quiverDataVersion"
	PrevDataVersionExt = "quiverPrevDataVersion"
)

func (s *Server) registerTopic(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	if topic == "" {
		return sysErr(req, "the topic is missing")
	}
	var rd struct {
		QueueDatas []protocol.QueueData `json:"queueDatas"`
	}
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &rd); err != nil {
			return sysErr(req, "namesrv: register topic %s: body: %v", topic, err)
		}
	}
	var next, prev *protocol.DataVersion
	if v := req.Ext(DataVersionExt); v != "" {
		next = new(protocol.DataVersion)
		if err := json.Unmarshal([]byte(v), next); err != nil {
			return sysErr(req, "%s: %v", DataVersionExt, err)
		}
	}
	if v := req.Ext(PrevDataVersionExt); v != "" {
		prev = new(protocol.DataVersion)
		if err := json.Unmarshal([]byte(v), prev); err != nil {
			return sysErr(req, "%s: %v", PrevDataVersionExt, err)
		}
	}
	if bad := s.routes.RegisterTopic(topic, rd.QueueDatas, req.Ext("brokerAddr"), prev, next); bad != "" {
		// As Java: a queue of a broker name not registered is left out
		// (and the request still succeeds).
		s.log.Warn("register topic: broker not registered", "topic", topic, "brokerName", bad)
	}
	return ok(req)
}

// RegisterTopic upserts topic's queue data (REGISTER_TOPIC_IN_NAMESRV). As
// Java's RouteInfoManager.registerTopic, nothing is registered when a
// queue names a broker that is not registered; that name is returned.
// With brokerAddr, prev and next (Quiver brokers), the broker's data
// version moves from prev to next when prev is the one held.
func (t *RouteTable) RegisterTopic(topic string, qds []protocol.QueueData, brokerAddr string, prev, next *protocol.DataVersion) (unknownBroker string) {
	if len(qds) == 0 {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, qd := range qds {
		if _, ok := t.brokers[qd.BrokerName]; !ok {
			return qd.BrokerName
		}
	}
	for _, qd := range qds {
		t.upsertQueueData(topic, qd)
	}
	if brokerAddr != "" && prev != nil && next != nil {
		if lb, ok := t.live[brokerAddr]; ok && lb.DataVersion == *prev {
			lb.DataVersion = *next
		}
	}
	return ""
}
