package commitlog

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// defaultQueryMax bounds QueryByKey when max is not positive.
const defaultQueryMax = 32

// Key-index geometry: a segment holds up to keySegEntries entries hashed
// into keySegSlots chains (about four entries a chain when full).
const (
	keySegEntries = 1 << 20
	keySegSlots   = 1 << 18
)

// keyIndex maps topic + key to the commit-log offsets of the records
// carrying that key (in UNIQ_KEY or KEYS). It lives in memory, is
// rebuilt by the recovery scan and holds no pointers per entry (16 bytes
// a key, nothing for the garbage collector to scan): like RocketMQ's
// IndexFile, each entry keeps the hash of topic and key, the offset and
// the previous entry of its hash chain, so a lookup can match a record
// that does not carry the key. QueryByKey checks every candidate record.
//
// Entries are added in log order into segments of keySegEntries; prune
// drops whole segments below the log's start and dropTopic records a
// floor below which the topic's entries are ignored.
type keyIndex struct {
	mu     sync.RWMutex
	seed   maphash.Seed
	segs   []*keySeg // oldest first
	floors map[string]int64
}

type keySeg struct {
	slots   []uint32 // hash & (keySegSlots-1) -> 1 + newest entry of the chain; 0 = none
	ents    []keyEnt
	maxPhys int64
}

type keyEnt struct {
	phys int64
	hash uint32
	prev uint32 // 1 + previous entry of the chain in this segment; 0 = none
}

func newKeyIndex() *keyIndex { return &keyIndex{seed: maphash.MakeSeed(), floors: map[string]int64{}} }

func (k *keyIndex) hash(topic, key string) uint32 {
	var h maphash.Hash
	h.SetSeed(k.seed)
	h.WriteString(topic)
	h.WriteByte(0)
	h.WriteString(key)
	x := h.Sum64()
	return uint32(x) ^ uint32(x>>32)
}

func (k *keyIndex) putLocked(topic, key string, phys int64) {
	if key == "" {
		return
	}
	hv := k.hash(topic, key)
	var sg *keySeg
	if n := len(k.segs); n > 0 && len(k.segs[n-1].ents) < keySegEntries {
		sg = k.segs[n-1]
	} else {
		sg = &keySeg{slots: make([]uint32, keySegSlots)}
		k.segs = append(k.segs, sg)
	}
	slot := hv & (keySegSlots - 1)
	head := sg.slots[slot]
	if head != 0 {
		if e := sg.ents[head-1]; e.hash == hv && e.phys == phys {
			return // the same record again (UNIQ_KEY also in KEYS)
		}
	}
	sg.ents = append(sg.ents, keyEnt{phys: phys, hash: hv, prev: head})
	sg.slots[slot] = uint32(len(sg.ents))
	sg.maxPhys = max(sg.maxPhys, phys)
}

// addLocked indexes one appended message.
func (k *keyIndex) addLocked(topic string, props message.Properties, phys int64) {
	if len(props) == 0 {
		return
	}
	k.putLocked(topic, props[message.PropertyUniqKey], phys)
	if keys := props[message.PropertyKeys]; keys != "" {
		for key := range strings.FieldsSeq(keys) {
			k.putLocked(topic, key, phys)
		}
	}
}

// addRawLocked indexes a record from its encoded topic and properties.
func (k *keyIndex) addRawLocked(topic, props []byte, phys int64) {
	if len(props) == 0 {
		return
	}
	t := string(topic)
	k.putLocked(t, string(propValue(props, message.PropertyUniqKey)), phys)
	if keys := propValue(props, message.PropertyKeys); len(keys) > 0 {
		for key := range strings.FieldsSeq(string(keys)) {
			k.putLocked(t, key, phys)
		}
	}
}

// get returns the offsets of records that may carry key in topic,
// oldest first (hash matches: the caller checks the records).
func (k *keyIndex) get(topic, key string) []int64 {
	hv := k.hash(topic, key)
	k.mu.RLock()
	defer k.mu.RUnlock()
	floor := k.floors[topic]
	var out []int64
	for i := len(k.segs) - 1; i >= 0; i-- {
		sg := k.segs[i]
		if sg.maxPhys < floor {
			break
		}
		for at := sg.slots[hv&(keySegSlots-1)]; at != 0; {
			e := sg.ents[at-1]
			if e.hash == hv && e.phys >= floor {
				out = append(out, e.phys)
			}
			at = e.prev
		}
	}
	slices.Reverse(out)
	return out
}

// prune drops the segments whose entries all lie below minPhys (the
// entries of the first kept segment below it are skipped by lookups,
// whose records are gone).
func (k *keyIndex) prune(minPhys int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for n < len(k.segs)-1 && k.segs[n].maxPhys < minPhys {
		n++
	}
	if n > 0 {
		clear(k.segs[:n])
		k.segs = k.segs[n:]
	}
	for t, f := range k.floors {
		if f <= minPhys {
			delete(k.floors, t)
		}
	}
}

// dropTopic hides the topic's entries so far: a topic deleted and made
// again does not find the old one's records.
func (k *keyIndex) dropTopic(topic string, end int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.floors[topic] = end
}

// QueryByKey implements store.KeyIndexer: up to max of the newest records
// of topic carrying key whose store time is in [begin, end], oldest first.
func (s *Store) QueryByKey(ctx context.Context, topic, key string, begin, end int64, max int) ([][]byte, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("commitlog: query by key: %w", store.ErrClosed)
	}
	if s.keys == nil {
		return nil, fmt.Errorf("commitlog: query by key: key_index is off: %w", store.ErrNotFound)
	}
	if max <= 0 {
		max = defaultQueryMax
	}
	offs := s.keys.get(topic, key)
	var out [][]byte
	for i := len(offs) - 1; i >= 0 && len(out) < max; i-- {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("commitlog: query by key: %w", err)
		}
		rec, err := s.Lookup(ctx, offs[i])
		if err != nil {
			if errors.Is(err, store.ErrOffsetOutOfRange) || errors.Is(err, store.ErrNotFound) {
				continue
			}
			return nil, err
		}
		v, ok := parseRecord(rec)
		if !ok || v.storeTS < begin || v.storeTS > end || !recordHasKey(v, topic, key) {
			continue
		}
		out = append(out, rec)
	}
	slices.Reverse(out)
	return out, nil
}

// recordHasKey reports whether the record is of topic and carries key in
// UNIQ_KEY or KEYS (an index hit is only a hash match).
func recordHasKey(v recordView, topic, key string) bool {
	if string(v.topic) != topic {
		return false
	}
	if string(propValue(v.props, message.PropertyUniqKey)) == key {
		return true
	}
	for k := range strings.FieldsSeq(string(propValue(v.props, message.PropertyKeys))) {
		if k == key {
			return true
		}
	}
	return false
}
