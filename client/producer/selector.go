package producer

import (
	"hash/fnv"
	"sync/atomic"

	"github.com/quivermq/quiver/client"
)

// QueueSelector picks the queue a message goes to. lastBroker is the
// broker of the previous failed attempt ("" on the first); available
// reports whether latency-fault avoidance currently lets a broker be used.
// queues is never empty.
type QueueSelector interface {
	Select(msg *client.Message, queues []client.MessageQueue, lastBroker string, available func(broker string) bool) client.MessageQueue
}

// SelectorFunc adapts a function that ignores retries and faults.
type SelectorFunc func(msg *client.Message, queues []client.MessageQueue) client.MessageQueue

// Select calls f.
func (f SelectorFunc) Select(msg *client.Message, queues []client.MessageQueue, _ string, _ func(string) bool) client.MessageQueue {
	return f(msg, queues)
}

// RoundRobin returns the default selector: queues in turn, preferring a
// broker other than the last failed one and skipping brokers that latency
// fault avoidance has set aside. A message with a SHARDING_KEY is hashed
// to a queue instead (see Hash), so ordered sends need no extra option.
func RoundRobin() QueueSelector { return &roundRobin{} }

type roundRobin struct{ n atomic.Uint32 }

func (r *roundRobin) Select(msg *client.Message, queues []client.MessageQueue, last string, available func(string) bool) client.MessageQueue {
	if msg != nil && msg.ShardingKey() != "" {
		return hashPick(msg.ShardingKey(), queues)
	}
	n := len(queues)
	start := int(r.n.Add(1))
	for i := 0; i < n; i++ {
		q := queues[(start+i)%n]
		if q.BrokerName != last && (available == nil || available(q.BrokerName)) {
			return q
		}
	}
	for i := 0; i < n; i++ {
		q := queues[(start+i)%n]
		if q.BrokerName != last {
			return q
		}
	}
	return queues[start%n]
}

// Hash returns a selector that keeps messages with equal SHARDING_KEY on
// one queue (FNV-1a of the key modulo the queue count, as the official Go
// client's hash selector); messages without a key go round-robin. It does
// not move keys off failing brokers: ordering wins over availability.
// RoundRobin already behaves this way; Hash exists to say so explicitly.
func Hash() QueueSelector { return &roundRobin{} }

func hashPick(key string, queues []client.MessageQueue) client.MessageQueue {
	h := fnv.New32a()
	h.Write([]byte(key))
	return queues[h.Sum32()%uint32(len(queues))]
}
