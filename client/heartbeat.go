package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// HeartbeatSubscription is one subscription of a heartbeat, encoded as
// the official Go client does (codeSet as strings, subVersion in ns).
type HeartbeatSubscription struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         []string `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

// HeartbeatConsumer is one consumer group of a heartbeat.
type HeartbeatConsumer struct {
	GroupName           string                  `json:"groupName"`
	ConsumeType         string                  `json:"consumeType"`
	MessageModel        string                  `json:"messageModel"`
	ConsumeFromWhere    string                  `json:"consumeFromWhere"`
	SubscriptionDataSet []HeartbeatSubscription `json:"subscriptionDataSet"`
	UnitMode            bool                    `json:"unitMode"`
}

type heartbeatProducer struct {
	GroupName string `json:"groupName"`
}

type heartbeatBody struct {
	ClientID        string              `json:"clientID"`
	ProducerDataSet []heartbeatProducer `json:"producerDataSet"`
	ConsumerDataSet []HeartbeatConsumer `json:"consumerDataSet"`
}

// NewSubscription builds a heartbeat subscription for a TAG or SQL92
// expression. TAG expressions are split on "||"; codes are the tag hashes.
func NewSubscription(topic, exprType, expr string) HeartbeatSubscription {
	if exprType == "" {
		exprType = "TAG"
	}
	s := HeartbeatSubscription{Topic: topic, SubString: expr, ExpressionType: exprType, TagsSet: []string{}, CodeSet: []string{}, SubVersion: time.Now().UnixNano()}
	if exprType == "TAG" {
		if strings.TrimSpace(expr) == "" || strings.TrimSpace(expr) == "*" {
			s.SubString = "*"
			return s
		}
		for _, t := range ParseTags(expr) {
			s.TagsSet = append(s.TagsSet, t)
			s.CodeSet = append(s.CodeSet, strconv.FormatInt(int64(hashTag(t)), 10))
		}
	}
	return s
}

// ParseTags splits a TAG expression ("a || b"), sorted, without empties.
func ParseTags(expr string) []string {
	set := map[string]bool{}
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// hashTag is the official Go client's tag hash (31·h + byte, int32).
func hashTag(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(s[i])
	}
	return h
}

func (c *Client) heartbeatData() (*heartbeatBody, bool) {
	c.memberMu.RLock()
	defer c.memberMu.RUnlock()
	hb := &heartbeatBody{ClientID: c.id, ProducerDataSet: []heartbeatProducer{}, ConsumerDataSet: []HeartbeatConsumer{}}
	for g := range c.producers {
		hb.ProducerDataSet = append(hb.ProducerDataSet, heartbeatProducer{GroupName: g})
	}
	for _, h := range c.consumers {
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, h.ConsumerData())
	}
	sort.Slice(hb.ProducerDataSet, func(i, j int) bool { return hb.ProducerDataSet[i].GroupName < hb.ProducerDataSet[j].GroupName })
	sort.Slice(hb.ConsumerDataSet, func(i, j int) bool { return hb.ConsumerDataSet[i].GroupName < hb.ConsumerDataSet[j].GroupName })
	return hb, len(c.consumers) > 0
}

// SendHeartbeat sends a heartbeat to every known broker now and returns
// the first error. Consumers call it before their first rebalance so the
// broker lists them.
func (c *Client) SendHeartbeat(ctx context.Context) error {
	// Serialized with UnregisterConsumer, so a heartbeat built before a
	// group left cannot reach the broker after its UNREGISTER_CLIENT.
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	hb, hasConsumers := c.heartbeatData()
	if len(hb.ProducerDataSet) == 0 && len(hb.ConsumerDataSet) == 0 {
		return nil
	}
	body, err := json.Marshal(hb)
	if err != nil {
		return fmt.Errorf("client: encode heartbeat: %w", err)
	}
	addrs := c.brokerAddrs(hasConsumers)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, addr := range addrs {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			resp, err := c.Invoke(cctx, addr, NewRequest(remoting.HeartBeat, nil, body))
			if err == nil && resp.Code != remoting.Success {
				err = NewBrokerError(addr, resp)
			}
			if err != nil {
				c.log.Debug("heartbeat", "broker", addr, "err", err)
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("client: heartbeat: %w", err)
				}
				mu.Unlock()
			}
		}(addr)
	}
	wg.Wait()
	return first
}

// TriggerHeartbeat asks the heartbeat loop to send one soon.
func (c *Client) TriggerHeartbeat() {
	select {
	case c.hbNow <- struct{}{}:
	default:
	}
}

func (c *Client) heartbeatLoop() {
	defer c.wg.Done()
	t := time.NewTimer(c.opts.firstHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.hbNow:
		}
		_ = c.SendHeartbeat(c.ctx)
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(c.opts.heartbeat)
	}
}

// ParseOffsetTable decodes {"offsetTable":{<MessageQueue JSON>:offset}} in
// fastjson's non-standard form (object keys), gson's array-of-pairs form,
// or with the queue JSON as a string key (protocol.MQTable).
func ParseOffsetTable(body []byte) (map[MessageQueue]int64, error) {
	var fields map[string]json.RawMessage
	if err := protocol.UnmarshalFastjson(body, &fields); err != nil {
		return nil, fmt.Errorf("client: offset table: %w", err)
	}
	raw, ok := fields["offsetTable"]
	if !ok {
		return nil, fmt.Errorf("client: no offsetTable in %.200q", body)
	}
	var t protocol.MQTable[int64]
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("client: offset table: %w", err)
	}
	out := make(map[MessageQueue]int64, len(t))
	for mq, off := range t {
		out[MessageQueue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: int(mq.QueueID)}] = off
	}
	return out, nil
}

// EncodeOffsetTable writes {"<field>":{<mq json>:offset,...}} in
// fastjson's form, which Java tools and the official client read.
func EncodeOffsetTable(field string, t map[MessageQueue]int64) []byte {
	keys := make([]MessageQueue, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var b strings.Builder
	b.WriteString(`{"` + field + `":{`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(t[k], 10))
	}
	b.WriteString("}}")
	return []byte(b.String())
}

func runningInfo(h ConsumerHandler) []byte {
	cd := h.ConsumerData()
	info := map[string]any{
		"properties": map[string]string{
			"consumeType":         cd.ConsumeType,
			"messageModel":        cd.MessageModel,
			"consumeFromWhere":    cd.ConsumeFromWhere,
			"PROP_CLIENT_VERSION": "V4_5_2",
		},
		"subscriptionSet": cd.SubscriptionDataSet,
		"statusTable":     map[string]any{},
		"mqTable":         map[string]any{},
		"jstack":          "",
	}
	b, _ := json.Marshal(info)
	return b
}
