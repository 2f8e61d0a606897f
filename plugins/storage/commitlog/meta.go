package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quivermq/quiver/core/store"
)

func (s *Store) metaPath(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("commitlog: metadata name %q: %w", name, store.ErrBadArgument)
	}
	return filepath.Join(s.metaDir, name+".json"), nil
}

// LoadMeta implements store.Metadata: config/<name>.json.
func (s *Store) LoadMeta(name string) ([]byte, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("commitlog: load %s: %w", name, store.ErrClosed)
	}
	path, err := s.metaPath(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("commitlog: load %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("commitlog: load %s: %w", name, err)
	}
	return b, nil
}

// SaveMeta implements store.Metadata: the document is written to a temp
// file, synced, renamed over config/<name>.json, and the directory synced.
func (s *Store) SaveMeta(name string, data []byte) error {
	if s.closed.Load() {
		return fmt.Errorf("commitlog: save %s: %w", name, store.ErrClosed)
	}
	path, err := s.metaPath(name)
	if err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	f, err := os.CreateTemp(s.metaDir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("commitlog: save %s: %w", name, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("commitlog: save %s: %w", name, err)
	}
	if err := syncDir(s.metaDir); err != nil {
		return fmt.Errorf("commitlog: save %s: %w", name, err)
	}
	return nil
}
