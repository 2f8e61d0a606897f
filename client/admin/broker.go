package admin

// Broker-side admin calls of mqadmin's daily set: broker config get and
// update, producer connections, consumer running info, clone group
// offset, cleaning, statistics.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// BrokerConfig reads a broker's settings (GET_BROKER_CONFIG) as the
// key=value properties the broker writes.
func (a *Admin) BrokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetBrokerConfig, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: broker config of %s: %w", addr, err)
	}
	return parseJavaProperties(string(resp.Body)), nil
}

// UpdateBrokerConfig changes settings of a running broker
// (UPDATE_BROKER_CONFIG); the broker refuses keys it cannot change.
func (a *Admin) UpdateBrokerConfig(ctx context.Context, addr string, settings map[string]string) error {
	keys := make([]string, 0, len(settings))
	for k, v := range settings {
		if k == "" || strings.ContainsAny(k, "=: \t\f\r\n#!\\") || strings.ContainsAny(v, "\r\n\\") {
			return fmt.Errorf("admin: update broker config: setting %q=%q cannot be written as a properties line", k, v)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return fmt.Errorf("admin: update broker config: no setting given")
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + settings[k] + "\n")
	}
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.UpdateBrokerConfig, nil, []byte(b.String()))); err != nil {
		return fmt.Errorf("admin: update broker config of %s: %w", addr, err)
	}
	return nil
}

// Connection is one client connection a broker reports.
type Connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ProducerConnections lists the connections of a producer group on one
// broker (GET_PRODUCER_CONNECTION_LIST); found is false when the broker
// has none.
func (a *Admin) ProducerConnections(ctx context.Context, addr, group string) (conns []Connection, found bool, err error) {
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.GetProducerConnectionList, map[string]string{"producerGroup": group}, nil))
	if err != nil {
		return nil, false, fmt.Errorf("admin: producer connections of %s on %s: %w", group, addr, err)
	}
	if resp.Code != remoting.Success {
		if strings.Contains(resp.Remark, "not exist") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("admin: producer connections of %s: %w", group, client.NewBrokerError(addr, resp))
	}
	var pc struct {
		ConnectionSet []Connection `json:"connectionSet"`
	}
	if err := json.Unmarshal(resp.Body, &pc); err != nil {
		return nil, false, fmt.Errorf("admin: decode producer connections of %s: %w", group, err)
	}
	return pc.ConnectionSet, true, nil
}

// ConsumerRunningInfo asks, through a broker, one online consumer for its
// running info (GET_CONSUMER_RUNNING_INFO passed to the client). The
// answer is the client's ConsumerRunningInfo as it wrote it (fastjson,
// with MessageQueue objects as keys).
func (a *Admin) ConsumerRunningInfo(ctx context.Context, addr, group, clientID string, jstack bool) ([]byte, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetConsumerRunningInfo, map[string]string{
		"consumerGroup": group, "clientId": clientID, "jstackEnable": strconv.FormatBool(jstack)}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: running info of %s in %s: %w", clientID, group, err)
	}
	return resp.Body, nil
}

// ConsumeMessageDirectly asks, through the broker at addr that stores the
// message, one online consumer of group (clientID) to consume the message
// at offsetMsgID again now (CONSUME_MESSAGE_DIRECTLY passed to the client,
// as rocketmq-dashboard's resend to a group). The answer is the client's
// ConsumeMessageDirectlyResult as it wrote it.
func (a *Admin) ConsumeMessageDirectly(ctx context.Context, addr, group, clientID, offsetMsgID, topic, brokerName string) ([]byte, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.ConsumeMessageDirectly, map[string]string{
		"consumerGroup": group, "clientId": clientID, "msgId": offsetMsgID, "topic": topic, "brokerName": brokerName}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: consume %s directly on %s in %s: %w", offsetMsgID, clientID, group, err)
	}
	return resp.Body, nil
}

// CloneGroupOffset copies the committed offsets of src to dst on one
// broker (CLONE_GROUP_OFFSET), of topic or, when empty, of every topic src
// has offsets on.
func (a *Admin) CloneGroupOffset(ctx context.Context, addr, src, dst, topic string, offline bool) error {
	ext := map[string]string{"srcGroup": src, "destGroup": dst, "offline": strconv.FormatBool(offline)}
	if topic != "" {
		ext["topic"] = topic
	}
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.CloneGroupOffset, ext, nil)); err != nil {
		return fmt.Errorf("admin: clone offsets of %s to %s on %s: %w", src, dst, addr, err)
	}
	return nil
}

// CleanExpiredConsumeQueue asks a broker to drop consume queues that point
// only at deleted commit-log data (CLEAN_EXPIRED_CONSUMEQUEUE).
func (a *Admin) CleanExpiredConsumeQueue(ctx context.Context, addr string) error {
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.CleanExpiredConsumeQueue, nil, nil)); err != nil {
		return fmt.Errorf("admin: clean expired consume queues on %s: %w", addr, err)
	}
	return nil
}

// CleanUnusedTopic asks a broker to drop the queues of topics it no longer
// has (CLEAN_UNUSED_TOPIC).
func (a *Admin) CleanUnusedTopic(ctx context.Context, addr string) error {
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.CleanUnusedTopic, nil, nil)); err != nil {
		return fmt.Errorf("admin: clean unused topics on %s: %w", addr, err)
	}
	return nil
}

// StatsItem is one VIEW_BROKER_STATS_DATA figure set: sums and rates over
// the last minute, hour and day.
type StatsItem struct {
	StatsMinute StatsSnapshot `json:"statsMinute"`
	StatsHour   StatsSnapshot `json:"statsHour"`
	StatsDay    StatsSnapshot `json:"statsDay"`
}

// StatsSnapshot is one window of a StatsItem.
type StatsSnapshot struct {
	Sum   int64   `json:"sum"`
	Tps   float64 `json:"tps"`
	Avgpt float64 `json:"avgpt"`
}

// BrokerStats reads one statistic of a broker (VIEW_BROKER_STATS_DATA),
// e.g. TOPIC_PUT_NUMS for a topic or GROUP_GET_NUMS for topic@group;
// found is false when the broker has no figures for key.
func (a *Admin) BrokerStats(ctx context.Context, addr, name, key string) (*StatsItem, bool, error) {
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.ViewBrokerStatsData, map[string]string{"statsName": name, "statsKey": key}, nil))
	if err != nil {
		return nil, false, fmt.Errorf("admin: stats %s %s of %s: %w", name, key, addr, err)
	}
	if resp.Code != remoting.Success {
		return nil, false, nil
	}
	var it StatsItem
	if err := json.Unmarshal(resp.Body, &it); err != nil {
		return nil, false, fmt.Errorf("admin: decode stats %s %s: %w", name, key, err)
	}
	return &it, true, nil
}

// BrokerConsumeStats reads a broker's consume stats of every group
// (GET_BROKER_CONSUME_STATS), as the broker wrote them.
func (a *Admin) BrokerConsumeStats(ctx context.Context, addr string, isOrder bool) ([]byte, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetBrokerConsumeStats, map[string]string{
		"isOrder": strconv.FormatBool(isOrder), "timeoutMillis": "10000"}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: consume stats of %s: %w", addr, err)
	}
	return resp.Body, nil
}
