package admin

// Per-broker figures the mq admin commands read: runtime info, topic
// stats, a group's consume stats and offset reset, with Java 4.9's
// fastjson bodies read by protocol.MQTable.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// BrokerRuntimeInfo reads a broker's runtime figures
// (GET_BROKER_RUNTIME_INFO, Java's KVTable).
func (a *Admin) BrokerRuntimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: runtime info of %s: %w", addr, err)
	}
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("admin: decode runtime info of %s: %w", addr, err)
	}
	return kv.Table, nil
}

// TopicOffset is one queue of a TopicStatsTable.
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// TopicStats reads the queues of topic on the broker at addr
// (GET_TOPIC_STATS_INFO, Java's TopicStatsTable).
func (a *Admin) TopicStats(ctx context.Context, addr, topic string) (protocol.MQTable[TopicOffset], error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetTopicStatsInfo, map[string]string{"topic": topic}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: topic stats of %s on %s: %w", topic, addr, err)
	}
	var t struct {
		OffsetTable protocol.MQTable[TopicOffset] `json:"offsetTable"`
	}
	if err := protocol.UnmarshalFastjson(resp.Body, &t); err != nil {
		return nil, fmt.Errorf("admin: decode topic stats of %s on %s: %w", topic, addr, err)
	}
	if t.OffsetTable == nil {
		t.OffsetTable = protocol.MQTable[TopicOffset]{}
	}
	return t.OffsetTable, nil
}

// OffsetWrapper is one queue of a ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// ConsumeStats is a group's consumption on one broker.
type ConsumeStats struct {
	ConsumeTps  float64                         `json:"consumeTps"`
	OffsetTable protocol.MQTable[OffsetWrapper] `json:"offsetTable"`
}

// ConsumeStats reads group's progress on the broker at addr, of every
// topic it has offsets of, or of topic when it is not empty
// (GET_CONSUME_STATS).
func (a *Admin) ConsumeStats(ctx context.Context, addr, group, topic string) (*ConsumeStats, error) {
	ext := map[string]string{"consumerGroup": group}
	if topic != "" {
		ext["topic"] = topic
	}
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetConsumeStats, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: consume stats of %s on %s: %w", group, addr, err)
	}
	var cs ConsumeStats
	if err := protocol.UnmarshalFastjson(resp.Body, &cs); err != nil {
		return nil, fmt.Errorf("admin: decode consume stats of %s on %s: %w", group, addr, err)
	}
	if cs.OffsetTable == nil {
		cs.OffsetTable = protocol.MQTable[OffsetWrapper]{}
	}
	return &cs, nil
}

// ResetOffsetOn moves group's offsets of topic on the broker at addr to
// the first message stored at or after timestamp (ms; -1: the end of
// each queue), INVOKE_BROKER_TO_RESET_OFFSET. It returns the new offset
// of each queue and how many online consumers the broker told.
func (a *Admin) ResetOffsetOn(ctx context.Context, addr, group, topic string, timestamp int64, force bool) (protocol.MQTable[int64], int, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.InvokeBrokerToResetOffset, map[string]string{
		"topic": topic, "group": group, "timestamp": strconv.FormatInt(timestamp, 10), "isForce": strconv.FormatBool(force),
	}, nil))
	if err != nil {
		return nil, 0, fmt.Errorf("admin: reset offset of %s on %s: %w", topic, addr, err)
	}
	// ResetOffsetBody: {"offsetTable":{<MessageQueue>:offset}}.
	var body struct {
		OffsetTable protocol.MQTable[int64] `json:"offsetTable"`
	}
	if len(resp.Body) > 0 {
		if err := protocol.UnmarshalFastjson(resp.Body, &body); err != nil {
			return nil, 0, fmt.Errorf("admin: decode reset offsets of %s on %s: %w", topic, addr, err)
		}
	}
	if body.OffsetTable == nil {
		body.OffsetTable = protocol.MQTable[int64]{}
	}
	told, _ := strconv.Atoi(resp.Ext("consumersNotified"))
	return body.OffsetTable, told, nil
}
