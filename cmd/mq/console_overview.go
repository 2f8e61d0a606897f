package main

// The console's overview (broker and topic top-10 by TPS, groups by lag,
// trends of the last hour), its history lines and the topic → consuming
// groups view, all over the sampled history (console_history.go).

import (
	"context"
	"fmt"
	"net/http"
	"sort"
)

// overviewTop is how many rows each overview table shows.
const overviewTop = 10

// overviewTrendTopics is how many topics the overview's trend draws.
const overviewTrendTopics = 5

type brokerRate struct {
	Broker string   `json:"broker"`
	InTps  *float64 `json:"inTps"`
	OutTps *float64 `json:"outTps"`
}

type topicRate struct {
	Topic  string   `json:"topic"`
	InTps  *float64 `json:"inTps"`
	OutTps *float64 `json:"outTps"`
}

type groupRate struct {
	Group      string   `json:"group"`
	Lag        int64    `json:"lag"`
	ConsumeTps *float64 `json:"consumeTps"`
}

// overview is GET /api/overview's answer.
type overview struct {
	Samples   int          `json:"samples"`
	Since     int64        `json:"since"` // the oldest sample, epoch ms
	Brokers   []brokerRate `json:"brokers"`
	TopicsIn  []topicRate  `json:"topicsIn"`
	TopicsOut []topicRate  `json:"topicsOut"`
	GroupsLag []groupRate  `json:"groupsLag"`
	// BrokerTrend and TopicTrend are the last hour's rates of the brokers
	// and of the overviewTrendTopics busiest topics (those written in the
	// last minute).
	BrokerTrend histView `json:"brokerTrend"`
	TopicTrend  histView `json:"topicTrend"`
	// Tracked is how many series of each kind are sampled, and Caps their
	// bounds.
	Tracked map[string]int `json:"tracked"`
	Caps    map[string]int `json:"caps"`
}

