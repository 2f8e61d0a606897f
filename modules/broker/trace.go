package broker

import (
	"strings"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Message traces (RocketMQ's RIP-6): clients with tracing on send one
// record per send and consume to the trace topic, keyed by the message
// id, and tools read them back with QUERY_MESSAGE. The broker's part is
// Java's: with traceTopicEnable it creates the trace topic at start (one
// queue, read and write, as TopicConfigManager does) so the clients'
// trace dispatchers find its route, and UPDATE_AND_CREATE_TOPIC refuses
// system topics, the trace topic among them, while
// validateSystemTopicWhenUpdateTopic is on (its default).

// checkpointTopic is TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC, in
// Java's system topic set though Quiver never creates it.
const checkpointTopic = "CHECKPOINT_TOPIC"

// traceTopicConfig is the trace topic created at start, or nil when
// broker.trace_topic_enable is off.
func (b *Broker) traceTopicConfig() *protocol.TopicConfig {
	if !b.cfg.TraceTopicEnable {
		return nil
	}
	return &protocol.TopicConfig{TopicName: b.cfg.TraceTopicName, ReadQueueNums: 1, WriteQueueNums: 1,
		Perm: protocol.PermRead | protocol.PermWrite}
}

// isSystemTopic is Java's TopicValidator.isSystemTopic as a broker sees
// it: the fixed set, the topics its TopicConfigManager adds (its cluster,
// broker-name, reply and, when enabled, trace topics) and the rmq_sys_
// prefix.
func (b *Broker) isSystemTopic(topic string) bool {
	if strings.HasPrefix(topic, protocol.SystemTopicPrefix) {
		return true
	}
	for _, t := range b.systemTopics() {
		if t == topic {
			return true
		}
	}
	return false
}

// refuseSystemTopic answers UPDATE_AND_CREATE_TOPIC for a system topic as
// Java's AdminBrokerProcessor does (INVALID_PARAMETER), or returns nil.
func (b *Broker) refuseSystemTopic(req *remoting.Command, topic string) *remoting.Command {
	if !b.current().ValidateSystemTopicWhenUpdateTopic || !b.isSystemTopic(topic) {
		return nil
	}
	return remoting.Errorf(req, invalidParameter, "The topic["+topic+"] is conflict with system topic.")
}
