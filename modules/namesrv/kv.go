package namesrv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/quivermq/quiver/core/durable"
)

// OrderTopicConfigNamespace is the KV namespace whose entries (topic →
// "brokerName:queues;...") make a topic globally ordered (Java
// NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG). REGISTER_BROKER answers carry
// its table, and routes carry a topic's entry as orderTopicConf when
// orderMessageEnable is on.
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// KVStore is the name server's KV config (Java KVConfigManager): string
// values by namespace and key, persisted after every change as Java's
// kvConfig.json ({"configTable":{namespace:{key:value}}}). It is safe for
// concurrent use.
//
// Unlike Java, which logs a failed write and keeps the change in memory, a
// change that cannot be persisted is rolled back and reported, so an admin
// never sees SUCCESS for a setting a restart would lose.
type KVStore struct {
	// path is the file; empty keeps the table in memory only.
	path string

	// writeMu serialises changes and their persistence, so the file
	// always holds the latest table.
	writeMu sync.Mutex
	mu      sync.RWMutex
	table   map[string]map[string]string
}

// NewKVStore returns an empty store persisted at path (in memory only when
// path is empty). Call Load to read what path holds.
func NewKVStore(path string) *KVStore {
	return &KVStore{path: path, table: map[string]map[string]string{}}
}

// kvFile is Java's KVConfigSerializeWrapper.
type kvFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// kvTable is Java's KVTable, the GET_KVLIST_BY_NAMESPACE and REGISTER_BROKER
// answer body.
type kvTable struct {
	Table map[string]string `json:"table"`
}

// Load replaces the table with the file's content. A missing or empty file
// is an empty table (a fresh name server); a file that is not the JSON
// Java writes is an error, as Java's name server refuses to start on it.
func (s *KVStore) Load() error {
	if s.path == "" {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("namesrv: kv load: %w", err)
	}
	table := map[string]map[string]string{}
	if len(bytes.TrimSpace(b)) > 0 {
		var f kvFile
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("namesrv: kv load %s: %w", s.path, err)
		}
		for ns, kv := range f.ConfigTable {
			if kv == nil {
				kv = map[string]string{}
			}
			table[ns] = kv
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	s.table = table
	s.mu.Unlock()
	return nil
}

// Put sets namespace/key to value (PUT_KV_CONFIG) and persists the table.
func (s *KVStore) Put(namespace, key, value string) error {
	return s.change(func(t map[string]map[string]string) bool {
		kv := t[namespace]
		if kv == nil {
			kv = map[string]string{}
			t[namespace] = kv
		}
		if old, ok := kv[key]; ok && old == value {
			return false
		}
		kv[key] = value
		return true
	})
}

// Delete removes namespace/key (DELETE_KV_CONFIG). As in Java, the
// namespace stays, empty, when its last key goes: GET_KVLIST_BY_NAMESPACE
// then answers an empty table rather than QUERY_NOT_FOUND.
func (s *KVStore) Delete(namespace, key string) error {
	return s.change(func(t map[string]map[string]string) bool {
		kv := t[namespace]
		if _, ok := kv[key]; !ok {
			return false
		}
		delete(kv, key)
		return true
	})
}

// change applies f to a copy of the table; when f reports a change, the
// copy is persisted and then installed. On a persistence error nothing
// changes.
func (s *KVStore) change(f func(map[string]map[string]string) bool) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	next := make(map[string]map[string]string, len(s.table)+1)
	for ns, kv := range s.table {
		next[ns] = maps.Clone(kv)
	}
	s.mu.RUnlock()
	if !f(next) {
		return nil
	}
	err := s.persist(next)
	if err != nil && !errors.Is(err, errDirSync) {
		return err
	}
	// Renamed into place: the file holds next even when the directory
	// sync failed, so memory follows it (and the error is still told).
	s.mu.Lock()
	s.table = next
	s.mu.Unlock()
	return err
}

// Get returns the value of namespace/key (GET_KV_CONFIG).
func (s *KVStore) Get(namespace, key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.table[namespace][key]
	return v, ok
}

// List returns a copy of a namespace's table, false when the namespace was
// never written.
func (s *KVStore) List(namespace string) (map[string]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	kv, ok := s.table[namespace]
	if !ok {
		return nil, false
	}
	return maps.Clone(kv), true
}

// ListJSON returns a namespace's table as Java's KVTable JSON
// ({"table":{...}}), nil when the namespace was never written.
func (s *KVStore) ListJSON(namespace string) []byte {
	kv, ok := s.List(namespace)
	if !ok {
		return nil
	}
	b, err := marshalJava(kvTable{Table: kv})
	if err != nil {
		return nil // a map of strings always encodes
	}
	return b
}

// persist writes t to the file atomically: a temporary file in the same
// directory, fsynced, renamed over the file, and the directory fsynced.
func (s *KVStore) persist(t map[string]map[string]string) error {
	if s.path == "" {
		return nil
	}
	b, err := marshalJava(kvFile{ConfigTable: t})
	if err != nil {
		return fmt.Errorf("namesrv: kv encode: %w", err)
	}
	if err := writeFileAtomic(s.path, b, 0o600); err != nil {
		return fmt.Errorf("namesrv: kv persist: %w", err)
	}
	return nil
}

// errDirSync marks a write whose rename happened but whose directory could
// not be synced.
var errDirSync = errors.New("sync directory")

// writeFileAtomic replaces path with b so that a crash leaves either the
// old or the new content.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := durable.MkdirAll(dir, 0o755); err != nil { // new parents fsynced too
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w %s: %v", errDirSync, dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w %s: %v", errDirSync, dir, err)
	}
	return nil
}

// marshalJava encodes v compactly without HTML escaping, as fastjson
// writes it (maps with sorted keys).
func marshalJava(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
