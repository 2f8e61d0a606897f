package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// metaKey checks name with the CommitLog engine's rules (so documents
// migrate either way) and returns its key.
func metaKey(name string) ([]byte, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("pebblestore: metadata name %q: %w", name, store.ErrBadArgument)
	}
	return append([]byte{prefixMeta}, name...), nil
}

// LoadMeta implements store.Metadata.
func (s *Store) LoadMeta(name string) ([]byte, error) {
	key, err := metaKey(name)
	if err != nil {
		return nil, err
	}
	if err := s.enter("load " + name); err != nil {
		return nil, err
	}
	defer s.done()
	v, err := s.get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("pebblestore: load %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: load %s: %w", name, err)
	}
	return v, nil
}

// SaveMeta implements store.Metadata: the document is written and the WAL
// synced before it returns, in either flush mode.
func (s *Store) SaveMeta(name string, data []byte) error {
	key, err := metaKey(name)
	if err != nil {
		return err
	}
	if err := s.enter("save " + name); err != nil {
		return err
	}
	defer s.done()
	return s.guard("save "+name, func() error {
		if err := s.db.Set(key, data, pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: save %s: %w: %w", name, store.ErrNotDurable, err)
		}
		return nil
	})
}

// MetaNames lists the metadata documents, sorted (the MetaLister of
// core/store/migrate).
func (s *Store) MetaNames() ([]string, error) {
	if err := s.enter("list metadata"); err != nil {
		return nil, err
	}
	defer s.done()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list metadata: %w", err)
	}
	var names []string
	for valid := it.First(); valid; valid = it.Next() {
		names = append(names, string(it.Key()[1:]))
	}
	if err := firstErr(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("pebblestore: list metadata: %w", err)
	}
	return names, nil
}

// DeleteMeta removes a metadata document (the MetaDeleter of
// core/store/migrate). Deleting an absent document is not an error.
func (s *Store) DeleteMeta(name string) error {
	key, err := metaKey(name)
	if err != nil {
		return err
	}
	if err := s.enter("delete " + name); err != nil {
		return err
	}
	defer s.done()
	return s.guard("delete "+name, func() error {
		if err := s.db.Delete(key, pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: delete %s: %w: %w", name, store.ErrNotDurable, err)
		}
		return nil
	})
}

// SetQueueStart makes an empty queue start at offset: its min and max
// become offset and its next message gets it (the OffsetSetter of
// core/store/migrate, to keep queue offsets when copying a store
// whose retention moved min above 0). A queue that holds messages can
// only be "set" to its current start.
func (s *Store) SetQueueStart(q store.Queue, offset int64) error {
	if err := checkTopic(q.Topic); err != nil {
		return err
	}
	if q.ID < 0 || offset < 0 {
		return fmt.Errorf("pebblestore: set start of %s to %d: %w", q, offset, store.ErrBadArgument)
	}
	if err := s.enter("set queue start"); err != nil {
		return err
	}
	defer s.done()
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := s.queueFor(q)
	mn, mx := qs.offsets()
	if mn == offset && (mx > mn || qs.persisted) {
		return nil
	}
	if mx > mn || mx > offset {
		return fmt.Errorf("pebblestore: set start of %s to %d: it holds offsets [%d, %d): %w", q, offset, mn, mx, store.ErrBadArgument)
	}
	err := s.guard("set queue start", func() error {
		return s.db.Set(queueStateKey(q), be.AppendUint64(nil, uint64(offset)), pebble.Sync)
	})
	if err != nil {
		return err
	}
	qs.max.Store(offset)
	qs.min.Store(offset)
	qs.persisted = true
	return nil
}

// AppendRaw appends records already in the stored layout, as another
// store stored them (the StoredAppender of core/store/migrate). Each
// goes to the queue named by its topic and queue id with tagsCodes[i]. The
// store assigns the queue offset (the queue's next) and the physical
// offset and patches them into a copy of the record; the store timestamp
// is kept, raised only to keep store time monotonic. Body, properties,
// flags, hosts and every other byte are unchanged.
func (s *Store) AppendRaw(ctx context.Context, records [][]byte, tagsCodes []int64) ([]store.Position, error) {
	if len(records) != len(tagsCodes) {
		return nil, fmt.Errorf("pebblestore: append raw: %d records and %d tag codes: %w", len(records), len(tagsCodes), store.ErrBadArgument)
	}
	if len(records) == 0 {
		return nil, nil
	}
	items := make([]item, len(records))
	for i, rec := range records {
		m, n, err := message.DecodeStored(rec)
		if err != nil || n != len(rec) {
			return nil, fmt.Errorf("pebblestore: append raw: record %d: %w: %v", i, store.ErrBadArgument, err)
		}
		if err := checkMessage(&store.Message{Ext: m}); err != nil {
			return nil, err
		}
		items[i] = item{q: store.Queue{Topic: m.Topic, ID: m.QueueID}, raw: rec, props: m.Properties, ts: m.StoreTimestamp, tags: tagsCodes[i]}
	}
	return s.append(ctx, items)
}