func val(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// topBy sorts rs by key, highest first (unknown last, then by name), and
// keeps n.
func topBy[T any](rs []T, n int, key func(T) float64, name func(T) string) []T {
	out := append([]T{}, rs...)
	sort.SliceStable(out, func(i, j int) bool {
		ki, kj := key(out[i]), key(out[j])
		if ki != kj {
			return ki > kj
		}
		return name(out[i]) < name(out[j])
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func (c *consoleServer) overview() overview {
	h := c.hist
	ov := overview{Samples: h.samples(), Brokers: []brokerRate{}, Tracked: map[string]int{}, Caps: map[string]int{}}
	if v := h.view(c.interval, nil); len(v.Times) > 0 {
		ov.Since = v.Times[0]
	}
	var brokers []brokerRate
	var specs []lineSpec
	for _, b := range h.tracked(kindBroker) {
		in, out := h.tps(kindBroker, b)
		brokers = append(brokers, brokerRate{Broker: b, InTps: in, OutTps: out})
		specs = append(specs, lineSpec{kind: kindBroker, name: b, label: b + " in"}, lineSpec{kind: kindBroker, name: b, label: b + " out", b: true})
	}
	ov.Brokers = topBy(brokers, overviewTop, func(r brokerRate) float64 {
		if r.InTps == nil && r.OutTps == nil {
			return -1
		}
		return max(val(r.InTps), 0) + max(val(r.OutTps), 0)
	},
		func(r brokerRate) string { return r.Broker })
	ov.BrokerTrend = h.view(c.interval, specs)
	var topics []topicRate
	for _, t := range h.tracked(kindTopic) {
		in, out := h.tps(kindTopic, t)
		topics = append(topics, topicRate{Topic: t, InTps: in, OutTps: out})
	}
	name := func(r topicRate) string { return r.Topic }
	ov.TopicsIn = topBy(topics, overviewTop, func(r topicRate) float64 { return val(r.InTps) }, name)
	ov.TopicsOut = topBy(topics, overviewTop, func(r topicRate) float64 { return val(r.OutTps) }, name)
	specs = nil
	for _, t := range ov.TopicsIn {
		if len(specs) == overviewTrendTopics || val(t.InTps) <= 0 {
			break
		}
		specs = append(specs, lineSpec{kind: kindTopic, name: t.Topic, label: t.Topic + " in"})
	}
	ov.TopicTrend = h.view(c.interval, specs)
	var groups []groupRate
	for _, g := range h.tracked(kindGroup) {
		lag, _ := h.last(kindGroup, g)
		rate, _ := h.tps(kindGroup, g)
		groups = append(groups, groupRate{Group: g, Lag: lag, ConsumeTps: rate})
	}
	ov.GroupsLag = topBy(groups, overviewTop, func(r groupRate) float64 { return float64(r.Lag) }, func(r groupRate) string { return r.Group })
	if ov.TopicsIn == nil {
		ov.TopicsIn, ov.TopicsOut = []topicRate{}, []topicRate{}
	}
	if ov.GroupsLag == nil {
		ov.GroupsLag = []groupRate{}
	}
	for _, k := range []string{kindBroker, kindTopic, kindGroup} {
		ov.Tracked[k] = len(h.tracked(k))
		ov.Caps[k] = h.caps[k]
	}
	return ov
}

// historyView answers GET /api/history: kind broker (default: every
// broker's in and out rates), topic (name=…: in and out rates), group
// (name=…: consume rate) or lag (name=…, or the 5 groups with the most
// lag: their lag).
func (c *consoleServer) historyView(r *http.Request) (histView, error) {
	q := r.URL.Query()
	names := q["name"]
	h := c.hist
	var specs []lineSpec
	switch kind := orDefault(q.Get("kind"), kindBroker); kind {
	case kindBroker:
		if len(names) == 0 {
			names = h.tracked(kindBroker)
		}
		for _, n := range names {
			specs = append(specs, lineSpec{kind: kindBroker, name: n, label: n + " in"}, lineSpec{kind: kindBroker, name: n, label: n + " out", b: true})
		}
	case kindTopic:
		for _, n := range names {
			specs = append(specs, lineSpec{kind: kindTopic, name: n, label: n + " in"}, lineSpec{kind: kindTopic, name: n, label: n + " out", b: true})
		}
	case kindGroup:
		for _, n := range names {
			specs = append(specs, lineSpec{kind: kindGroup, name: n, label: n + " consumed"})
		}
	case "lag":
		if len(names) == 0 {
			var gs []groupRate
			for _, g := range h.tracked(kindGroup) {
				lag, _ := h.last(kindGroup, g)
				gs = append(gs, groupRate{Group: g, Lag: lag})
			}
			for _, g := range topBy(gs, 5, func(r groupRate) float64 { return float64(r.Lag) }, func(r groupRate) string { return r.Group }) {
				names = append(names, g.Group)
			}
		}
		for _, n := range names {
			specs = append(specs, lineSpec{kind: kindGroup, name: n, label: n, b: true, gauge: true})
		}
	default:
		return histView{}, badRequest("kind %q: want broker, topic, group or lag", kind)
	}
	return h.view(c.interval, specs), nil
}

// topicGroup is one group consuming a topic (GET /api/topics/{t}/groups).
type topicGroup struct {
	Group        string   `json:"group"`
	Lag          int64    `json:"lag"` // on this topic
	LastConsumed int64    `json:"lastConsumed"`
	Clients      int      `json:"clients"`
	ConsumeTps   *float64 `json:"consumeTps"` // the group's, all topics
	Model        string   `json:"messageModel,omitempty"`
}

// topicGroups lists the groups consuming topic: those the masters name
// for it (QUERY_TOPIC_CONSUME_BY_WHO: online subscribers and groups with
// offsets on it), with their lag on it.
func (c *consoleServer) topicGroups(ctx context.Context, a *adm, topic string) ([]topicGroup, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, m := range ms {
		groups, err := lib.TopicConsumers(ctx, m.Addr, topic)
		if err != nil {
			return nil, fmt.Errorf("groups of %s on %s: %w", topic, m.Name, err)
		}
		for _, g := range groups {
			if !isSystemGroup(g) {
				set[g] = true
			}
		}
	}
	out := []topicGroup{}
	for _, g := range sortedKeys(set) {
		tg := topicGroup{Group: g}
		tg.ConsumeTps, _ = c.hist.tps(kindGroup, g)
		for _, m := range ms {
			cs, err := lib.ConsumeStats(ctx, m.Addr, g, topic)
			if err == nil {
				for mq, w := range cs.OffsetTable {
					if mq.Topic == topic {
						tg.Lag += max(w.BrokerOffset-w.ConsumerOffset, 0)
						tg.LastConsumed = max(tg.LastConsumed, w.LastTimestamp)
					}
				}
			}
			cc, online, err := lib.ConsumerConnections(ctx, m.Addr, g)
			if err == nil && online {
				tg.Clients += len(cc.ConnectionSet)
				tg.Model = cc.MessageModel
			}
		}
		out = append(out, tg)
	}
	return out, nil
}
