package broker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/protocol"
)

// topicTable holds the broker's topic configuration and its data version.
type topicTable struct {
	mu      sync.RWMutex
	topics  map[string]*protocol.TopicConfig
	version protocol.DataVersion
	meta    *metaStore
	// saveMu orders changes: a change's journal record (or document) is
	// written under it, so records are in the order of the changes and a
	// slower save never overwrites a newer one.
	saveMu sync.Mutex
	// jr is the change journal (journal.go); nil when the broker has no
	// data directory, where every change saves the whole document.
	jr   *journal
	comp compactor
	log  *slog.Logger
	// onChange runs after each bump (Broker.WatchReplicaMeta); it must
	// not block: it runs under mu.
	onChange atomic.Pointer[func()]
}

type topicDoc struct {
	DataVersion      protocol.DataVersion             `json:"dataVersion"`
	TopicConfigTable map[string]*protocol.TopicConfig `json:"topicConfigTable"`
	// JournalSeq is the last journal record the document holds.
	JournalSeq uint64 `json:"quiverJournalSeq,omitempty"`
}

// newTopicTable loads the topics document and, with a journal directory,
// the changes journaled after it.
func newTopicTable(meta *metaStore, journalDir string, log *slog.Logger) (*topicTable, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &topicTable{topics: map[string]*protocol.TopicConfig{}, meta: meta, log: log}
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
	if journalDir != "" {
		jr, recs, err := openJournal(filepath.Join(journalDir, "topics.journal"), doc.JournalSeq, log)
		if err != nil {
			return nil, err
		}
		t.jr = jr
		replayed := 0
		for _, r := range recs {
			if r.Seq <= doc.JournalSeq {
				continue
			}
			if err := t.apply(r); err != nil {
				jr.close()
				return nil, err
			}
			replayed++
		}
		if jr.size() > 0 {
			// Fold what was journaled into the document now (after a
			// crash, or a stop that could not compact).
			if err := t.compact(); err != nil {
				jr.close()
				return nil, err
			}
			log.Info("topics: journaled changes folded into the document", "replayed", replayed)
		}
	}
	t.version.Timestamp = time.Now().UnixMilli()
	t.version.Counter++
	return t, nil
}

// apply replays one journal record.
func (t *topicTable) apply(r journalRecord) error {
	if len(r.Value) == 0 {
		delete(t.topics, r.Name)
	} else {
		var c protocol.TopicConfig
		if err := json.Unmarshal(r.Value, &c); err != nil {
			return fmt.Errorf("broker: topics journal record %d (%s): %w", r.Seq, r.Name, err)
		}
		t.topics[r.Name] = &c
	}
	if len(r.Version) > 0 {
		var v protocol.DataVersion
		if err := json.Unmarshal(r.Version, &v); err != nil {
			return fmt.Errorf("broker: topics journal record %d: data version: %w", r.Seq, err)
		}
		t.version = v
	}
	return nil
}

// compact writes the whole document, holding everything journaled so far,
// and cuts the journal to what came after it. Changes wait only while the
// table is copied, not while the document is written.
func (t *topicTable) compact() error {
	t.saveMu.Lock()
	t.mu.RLock()
	doc := t.docLocked()
	t.mu.RUnlock()
	doc.JournalSeq = t.jr.lastSeq()
	t.saveMu.Unlock()
	if err := t.meta.save("topics", doc); err != nil {
		return err
	}
	return t.jr.cut(doc.JournalSeq)
}

// close waits for a background compaction, folds the journal into the
// document and closes it.
func (t *topicTable) close() error {
	if t.jr == nil {
		return nil
	}
	t.comp.wait()
	var err error
	if t.jr.size() > 0 {
		err = t.compact()
	}
	if cerr := t.jr.close(); err == nil {
		err = cerr
	}
	return err
}

