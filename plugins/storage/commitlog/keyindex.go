package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// defaultQueryMax bounds QueryByKey when max is not positive.
const defaultQueryMax = 32

// keyIndex maps topic + key to the commit-log offsets of the records
// carrying that key (in UNIQ_KEY or KEYS), oldest first. It lives in
// memory and is rebuilt by the recovery scan.
type keyIndex struct {
	mu sync.RWMutex
	m  map[string][]int64
}

func newKeyIndex() *keyIndex { return &keyIndex{m: map[string][]int64{}} }

func indexKey(topic, key string) string { return topic + "\x00" + key }

func (k *keyIndex) putLocked(topic, key string, phys int64) {
	if key == "" {
		return
	}
	ik := indexKey(topic, key)
	offs := k.m[ik]
	if n := len(offs); n > 0 && offs[n-1] == phys {
		return
	}
	k.m[ik] = append(offs, phys)
}

// addLocked indexes one appended message.
func (k *keyIndex) addLocked(topic string, props message.Properties, phys int64) {
	if len(props) == 0 {
		return
	}
	k.putLocked(topic, props[message.PropertyUniqKey], phys)
	for _, key := range strings.Fields(props[message.PropertyKeys]) {
		k.putLocked(topic, key, phys)
	}
}

// addRawLocked indexes a record from its encoded topic and properties.
func (k *keyIndex) addRawLocked(topic, props []byte, phys int64) {
	if len(props) == 0 {
		return
	}
	t := string(topic)
	k.putLocked(t, string(propValue(props, message.PropertyUniqKey)), phys)
	for _, key := range strings.Fields(string(propValue(props, message.PropertyKeys))) {
		k.putLocked(t, key, phys)
	}
}

func (k *keyIndex) get(topic, key string) []int64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return slices.Clone(k.m[indexKey(topic, key)])
}

// prune drops offsets below minPhys.
func (k *keyIndex) prune(minPhys int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for ik, offs := range k.m {
		i, _ := slices.BinarySearch(offs, minPhys)
		switch {
		case i == len(offs):
			delete(k.m, ik)
		case i > 0:
			k.m[ik] = slices.Clone(offs[i:])
		}
	}
}

func (k *keyIndex) dropTopic(topic string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	prefix := topic + "\x00"
	for ik := range k.m {
		if strings.HasPrefix(ik, prefix) {
			delete(k.m, ik)
		}
	}
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
		h, err := message.PeekHeader(rec)
		if err != nil || h.StoreTimestamp < begin || h.StoreTimestamp > end {
			continue
		}
		out = append(out, rec)
	}
	slices.Reverse(out)
	return out, nil
}
