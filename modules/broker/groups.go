package broker

import (
	"sort"
	"sync"
)

// GroupConfig is a subscription group's configuration (Java
// SubscriptionGroupConfig).
type GroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIDsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
}

func defaultGroupConfig(name string) *GroupConfig {
	return &GroupConfig{GroupName: name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIDsChangedEnable: true}
}

type groupTable struct {
	mu     sync.RWMutex
	groups map[string]*GroupConfig
	meta   *metaStore
}

type groupDoc struct {
	SubscriptionGroupTable map[string]*GroupConfig `json:"subscriptionGroupTable"`
}

func newGroupTable(meta *metaStore) (*groupTable, error) {
	g := &groupTable{groups: map[string]*GroupConfig{}, meta: meta}
	var doc groupDoc
	if _, err := meta.load("subscriptionGroup", &doc); err != nil {
		return nil, err
	}
	for k, v := range doc.SubscriptionGroupTable {
		g.groups[k] = v
	}
	return g, nil
}

// getOrCreate returns the group's config, creating the default one (as
// Java's autoCreateSubscriptionGroup does).
func (g *groupTable) getOrCreate(name string) (*GroupConfig, error) {
	g.mu.RLock()
	c, ok := g.groups[name]
	g.mu.RUnlock()
	if ok {
		return c, nil
	}
	g.mu.Lock()
	if c, ok := g.groups[name]; ok {
		g.mu.Unlock()
		return c, nil
	}
	c = defaultGroupConfig(name)
	g.groups[name] = c
	doc := g.docLocked()
	g.mu.Unlock()
	return c, g.meta.save("subscriptionGroup", doc)
}

func (g *groupTable) put(c *GroupConfig) error {
	g.mu.Lock()
	cp := *c
	g.groups[c.GroupName] = &cp
	doc := g.docLocked()
	g.mu.Unlock()
	return g.meta.save("subscriptionGroup", doc)
}

func (g *groupTable) remove(name string) error {
	g.mu.Lock()
	delete(g.groups, name)
	doc := g.docLocked()
	g.mu.Unlock()
	return g.meta.save("subscriptionGroup", doc)
}

func (g *groupTable) docLocked() groupDoc {
	m := make(map[string]*GroupConfig, len(g.groups))
	for k, v := range g.groups {
		cp := *v
		m[k] = &cp
	}
	return groupDoc{SubscriptionGroupTable: m}
}

func (g *groupTable) snapshot() map[string]*GroupConfig {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.docLocked().SubscriptionGroupTable
}

func (g *groupTable) names() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.groups))
	for k := range g.groups {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
