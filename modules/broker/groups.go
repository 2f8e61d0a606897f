package broker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/protocol"
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
	// RocketMQ 5 fields (absent from 4.9's documents and answers unless
	// set): how 5.x consumers of the group retry (retrypolicy.go) and
	// whether they consume in order.
	GroupRetryPolicy      *GroupRetryPolicy `json:"groupRetryPolicy,omitempty"`
	ConsumeMessageOrderly bool              `json:"consumeMessageOrderly,omitempty"`
}

func defaultGroupConfig(name string) *GroupConfig {
	return &GroupConfig{GroupName: name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIDsChangedEnable: true}
}

type groupTable struct {
	mu     sync.RWMutex
	groups map[string]*GroupConfig
	meta   *metaStore
	// saveMu orders changes: a change's journal record (or document) is
	// written under it (see topicTable).
	saveMu sync.Mutex
	jr     *journal // journal.go; nil without a data directory
	comp   compactor
	log    *slog.Logger
	// version counts the changes made through update, as the document
	// version replication reads (groupsreplica.go); onChange runs after
	// each (Broker.ReplicaMetaChanged) and must not block.
	version  atomic.Int64
	onChange atomic.Pointer[func()]
}

type groupDoc struct {
	SubscriptionGroupTable map[string]*GroupConfig `json:"subscriptionGroupTable"`
	// JournalSeq is the last journal record the document holds.
	JournalSeq uint64 `json:"quiverJournalSeq,omitempty"`
}

func newGroupTable(meta *metaStore, journalDir string, log *slog.Logger) (*groupTable, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &groupTable{groups: map[string]*GroupConfig{}, meta: meta, log: log}
	// As Java's SubscriptionGroupManager.init before its load: the built-in
	// groups exist on every broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG lists
	// them) and are written with the next document.
	for _, name := range protocol.BuiltinGroups {
		g.groups[name] = defaultGroupConfig(name)
	}
	var doc groupDoc
	if _, err := meta.load("subscriptionGroup", &doc); err != nil {
		return nil, err
	}
	for k, v := range doc.SubscriptionGroupTable {
		g.groups[k] = v
	}
	if journalDir == "" {
		return g, nil
	}
	jr, recs, err := openJournal(filepath.Join(journalDir, "subscriptionGroup.journal"), doc.JournalSeq, log)
	if err != nil {
		return nil, err
	}
	g.jr = jr
	for _, r := range recs {
		if r.Seq <= doc.JournalSeq {
			continue
		}
		if len(r.Value) == 0 {
			delete(g.groups, r.Name)
			continue
		}
		var c GroupConfig
		if err := json.Unmarshal(r.Value, &c); err != nil {
			jr.close()
			return nil, fmt.Errorf("broker: subscription group journal record %d (%s): %w", r.Seq, r.Name, err)
		}
		g.groups[r.Name] = &c
	}
	if jr.size() > 0 {
		if err := g.compact(); err != nil {
			jr.close()
			return nil, err
		}
	}
	return g, nil
}

// compact writes the whole document and cuts the journal (see
// topicTable.compact).
func (g *groupTable) compact() error {
	g.saveMu.Lock()
	g.mu.RLock()
	doc := g.docLocked()
	g.mu.RUnlock()
	doc.JournalSeq = g.jr.lastSeq()
	g.saveMu.Unlock()
	if err := g.meta.save("subscriptionGroup", doc); err != nil {
		return err
	}
	return g.jr.cut(doc.JournalSeq)
}

// close folds the journal into the document and closes it.
func (g *groupTable) close() error {
	if g.jr == nil {
		return nil
	}
	g.comp.wait()
	var err error
	if g.jr.size() > 0 {
		err = g.compact()
	}
	if cerr := g.jr.close(); err == nil {
		err = cerr
	}
	return err
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
	return out, g.update(func() []string {
		var created []string
		for i, n := range names {
			c, ok := g.groups[n]
			if !ok {
				c = defaultGroupConfig(n)
				g.groups[n] = c
				created = append(created, n)
			}
			out[i] = c
		}
		return created
	})
}

// update applies f under the lock; f returns the names it changed, each
// journaled (or the whole document saved without a journal).
func (g *groupTable) update(f func() []string) error {
	g.saveMu.Lock()
	g.mu.Lock()
	names := f()
	if len(names) == 0 {
		g.mu.Unlock()
		g.saveMu.Unlock()
		return nil
	}
	if g.jr == nil {
		doc := g.docLocked()
		g.mu.Unlock()
		defer g.saveMu.Unlock()
		if err := g.meta.save("subscriptionGroup", doc); err != nil {
			return err
		}
		g.changed()
		return nil
	}
	recs := make([]journalRecord, len(names))
	var err error
	for i, n := range names {
		recs[i] = journalRecord{Name: n}
		if c, ok := g.groups[n]; ok && err == nil {
			recs[i].Value, err = json.Marshal(c)
		}
	}
	live := len(g.groups)
	g.mu.Unlock()
	if err == nil {
		err = g.jr.append(recs)
	}
	g.saveMu.Unlock()
	if err != nil {
		return fmt.Errorf("broker: subscription groups: %w", err)
	}
	g.changed()
	g.comp.maybe(g.jr, live, func() {
		if err := g.compact(); err != nil {
			g.log.Error("subscription groups: compact the journal", "err", err)
		}
	})
	return nil
}

// changed counts a written change and tells replication.
func (g *groupTable) changed() {
	g.version.Add(1)
	if f := g.onChange.Load(); f != nil {
		(*f)()
	}
}

func (g *groupTable) put(c *GroupConfig) error {
	cp := *c
	return g.update(func() []string {
		g.groups[c.GroupName] = &cp
		return []string{c.GroupName}
	})
}

func (g *groupTable) remove(name string) error {
	return g.update(func() []string {
		delete(g.groups, name)
		return []string{name}
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

func (g *groupTable) has(name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	_, ok := g.groups[name]
	return ok
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
