package main

// The console's message trace (as rocketmq-dashboard's message trace
// page): the trace records of a message id read from the trace topic by
// client/admin's QueryTraceBy, with the send and each consumer group's
// deliveries summed up. Traces exist when the brokers keep a trace topic
// (broker.trace_topic_enable) and the clients trace (the official
// clients' enableMsgTrace, Quiver's producer/consumer WithTrace). Also
// here: a message's consume status per group, and having a group's
// consumer consume it again (resend to group).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/trace"
)

// traceGroup is one consumer group's deliveries of a traced message.
type traceGroup struct {
	Group string `json:"group"`
	// Deliveries counts the consumes begun (SubBefore); Failed those that
	// ended other than successfully (SubAfter).
	Deliveries int `json:"deliveries"`
	Failed     int `json:"failed"`
	// Status is the last outcome: success, failed, or consuming (begun,
	// not ended).
	Status    string `json:"status"`
	LastAt    int64  `json:"lastAt"`
	CostMs    int64  `json:"costTime"` // of the last finished consume
	LastRetry int    `json:"retryTimes"`
}

// traceAnswer is GET /api/trace's answer.
type traceAnswer struct {
	MsgID      string `json:"msgId"`
	TraceTopic string `json:"traceTopic"`
	// Note says why there is nothing to show, when there is not.
	Note    string                    `json:"note,omitempty"`
	Pub     []clientadmin.TraceRecord `json:"pub"`
	Groups  []traceGroup              `json:"groups"`
	Records []clientadmin.TraceRecord `json:"records"`
}

func (c *consoleServer) traceOf(ctx context.Context, a *adm, msgID, topic string) (*traceAnswer, error) {
	msgID = strings.TrimSpace(msgID)
	if msgID == "" {
		return nil, badRequest("give a msgId")
	}
	topic = orDefault(strings.TrimSpace(topic), trace.DefaultTopic)
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	ans := &traceAnswer{MsgID: msgID, TraceTopic: topic, Pub: []clientadmin.TraceRecord{}, Groups: []traceGroup{}, Records: []clientadmin.TraceRecord{}}
	recs, err := lib.QueryTraceBy(ctx, clientadmin.TraceQuery{Topic: topic, MsgID: msgID})
	switch {
	case errors.Is(err, client.ErrNoRoute):
		ans.Note = "no trace topic " + topic + ": traces are off (broker.trace_topic_enable, or the clients' own trace topic)"
		return ans, nil
	case errors.Is(err, clientadmin.ErrBadMessageID):
		return nil, badRequest("%v", err)
	case err != nil:
		return nil, codeErr(err)
	}
	if len(recs) == 0 {
		ans.Note = "no trace records of " + msgID + " in " + topic + " (the producer and consumers trace only when enabled)"
		return ans, nil
	}
	ans.Records = recs
	by := map[string]*traceGroup{}
	for _, r := range recs {
		switch r.Type {
		case trace.Pub, trace.EndTransaction, trace.Recall:
			ans.Pub = append(ans.Pub, r)
		case trace.SubBefore:
			g := traceGroupOf(by, r.Group)
			g.Deliveries++
			g.Status, g.LastAt, g.LastRetry = "consuming", r.Timestamp, r.RetryTimes
		case trace.SubAfter:
			g := traceGroupOf(by, r.Group)
			g.Status, g.CostMs = r.Status, r.CostMs
			if !r.Success {
				g.Failed++
			}
			if r.Timestamp > 0 {
				g.LastAt = r.Timestamp
			}
		}
	}
	for _, name := range sortedKeys(by) {
		ans.Groups = append(ans.Groups, *by[name])
	}
	return ans, nil
}

func traceGroupOf(by map[string]*traceGroup, name string) *traceGroup {
	g := by[name]
	if g == nil {
		g = &traceGroup{Group: name}
		by[name] = g
	}
	return g
}

// messageTrack is one group's consumption of one message (Java's
// MessageTrack, as rocketmq-dashboard's message detail shows it).
type messageTrack struct {
	Group string `json:"consumerGroup"`
	// TrackType is one of Java's TrackType: CONSUMED (a message the
	// group's subscription filtered out counts as consumed too; Java says
	// CONSUMED_BUT_FILTERED), NOT_CONSUME_YET, NOT_ONLINE or UNKNOWN
	// (broadcast groups keep their offsets on the clients).
	TrackType string `json:"trackType"`
	Detail    string `json:"detail,omitempty"`
}

