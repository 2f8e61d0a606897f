// Package durable creates, writes and renames files and directories the
// POSIX way, so that they survive a power loss and not only a process
// crash: a file's data is fsynced before it is renamed into place, and a
// directory is fsynced after an entry in it was added, renamed or removed
// (Linux's ext4 and xfs lose a new directory entry whose directory was not
// fsynced, and with a new directory everything under it).
//
// Rules the helpers follow, and that code writing files by hand must
// follow too:
//
//   - a new file: write, fsync the file, fsync its directory;
//   - replacing a file: write a temporary file in the same directory,
//     fsync it, rename it over the old one, fsync the directory;
//   - a new directory: mkdir, then fsync its parent (for every directory
//     MkdirAll created, from the top down).
//
// internal/crashfs (a FUSE file system that forgets what was not made
// durable) checks these rules in the power-loss tests.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SyncDir fsyncs the directory dir so that entries added to, renamed in or
// removed from it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("durable: sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("durable: sync dir %s: %w", dir, err)
	}
	return nil
}

// MkdirAll is os.MkdirAll that makes every directory it creates durable:
// after each mkdir the new directory's parent is fsynced. A directory that
// already exists is left alone (its entry is assumed durable: it was
// created by an earlier MkdirAll or by the operator).
func MkdirAll(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("durable: mkdir %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("durable: mkdir %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("durable: mkdir %s: %w", d, err)
		}
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile replaces path with data atomically and durably: a temporary
// file in the same directory is written and fsynced, renamed over path,
// and the directory fsynced. After a crash path holds either the old or
// the new contents, never a mix or nothing (if it existed before). The
// directory must exist (MkdirAll makes it durable).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("durable: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
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
		return fmt.Errorf("durable: write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// CreateFile creates path (which must not exist) for reading and writing
// and makes its directory entry durable; the caller fsyncs what it writes.
func CreateFile(path string, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fmt.Errorf("durable: create %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}
