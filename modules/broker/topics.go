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
	// saveMu orders saves: the document is built and written under it, so
	// a slower save never overwrites a newer one.
	saveMu sync.Mutex
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
	cp := *c
	changed := false
	err := t.update(func() bool {
		if old, ok := t.topics[c.TopicName]; ok && *old == cp {
			return false
		}
		t.topics[c.TopicName] = &cp
		changed = true
		return true
	})
	return changed, err
}

// putIfAbsent creates c unless a topic of that name exists; it returns the
// config in force and whether it was created.
func (t *topicTable) putIfAbsent(c *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
	got, created, err := t.putAllIfAbsent([]*protocol.TopicConfig{c})
	if err != nil {
		return nil, false, err
	}
	return got[0], created[0], nil
}

// putAllIfAbsent is putIfAbsent for many topics with at most one write of
// the document.
func (t *topicTable) putAllIfAbsent(cs []*protocol.TopicConfig) ([]*protocol.TopicConfig, []bool, error) {
	got := make([]*protocol.TopicConfig, len(cs))
	created := make([]bool, len(cs))
	missing := false
	t.mu.RLock()
	for i, c := range cs {
		if old, ok := t.topics[c.TopicName]; ok {
			cp := *old
			got[i] = &cp
		} else {
			missing = true
		}
	}
	t.mu.RUnlock()
	if !missing {
		return got, created, nil
	}
	err := t.update(func() bool {
		changed := false
		for i, c := range cs {
			if old, ok := t.topics[c.TopicName]; ok {
				cp := *old
				got[i] = &cp
				continue
			}
			cp := *c
			t.topics[c.TopicName] = &cp
			ret := cp
			got[i], created[i], changed = &ret, true, true
		}
		return changed
	})
	if err != nil {
		return nil, nil, err
	}
	return got, created, nil
}

func (t *topicTable) remove(name string) (bool, error) {
	removed := false
	err := t.update(func() bool {
		if _, ok := t.topics[name]; !ok {
			return false
		}
		delete(t.topics, name)
		removed = true
		return true
	})
	return removed, err
}

// update applies f under the lock, bumps the data version and saves the
// document if f reports a change; saves are ordered (saveMu).
func (t *topicTable) update(f func() bool) error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	t.mu.Lock()
	if !f() {
		t.mu.Unlock()
		return nil
	}
	t.bump()
	doc := t.docLocked()
	t.mu.Unlock()
	return t.meta.save("topics", doc)
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
