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
	// saveMu orders saves: the document is built and written under it, so
	// a slower save never overwrites a newer one.
	saveMu sync.Mutex
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
	cs, err := g.getOrCreateAll([]string{name})
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// getOrCreateAll is getOrCreate for many groups with at most one write of
// the document (a heartbeat names every group of a client process).
func (g *groupTable) getOrCreateAll(names []string) ([]*GroupConfig, error) {
	out := make([]*GroupConfig, len(names))
	missing := false
	g.mu.RLock()
	for i, n := range names {
		c, ok := g.groups[n]
		out[i] = c
		missing = missing || !ok
	}
	g.mu.RUnlock()
	if !missing {
		return out, nil
	}
	return out, g.update(func() bool {
		created := false
		for i, n := range names {
			c, ok := g.groups[n]
			if !ok {
				c = defaultGroupConfig(n)
				g.groups[n] = c
				created = true
			}
			out[i] = c
		}
		return created
	})
}

// update applies f under the lock and saves the document if f reports a
// change; saves are ordered (saveMu).
func (g *groupTable) update(f func() bool) error {
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	g.mu.Lock()
	if !f() {
		g.mu.Unlock()
		return nil
	}
	doc := g.docLocked()
	g.mu.Unlock()
	return g.meta.save("subscriptionGroup", doc)
}

func (g *groupTable) put(c *GroupConfig) error {
	cp := *c
	return g.update(func() bool {
		g.groups[c.GroupName] = &cp
		return true
	})
}

func (g *groupTable) remove(name string) error {
	return g.update(func() bool {
		delete(g.groups, name)
		return true
	})
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