// view is get by value: a send's checks read the topic without a copy
// on the heap (Attributes is shared, never changed in place).
func (t *topicTable) view(name string) (protocol.TopicConfig, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.topics[name]
	if !ok {
		return protocol.TopicConfig{}, false
	}
	return *c, true
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

// put stores c (its attributes too) and persists; it reports whether
// anything changed.
func (t *topicTable) put(c *protocol.TopicConfig) (bool, error) {
	cp := *c
	changed := false
	err := t.update(func() []string {
		if old, ok := t.topics[c.TopicName]; ok && old.Equal(&cp) {
			return nil
		}
		t.topics[c.TopicName] = &cp
		changed = true
		return []string{c.TopicName}
	})
	return changed, err
}

// putAltered stores c with its attributes altered by mods
// (protocol.AlterTopicAttributes: a new topic takes only additions, an
// existing one keeps the attributes mods leave alone), as Java's
// TopicConfigManager.updateTopicConfig. It returns the config stored and
// whether anything changed; a refused modification changes nothing.
func (t *topicTable) putAltered(c *protocol.TopicConfig, mods map[string]string) (*protocol.TopicConfig, bool, error) {
	cp := *c
	changed := false
	var alterErr error
	err := t.update(func() []string {
		old, exists := t.topics[c.TopicName]
		var current map[string]string
		if exists {
			current = old.Attributes
		}
		cp.Attributes, alterErr = protocol.AlterTopicAttributes(!exists, current, mods)
		if alterErr != nil {
			return nil
		}
		if exists && old.Equal(&cp) {
			return nil
		}
		t.topics[c.TopicName] = &cp
		changed = true
		return []string{c.TopicName}
	})
	if alterErr != nil {
		return nil, false, alterErr
	}
	return &cp, changed, err
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
	err := t.update(func() []string {
		var changed []string
		for i, c := range cs {
			if old, ok := t.topics[c.TopicName]; ok {
				cp := *old
				got[i] = &cp
				continue
			}
			cp := *c
			t.topics[c.TopicName] = &cp
			ret := cp
			got[i], created[i] = &ret, true
			changed = append(changed, c.TopicName)
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
	err := t.update(func() []string {
		if _, ok := t.topics[name]; !ok {
			return nil
		}
		delete(t.topics, name)
		removed = true
		return []string{name}
	})
	return removed, err
}

// update applies f under the lock; f returns the names it changed. The
// data version is bumped and each change journaled (one record each, one
// fsync for all), or the whole document saved where there is no journal.
func (t *topicTable) update(f func() []string) error {
	t.saveMu.Lock()
	t.mu.Lock()
	names := f()
	if len(names) == 0 {
		t.mu.Unlock()
		t.saveMu.Unlock()
		return nil
	}
	t.bump()
	if t.jr == nil {
		doc := t.docLocked()
		t.mu.Unlock()
		defer t.saveMu.Unlock()
		return t.meta.save("topics", doc)
	}
	recs, err := t.recordsLocked(names)
	live := len(t.topics)
	t.mu.Unlock()
	if err == nil {
		err = t.jr.append(recs)
	}
	t.saveMu.Unlock()
	if err != nil {
		return err
	}
	t.comp.maybe(t.jr, live, func() {
		if err := t.compact(); err != nil {
			t.log.Error("topics: compact the journal", "err", err)
		}
	})
	return nil
}

// recordsLocked builds the journal records of names' current state.
func (t *topicTable) recordsLocked(names []string) ([]journalRecord, error) {
	ver, err := json.Marshal(t.version)
	if err != nil {
		return nil, fmt.Errorf("broker: topics journal: %w", err)
	}
	recs := make([]journalRecord, len(names))
	for i, n := range names {
		recs[i] = journalRecord{Name: n}
		if c, ok := t.topics[n]; ok {
			if recs[i].Value, err = json.Marshal(c); err != nil {
				return nil, fmt.Errorf("broker: topics journal %s: %w", n, err)
			}
		}
	}
	recs[len(recs)-1].Version = ver
	return recs, nil
}

// touch bumps the data version without changing a topic (Java's
// nextVersion when brokerPermission changes), so that name servers take
// the next registration's table whole.
func (t *topicTable) touch() {
	t.mu.Lock()
	t.bump()
	t.mu.Unlock()
}

func (t *topicTable) bump() {
	t.version.Timestamp = time.Now().UnixMilli()
	t.version.Counter++
	if f := t.onChange.Load(); f != nil {
		(*f)()
	}
}

func (t *topicTable) docLocked() topicDoc {
	m := make(map[string]*protocol.TopicConfig, len(t.topics))
	for k, v := range t.topics {
		cp := *v
		m[k] = &cp
	}
	return topicDoc{DataVersion: t.version, TopicConfigTable: m}
}

// dataVersion is the table's current data version.
func (t *topicTable) dataVersion() protocol.DataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
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
