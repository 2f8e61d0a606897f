package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMkdirAllCreatesEveryLevel(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	require.NoError(t, MkdirAll(dir, 0o755))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	require.NoError(t, MkdirAll(dir, 0o755), "an existing directory is fine")

	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	err = MkdirAll(filepath.Join(file, "x"), 0o755)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a directory")
}

func TestWriteFileReplacesAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topics.json")
	require.NoError(t, WriteFile(path, []byte("old"), 0o644))
	require.NoError(t, WriteFile(path, []byte("new"), 0o600))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "the temporary file is renamed, not left behind")

	err = WriteFile(filepath.Join(dir, "missing", "x.json"), nil, 0o644)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "durable: write")
}

func TestCreateFileRefusesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	f, err := CreateFile(path, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = CreateFile(path, 0o644)
	require.ErrorIs(t, err, os.ErrExist)
}
