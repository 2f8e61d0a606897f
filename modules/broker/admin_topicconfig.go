package broker

// GET_TOPIC_CONFIG (351), RocketMQ 5's AdminBrokerProcessor.getTopicConfig:
// one topic's config on this broker, as TopicConfigAndQueueMapping JSON.
// The proxy asks it for a topic's message type; admin tools for a topic's
// attributes.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// topicConfigAndMapping is Java's TopicConfigAndQueueMapping as fastjson
// writes it: TopicConfig's getters in name order, "attributes":{} for
// none, and mappingDetail left out (Quiver has no static topics, so it is
// null, which fastjson omits; the header's "lo" asks for it).
type topicConfigAndMapping struct {
	Attributes      map[string]string `json:"attributes"`
	Order           bool              `json:"order"`
	Perm            int32             `json:"perm"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicName       string            `json:"topicName"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
}

func newTopicConfigAndMapping(c *protocol.TopicConfig) topicConfigAndMapping {
	attrs := c.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	filter := c.TopicFilterType
	if filter == "" {
		filter = "SINGLE_TAG" // Java's default
	}
	return topicConfigAndMapping{
		Attributes: attrs, Order: c.Order, Perm: c.Perm, ReadQueueNums: c.ReadQueueNums,
		TopicFilterType: filter, TopicName: c.TopicName, TopicSysFlag: c.TopicSysFlag, WriteQueueNums: c.WriteQueueNums,
	}
}

// handleGetTopicConfig answers the topic's config, or TOPIC_NOT_EXIST with
// Java's remark for a topic this broker does not hold.
func (b *Broker) handleGetTopicConfig(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic := e.String("topic")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	c, ok := b.topics.get(topic)
	if !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, "No topic in this broker. topic: "+topic)
	}
	body, err := json.Marshal(newTopicConfigAndMapping(c))
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("encode topic config of %s: %v", topic, err))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
