package admin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// BrokerTopicConfig reads one topic's config on the broker at addr
// (GET_TOPIC_CONFIG, RocketMQ 5's code 351): queue counts, permission,
// order flag and attributes such as message.type. A topic the broker does
// not hold is an error wrapping a *client.BrokerError with code
// TOPIC_NOT_EXIST. A RocketMQ 4.x broker does not serve the code.
func (a *Admin) BrokerTopicConfig(ctx context.Context, addr, topic string) (*protocol.TopicConfig, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetTopicConfig, map[string]string{"topic": topic}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: config of topic %s on %s: %w", topic, addr, err)
	}
	var c protocol.TopicConfig // TopicConfigAndQueueMapping: mappingDetail is not read
	if err := json.Unmarshal(resp.Body, &c); err != nil {
		return nil, fmt.Errorf("admin: decode config of topic %s on %s: %w", topic, addr, err)
	}
	return &c, nil
}
