package broker

import (
	"strconv"
	"strings"
	"sync"
)

// offsetTable holds committed consumer offsets: group@topic → queue → offset.
type offsetTable struct {
	mu    sync.RWMutex
	table map[string]map[int32]int64
	dirty bool
	meta  *metaStore
	// saveMu orders flushes: a slower flush never overwrites a newer one.
	saveMu sync.Mutex
}

type offsetDoc struct {
	OffsetTable map[string]map[string]int64 `json:"offsetTable"`
}

func offsetKey(group, topic string) string { return topic + "@" + group }

func newOffsetTable(meta *metaStore) (*offsetTable, error) {
	o := &offsetTable{table: map[string]map[int32]int64{}, meta: meta}
	var doc offsetDoc
	ok, err := meta.load("consumerOffset", &doc)
	if err != nil {
		return nil, err
	}
	if ok {
		for k, qs := range doc.OffsetTable {
			m := map[int32]int64{}
			for q, off := range qs {
				n, err := strconv.ParseInt(q, 10, 32)
				if err != nil {
					continue
				}
				m[int32(n)] = off
			}
			o.table[k] = m
		}
	}
	return o, nil
}

// commit records a committed offset; a negative one is ignored (the
// handlers refuse it with an answer).
func (o *offsetTable) commit(group, topic string, queue int32, off int64) {
	if off < 0 {
		return
	}
	k := offsetKey(group, topic)
	o.mu.Lock()
	m, ok := o.table[k]
	if !ok {
		m = map[int32]int64{}
		o.table[k] = m
	}
	if m[queue] != off || !ok {
		m[queue] = off
		o.dirty = true
	}
	o.mu.Unlock()
}

func (o *offsetTable) query(group, topic string, queue int32) (int64, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	off, ok := o.table[offsetKey(group, topic)][queue]
	return off, ok
}

// groupsOf lists the groups with offsets on topic.
func (o *offsetTable) groupsOf(topic string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.table {
		t, g, _ := strings.Cut(k, "@")
		if t == topic {
			out = append(out, g)
		}
	}
	return out
}

func (o *offsetTable) removeTopic(topic string) {
	o.mu.Lock()
	for k := range o.table {
		if strings.HasPrefix(k, topic+"@") {
			delete(o.table, k)
			o.dirty = true
		}
	}
	o.mu.Unlock()
}

// flush persists the table when it changed.
func (o *offsetTable) flush() error {
	o.saveMu.Lock()
	defer o.saveMu.Unlock()
	o.mu.Lock()
	if !o.dirty {
		o.mu.Unlock()
		return nil
	}
	doc := offsetDoc{OffsetTable: make(map[string]map[string]int64, len(o.table))}
	for k, qs := range o.table {
		m := make(map[string]int64, len(qs))
		for q, off := range qs {
			m[strconv.Itoa(int(q))] = off
		}
		doc.OffsetTable[k] = m
	}
	o.dirty = false
	o.mu.Unlock()
	if err := o.meta.save("consumerOffset", doc); err != nil {
		o.mu.Lock()
		o.dirty = true
		o.mu.Unlock()
		return err
	}
	return nil
}
