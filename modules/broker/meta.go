package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/store"
)

// metaStore persists the broker's small state documents, in the store when
// it implements store.Metadata, else as files under dir/config.
type metaStore struct {
	st  store.Metadata
	dir string
}

func newMetaStore(s store.Store, dir string) *metaStore {
	if m, ok := s.(store.Metadata); ok {
		return &metaStore{st: m}
	}
	return &metaStore{dir: filepath.Join(dir, "config")}
}

func (m *metaStore) load(name string, into any) (bool, error) {
	var b []byte
	var err error
	if m.st != nil {
		b, err = m.st.LoadMeta(name)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
	} else {
		b, err = os.ReadFile(filepath.Join(m.dir, name+".json"))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("broker: load %s: %w", name, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return false, fmt.Errorf("broker: decode %s: %w", name, err)
	}
	return true, nil
}

func (m *metaStore) save(name string, v any) error {
	// Compact: a topic table of 100,000 entries is 16 MB this way and a
	// third more indented, written at every compaction and stop.
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("broker: encode %s: %w", name, err)
	}
	if m.st != nil {
		if err := m.st.SaveMeta(name, b); err != nil {
			return fmt.Errorf("broker: save %s: %w", name, err)
		}
		return nil
	}
	// Without a store's metadata seam the document is a file: written
	// to a temporary file, fsynced, renamed, the directory fsynced (and a
	// new directory's parent), so a power loss keeps the old or the new
	// document, never none.
	if err := durable.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("broker: save %s: %w", name, err)
	}
	if err := durable.WriteFile(filepath.Join(m.dir, name+".json"), b, 0o644); err != nil {
		return fmt.Errorf("broker: save %s: %w", name, err)
	}
	return nil
}
