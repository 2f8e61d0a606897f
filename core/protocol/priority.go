package protocol

// Priority topics (RocketMQ 5.4, RIP-80). A topic whose message.type is
// PRIORITY keeps one priority level per queue: a message of priority p is
// stored in queue min(p, writeQueueNums-1), as RocketMQ's broker places
// it, so a topic of 10 queues has the default levels 0-9 (higher number,
// higher priority). Consumers of one broker are served from the highest
// queue that has messages for them first (modules/pop for POP and
// SimpleConsumer, modules/broker's pull path for 4.x consumers).

// IsPriority reports whether c is a priority topic.
func (c *TopicConfig) IsPriority() bool {
	return c != nil && c.Attributes[AttrMessageType] == MessageTypePriority
}

// PriorityQueue is the queue of a message of priority p in a topic of
// writeQueues queues: p itself, capped at the highest queue.
func PriorityQueue(p, writeQueues int32) int32 {
	if writeQueues <= 0 || p < 0 {
		return 0
	}
	return min(p, writeQueues-1)
}
