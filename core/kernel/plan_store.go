package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/quivermq/quiver/core/durable"
)

// EngineFile is the file in storage.dir that names the engine that wrote
// the directory. Engines keep their data under <storage.dir>/<engine id>
// (commitlog/, pebble/), which is how a directory written before the file
// existed is recognised.
const EngineFile = "ENGINE"

// LockFile is the file in storage.dir a running process holds locked; it
// contains that process's id.
const LockFile = "quiver.lock"

// EngineMismatchError: storage.dir holds another engine's store.
type EngineMismatchError struct {
	Dir   string
	Found string // the engine that wrote Dir
	Want  string // storage.engine
}

func (e *EngineMismatchError) Error() string {
	return fmt.Sprintf("storage.dir %s holds a %s store but storage.engine is %s (set storage.engine: %s, or convert the data: mq store migrate --from-engine %s --from %s --to-engine %s --to <new dir>)",
		e.Dir, e.Found, e.Want, e.Found, e.Found, e.Dir, e.Want)
}

// DirLockedError: another process (or store) holds storage.dir.
type DirLockedError struct {
	Dir string
	PID int // 0 when the lock file names none
}

func (e *DirLockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("storage.dir %s is in use by %s (stop it, or set storage.dir to another directory)", e.Dir, holder)
}

// dirEngine names the engine that wrote dir: the engine file, or else the
// one engine directory among known found in it ("" for a new directory).
func dirEngine(dir, want string, engines []string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, EngineFile))
	switch {
	case err == nil:
		return strings.TrimSpace(string(b)), nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("storage: read %s: %w", filepath.Join(dir, EngineFile), err)
	}
	if isDir(filepath.Join(dir, want)) {
		return want, nil
	}
	for _, other := range engines {
		if other != want && isDir(filepath.Join(dir, other)) {
			return other, nil
		}
	}
	return "", nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// checkEngine refuses a directory another engine wrote.
func checkEngine(dir, engine string, engines []string) error {
	found, err := dirEngine(dir, engine, engines)
	if err != nil {
		return err
	}
	if found != "" && found != engine {
		return &EngineMismatchError{Dir: dir, Found: found, Want: engine}
	}
	return nil
}

// markEngine records engine in dir, durably, the first time.
func markEngine(dir, engine string) error {
	if !isDir(dir) {
		return nil // the engine keeps nothing on disk
	}
	path := filepath.Join(dir, EngineFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := durable.WriteFile(path, []byte(engine+"\n"), 0o644); err != nil {
		return fmt.Errorf("storage: record the engine in %s: %w", path, err)
	}
	return nil
}