// messageTracks answers, for every group consuming the message's topic,
// whether it has consumed the message: its committed offset on the
// message's queue is past the message's offset.
func (c *consoleServer) messageTracks(ctx context.Context, a *adm, m messageView) ([]messageTrack, error) {
	groups, err := c.topicGroups(ctx, a, m.Topic)
	if err != nil {
		return nil, err
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	out := []messageTrack{}
	for _, g := range groups {
		t := messageTrack{Group: g.Group}
		switch {
		case g.Model == "BROADCASTING":
			t.TrackType, t.Detail = "UNKNOWN", "broadcast consumers keep their offsets"
		case g.Clients == 0:
			t.TrackType = "NOT_ONLINE"
		default:
			t.TrackType = "NOT_CONSUME_YET"
			for _, b := range ms {
				if b.Name != m.Broker {
					continue
				}
				cs, err := lib.ConsumeStats(ctx, b.Addr, g.Group, m.Topic)
				if err != nil {
					return nil, codeErr(err)
				}
				for mq, w := range cs.OffsetTable {
					if mq.Topic == m.Topic && mq.BrokerName == m.Broker && mq.QueueID == m.QueueID && w.ConsumerOffset > m.QueueOffset {
						t.TrackType = "CONSUMED"
					}
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// consumeDirectly has one online consumer of group consume the message
// again now (CONSUME_MESSAGE_DIRECTLY through the message's broker, as
// rocketmq-dashboard's "Resend message" to a group): clientID, or each
// online client of the group in turn until one answers. It answers the
// client's ConsumeMessageDirectlyResult as it sent it.
func (c *consoleServer) consumeDirectly(ctx context.Context, a *adm, m messageView, group, clientID string) (map[string]any, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	addr, err := c.brokerAddr(ctx, a, m.Broker)
	if err != nil {
		return nil, err
	}
	clients := []string{clientID}
	if clientID == "" {
		cc, online, err := lib.ConsumerConnections(ctx, addr, group)
		if err != nil {
			return nil, codeErr(err)
		}
		if !online || len(cc.ConnectionSet) == 0 {
			return nil, badRequest("group %s has no consumer online on %s", group, m.Broker)
		}
		clients = clients[:0]
		for _, cn := range cc.ConnectionSet {
			clients = append(clients, cn.ClientID)
		}
		sort.Strings(clients)
	}
	var last error
	for _, id := range clients {
		body, err := lib.ConsumeMessageDirectly(ctx, addr, group, id, m.OffsetMsgID, m.Topic, m.Broker)
		if err != nil {
			last = fmt.Errorf("consume directly on %s: %w", id, err)
			continue
		}
		var res map[string]any
		if err := json.Unmarshal(body, &res); err != nil {
			return nil, fmt.Errorf("consume directly on %s: %w", id, err)
		}
		return map[string]any{"consumerGroup": group, "clientId": id, "msgId": m.MsgID, "result": res}, nil
	}
	return nil, last
}

func (c *consoleServer) traceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/messages/consume", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		id, group := strings.TrimSpace(r.FormValue("id")), strings.TrimSpace(r.FormValue("group"))
		if id == "" || group == "" {
			return nil, badRequest("give id and group")
		}
		msgs, err := a.messagesByID(ctx, id, r.FormValue("topic"))
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return nil, badRequest("no message %s", id)
		}
		return c.consumeDirectly(ctx, a, msgs[0], group, strings.TrimSpace(r.FormValue("clientId")))
	}))
	mux.HandleFunc("GET /api/trace", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return c.traceOf(ctx, a, r.URL.Query().Get("msgId"), r.URL.Query().Get("topic"))
	}))
	mux.HandleFunc("GET /api/messages/track", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		q := r.URL.Query()
		id := strings.TrimSpace(q.Get("id"))
		if id == "" {
			return nil, badRequest("give an id")
		}
		msgs, err := a.messagesByID(ctx, id, q.Get("topic"))
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return nil, badRequest("no message %s", id)
		}
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].StoreTimestamp > msgs[j].StoreTimestamp })
		tracks, err := c.messageTracks(ctx, a, msgs[0])
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": msgs[0], "tracks": tracks, "at": time.Now().UnixMilli()}, nil
	}))
}
