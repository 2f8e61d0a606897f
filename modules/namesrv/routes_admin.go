package namesrv

import (
	"maps"
	"slices"

	"github.com/quivermq/quiver/core/protocol"
)

// WipeWritePerm clears the write bit of every queue data of brokerName
// (WIPE_WRITE_PERM_OF_BROKER) and returns how many topics it touched,
// counting those already read-only, as Java does.
func (t *RouteTable) WipeWritePerm(brokerName string) int {
	return t.setPerm(brokerName, func(perm int32) int32 { return perm &^ protocol.PermWrite })
}

// AddWritePerm sets every queue data of brokerName to read|write
// (ADD_WRITE_PERM_OF_BROKER; Java replaces the perm, dropping the inherit
// bit too) and returns how many topics it touched.
func (t *RouteTable) AddWritePerm(brokerName string) int {
	return t.setPerm(brokerName, func(int32) int32 { return protocol.PermRead | protocol.PermWrite })
}

func (t *RouteTable) setPerm(brokerName string, f func(int32) int32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, qm := range t.topics {
		qd, ok := qm[brokerName]
		if !ok {
			continue
		}
		qd.Perm = f(qd.Perm)
		qm[brokerName] = qd
		n++
	}
	return n
}

// SystemTopics returns, sorted, every cluster name and broker name (Java's
// getSystemTopicList: brokers create a topic named after each) and the
// address of one broker: the lowest id of the first broker name ("" when
// none is registered).
func (t *RouteTable) SystemTopics() (topics []string, brokerAddr string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	set := map[string]struct{}{}
	for cluster, names := range t.clusters {
		set[cluster] = struct{}{}
		for name := range names {
			set[name] = struct{}{}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.brokers)) {
		addrs := t.brokers[name].BrokerAddrs
		if len(addrs) > 0 {
			brokerAddr = addrs[slices.Min(slices.Collect(maps.Keys(addrs)))]
			break
		}
	}
	topics = append([]string{}, slices.Sorted(maps.Keys(set))...)
	return topics, brokerAddr
}

// TopicsBySysFlag lists, sorted, the topics whose topicSysFlag satisfies
// pick. Like Java, it looks at one queue data per topic (here the first
// broker name in order).
func (t *RouteTable) TopicsBySysFlag(pick func(int32) bool) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := []string{}
	for topic, qm := range t.topics {
		if len(qm) == 0 {
			continue
		}
		first := slices.Min(slices.Collect(maps.Keys(qm)))
		if pick(qm[first].TopicSysFlag) {
			out = append(out, topic)
		}
	}
	slices.Sort(out)
	return out
}
