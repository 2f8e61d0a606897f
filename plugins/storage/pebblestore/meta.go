package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quivermq/quiver/core/durable"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// Metadata documents (the broker's topic and group tables, consumer
// offsets, the schedule's and transactions' progress) are files,
// <storage.dir>/config/<name>.json, as with the CommitLog engine, and not
// only keys in the Pebble database: damage to the messages' WAL or
// sstables (walcheck.go, damage.go) cannot take them with it. Each save
// replaces the file durably (a temporary file fsynced, renamed, the
// directory fsynced) and then writes the document to its key as well,
// without a WAL sync: that copy is what an older Quiver reads, and what
// LoadMeta falls back to when the file is missing or unreadable (a store
// written before documents were files keeps them only there until they
// are saved again).

// MetaDir is the directory under the data directory (storage.dir) holding
// the metadata documents.
const MetaDir = "config"

// checkMetaName checks name with the CommitLog engine's rules (so
// documents migrate either way).
func checkMetaName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("pebblestore: metadata name %q: %w", name, store.ErrBadArgument)
	}
	return nil
}

// metaKey checks name and returns its key.
func metaKey(name string) ([]byte, error) {
	if err := checkMetaName(name); err != nil {
		return nil, err
	}
	return append([]byte{prefixMeta}, name...), nil
}

// metaFS is the file system of the documents: Pebble's when the
// configuration gives one (tests), else the OS's.
func (s *Store) metaFS() vfs.FS {
	if s.cfg.FS != nil {
		return s.cfg.FS
	}
	return vfs.Default
}

func (s *Store) metaDir() string { return filepath.Join(s.dataDir(), MetaDir) }

func (s *Store) metaPath(name string) string { return filepath.Join(s.metaDir(), name+".json") }

// LoadMeta implements store.Metadata: the document's file, or its key
// when there is no file or it cannot be read.
func (s *Store) LoadMeta(name string) ([]byte, error) {
	key, err := metaKey(name)
	if err != nil {
		return nil, err
	}
	if err := s.enter("load " + name); err != nil {
		return nil, err
	}
	defer s.done()
	b, ferr := readFile(s.metaFS(), s.metaPath(name))
	if ferr == nil {
		return b, nil
	}
	if !errors.Is(ferr, os.ErrNotExist) {
		s.log.Error("pebblestore: metadata document unreadable; using its copy in the database", "name", name, "err", ferr)
	}
	v, err := s.get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound) && errors.Is(ferr, os.ErrNotExist):
		return nil, fmt.Errorf("pebblestore: load %s: %w", name, store.ErrNotFound)
	case errors.Is(err, pebble.ErrNotFound):
		return nil, fmt.Errorf("pebblestore: load %s: %w", name, ferr)
	case err != nil:
		return nil, fmt.Errorf("pebblestore: load %s: %w", name, err)
	}
	return v, nil
}

// SaveMeta implements store.Metadata: the document's file is replaced
// durably before it returns, in either flush mode.
func (s *Store) SaveMeta(name string, data []byte) error {
	key, err := metaKey(name)
	if err != nil {
		return err
	}
	if err := s.enter("save " + name); err != nil {
		return err
	}
	defer s.done()
	if err := s.writeMetaFile(name, data); err != nil {
		return fmt.Errorf("pebblestore: save %s: %w: %w", name, store.ErrNotDurable, err)
	}
	err = s.guard("save "+name, func() error { return s.db.Set(key, data, pebble.NoSync) })
	if err != nil {
		// The file holds the document; only the copy is behind.
		s.log.Warn("pebblestore: metadata copy in the database not written", "name", name, "err", err)
	}
	return nil
}

// writeMetaFile replaces the document's file: a temporary file in the
// same directory written and fsynced, renamed over it, the directory
// fsynced (and a new directory's parent).
func (s *Store) writeMetaFile(name string, data []byte) error {
	fs, dir := s.metaFS(), s.metaDir()
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if s.cfg.FS == nil {
			err = durable.MkdirAll(dir, 0o755)
		} else {
			err = fs.MkdirAll(dir, 0o755)
			if err == nil {
				err = syncDir(fs, filepath.Dir(dir))
			}
		}
		if err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%016x.tmp", name, rand.Uint64()))
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, s.metaPath(name))
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	return syncDir(fs, dir)
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// MetaNames lists the metadata documents, sorted (the MetaLister of
// core/store/migrate): those with a file and those only in the database.
func (s *Store) MetaNames() ([]string, error) {
	if err := s.enter("list metadata"); err != nil {
		return nil, err
	}
	defer s.done()
	seen := map[string]bool{}
	files, err := s.metaFS().List(s.metaDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pebblestore: list metadata: %w", err)
	}
	for _, f := range files {
		if n, ok := strings.CutSuffix(f, ".json"); ok && checkMetaName(n) == nil {
			seen[n] = true
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list metadata: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		seen[string(it.Key()[1:])] = true
	}
	if err := firstErr(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("pebblestore: list metadata: %w", err)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// DeleteMeta removes a metadata document (the MetaDeleter of
// core/store/migrate): its key (synced first, so that a crash cannot
// bring the document back from it), then its file. Deleting an absent
// document is not an error.
func (s *Store) DeleteMeta(name string) error {
	key, err := metaKey(name)
	if err != nil {
		return err
	}
	if err := s.enter("delete " + name); err != nil {
		return err
	}
	defer s.done()
	err = s.guard("delete "+name, func() error {
		if err := s.db.Delete(key, pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: delete %s: %w: %w", name, store.ErrNotDurable, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fs := s.metaFS()
	if err := fs.Remove(s.metaPath(name)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("pebblestore: delete %s: %w: %w", name, store.ErrNotDurable, err)
	}
	if err := syncDir(fs, s.metaDir()); err != nil {
		return fmt.Errorf("pebblestore: delete %s: %w: %w", name, store.ErrNotDurable, err)
	}
	return nil
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
	qs := s.queues.GetOrCreate(q)
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
