package broker

import (
	"sort"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/protocol"
)

// topicTable holds the broker's topic configuration and its data version.
type topicTable struct {
	mu      sync.RWMutex
	topics  map[string]*protocol.TopicConfig
	version protocol.DataVersion
	meta    *metaStore
}

type topicDoc struct {
	DataVersion      protocol.DataVersion             `json:"dataVersion"`
	TopicConfigTable map[string]*protocol.TopicConfig `json:"topicConfigTable"`
}

func newTopicTable(meta *metaStore) (*topicTable, error) {
	t := &topicTable{topics: map[string]*protocol.TopicConfig{}, meta: meta}
	var doc topicDoc
	ok, err := meta.load("topics", &doc)
	if err != nil {
		return nil, err
	}
	if ok {
		for k, v := range doc.TopicConfigTable {
			t.topics[k] = v
		}
		t.version = doc.DataVersion
	}
	t.version.Timestamp = time.Now().UnixMilli()
	t.version.Counter++
	return t, nil
}

func (t *topicTable) get(name string) (*protocol.TopicConfig, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.topics[name]
	if !ok {
		return nil, false
	}
	cp := *c
	return &cp, true
}

// put stores c and persists; it reports whether anything changed.
func (t *topicTable) put(c *protocol.TopicConfig) (bool, error) {
	t.mu.Lock()
	old, ok := t.topics[c.TopicName]
	if ok && *old == *c {
		t.mu.Unlock()
		return false, nil
	}
	cp := *c
	t.topics[c.TopicName] = &cp
	t.bump()
	doc := t.docLocked()
	t.mu.Unlock()
	return true, t.meta.save("topics", doc)
}

// putIfAbsent creates c unless a topic of that name exists; it returns the
// config in force and whether it was created.
func (t *topicTable) putIfAbsent(c *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
	t.mu.Lock()
	if old, ok := t.topics[c.TopicName]; ok {
		cp := *old
		t.mu.Unlock()
		return &cp, false, nil
	}
	cp := *c
	t.topics[c.TopicName] = &cp
	t.bump()
	doc := t.docLocked()
	t.mu.Unlock()
	return c, true, t.meta.save("topics", doc)
}

func (t *topicTable) remove(name string) (bool, error) {
	t.mu.Lock()
	if _, ok := t.topics[name]; !ok {
		t.mu.Unlock()
		return false, nil
	}
	delete(t.topics, name)
	t.bump()
	doc := t.docLocked()
	t.mu.Unlock()
	return true, t.meta.save("topics", doc)
}

func (t *topicTable) bump() {
	t.version.Timestamp = time.Now().UnixMilli()
	t.version.Counter++
}

func (t *topicTable) docLocked() topicDoc {
	m := make(map[string]*protocol.TopicConfig, len(t.topics))
	for k, v := range t.topics {
		cp := *v
		m[k] = &cp
	}
	return topicDoc{DataVersion: t.version, TopicConfigTable: m}
}

// snapshot returns a copy of the table and its version.
func (t *topicTable) snapshot() protocol.TopicConfigWrapper {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := t.docLocked()
	return protocol.TopicConfigWrapper{DataVersion: d.DataVersion, TopicConfigTable: d.TopicConfigTable}
}

func (t *topicTable) names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.topics))
	for k := range t.topics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
