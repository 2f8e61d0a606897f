package admin

// A broker's own tables: topic configs, subscription groups and a
// consumer group's connections.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// TopicConfigs reads every topic config of the broker at addr
// (GET_ALL_TOPIC_CONFIG): the broker's own view, current even before its
// next registration with the name servers.
func (a *Admin) TopicConfigs(ctx context.Context, addr string) (map[string]*protocol.TopicConfig, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: topic configs of %s: %w", addr, err)
	}
	var w protocol.TopicConfigWrapper
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return nil, fmt.Errorf("admin: decode topic configs of %s: %w", addr, err)
	}
	if w.TopicConfigTable == nil {
		w.TopicConfigTable = map[string]*protocol.TopicConfig{}
	}
	return w.TopicConfigTable, nil
}

// SubscriptionGroups reads every subscription group config of the broker
// at addr (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), each as the broker wrote it.
func (a *Admin) SubscriptionGroups(ctx context.Context, addr string) (map[string]json.RawMessage, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: subscription groups of %s: %w", addr, err)
	}
	var doc struct {
		Table map[string]json.RawMessage `json:"subscriptionGroupTable"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return nil, fmt.Errorf("admin: decode subscription groups of %s: %w", addr, err)
	}
	if doc.Table == nil {
		doc.Table = map[string]json.RawMessage{}
	}
	return doc.Table, nil
}

// ConsumerConnections is a consumer group's connections on one broker.
type ConsumerConnections struct {
	ConnectionSet []Connection `json:"connectionSet"`
	MessageModel  string       `json:"messageModel"`
	ConsumeType   string       `json:"consumeType"`
	// ConsumeFromWhere and SubscriptionTable (by topic) are the group's
	// settings as its clients' heartbeats declared them.
	ConsumeFromWhere  string                               `json:"consumeFromWhere"`
	SubscriptionTable map[string]protocol.SubscriptionData `json:"subscriptionTable"`
}

// ConsumerConnections lists the online consumers of group on the broker
// at addr (GET_CONSUMER_CONNECTION_LIST); online is false when the broker
// has none (CONSUMER_NOT_ONLINE).
func (a *Admin) ConsumerConnections(ctx context.Context, addr, group string) (cc *ConsumerConnections, online bool, err error) {
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil))
	if err != nil {
		return nil, false, fmt.Errorf("admin: consumer connections of %s on %s: %w", group, addr, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.ConsumerNotOnline:
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("admin: consumer connections of %s: %w", group, client.NewBrokerError(addr, resp))
	}
	cc = &ConsumerConnections{}
	if err := json.Unmarshal(resp.Body, cc); err != nil {
		return nil, false, fmt.Errorf("admin: decode consumer connections of %s: %w", group, err)
	}
	return cc, true, nil
}

// PutSubscriptionGroup creates or replaces a subscription group on the
// broker at addr (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); cfg is Java's
// SubscriptionGroupConfig as JSON.
func (a *Admin) PutSubscriptionGroup(ctx context.Context, addr string, cfg json.RawMessage) error {
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, cfg)); err != nil {
		return fmt.Errorf("admin: put subscription group on %s: %w", addr, err)
	}
	return nil
}

// DeleteSubscriptionGroup deletes group's subscription config on the
// broker at addr (DELETE_SUBSCRIPTIONGROUP).
func (a *Admin) DeleteSubscriptionGroup(ctx context.Context, addr, group string) error {
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.DeleteSubscriptionGroup, map[string]string{"groupName": group}, nil)); err != nil {
		return fmt.Errorf("admin: delete subscription group %s on %s: %w", group, addr, err)
	}
	return nil
}

// TopicConsumers lists the consumer groups the broker at addr knows as
// consuming topic (QUERY_TOPIC_CONSUME_BY_WHO): online subscribers and
// groups with committed offsets.
func (a *Admin) TopicConsumers(ctx context.Context, addr, topic string) ([]string, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.QueryTopicConsumeByWho, map[string]string{"topic": topic}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: consumers of topic %s on %s: %w", topic, addr, err)
	}
	var doc struct {
		GroupList []string `json:"groupList"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return nil, fmt.Errorf("admin: decode consumers of topic %s on %s: %w", topic, addr, err)
	}
	return doc.GroupList, nil
}
