package crashfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/internal/crashfs"
)

func TestMain(m *testing.M) {
	crashfs.ServeIfChild()
	os.Exit(m.Run())
}

func writeSynced(t *testing.T, path, data string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(data)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	return f
}

// TestCrashKeepsOnlyDurableState checks the model itself: a synced file in
// an unsynced directory is lost, unsynced data is lost, a synced directory
// entry to a synced file survives, a new directory survives only with its
// parent synced, and a rename only with its directory synced.
func TestCrashKeepsOnlyDurableState(t *testing.T) {
	c := crashfs.Mount(t, t.TempDir())
	d := c.Dir

	// Kept, without the tail written after the fsync.
	f := writeSynced(t, filepath.Join(d, "kept"), "durable")
	require.NoError(t, durable.SyncDir(d))
	_, err := f.WriteString("-not-synced")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// durable.MkdirAll makes the new directories durable.
	sub := filepath.Join(d, "a", "b")
	require.NoError(t, durable.MkdirAll(sub, 0o755))
	f, err = durable.CreateFile(filepath.Join(sub, "y"), 0o644)
	require.NoError(t, err)
	_, err = f.WriteString("y")
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	// A rename not followed by a directory fsync is lost; durable.WriteFile
	// is kept.
	require.NoError(t, durable.WriteFile(filepath.Join(d, "meta.json"), []byte("v1"), 0o644))
	require.NoError(t, durable.WriteFile(filepath.Join(d, "meta.json"), []byte("v2"), 0o644))
	f = writeSynced(t, filepath.Join(d, "tmp"), "v2")
	require.NoError(t, f.Close())
	require.NoError(t, durable.SyncDir(d))
	require.NoError(t, os.WriteFile(filepath.Join(d, "tmp2"), []byte("v3"), 0o644))
	f, err = os.OpenFile(filepath.Join(d, "tmp2"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, os.Rename(filepath.Join(d, "tmp2"), filepath.Join(d, "tmp")))

	// Made last, after the last fsync of the root:
	// Lost: the file's data was synced, its directory entry was not.
	f = writeSynced(t, filepath.Join(d, "nodirsync"), "a")
	require.NoError(t, f.Close())

	// A new directory whose parent was not synced is lost with its file.
	require.NoError(t, os.Mkdir(filepath.Join(d, "lostdir"), 0o755))
	f = writeSynced(t, filepath.Join(d, "lostdir", "x"), "x")
	require.NoError(t, f.Close())
	require.NoError(t, durable.SyncDir(filepath.Join(d, "lostdir")))

	img, st := c.Crash()
	t.Logf("stats %+v", st)
	assert.Positive(t, st.FileSyncs)
	assert.Positive(t, st.DirSyncs)
	// After the crash the mount refuses writes.
	_, err = os.Create(filepath.Join(d, "after"))
	assert.Error(t, err)
	c.Close()

	assert.NoFileExists(t, filepath.Join(img, "nodirsync"))
	assert.NoDirExists(t, filepath.Join(img, "lostdir"))
	b, err := os.ReadFile(filepath.Join(img, "kept"))
	require.NoError(t, err)
	assert.Equal(t, "durable", string(b))
	b, err = os.ReadFile(filepath.Join(img, "a", "b", "y"))
	require.NoError(t, err)
	assert.Equal(t, "y", string(b))
	b, err = os.ReadFile(filepath.Join(img, "meta.json"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(b))
	b, err = os.ReadFile(filepath.Join(img, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(b), "the rename was never made durable")
	assert.NoFileExists(t, filepath.Join(img, "tmp2"), "tmp2's entry was durable only after the fsync of its parent, which came before it existed")
}

// TestMountAdoptsExistingFiles: what the backing directory holds at mount
// time is durable, and a truncated-then-synced file keeps its new size.
func TestMountAdoptsExistingFiles(t *testing.T) {
	back := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(back, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(back, "d", "old"), []byte("hello world"), 0o644))
	c := crashfs.Mount(t, back)
	f, err := os.OpenFile(filepath.Join(c.Dir, "d", "old"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(5))
	require.NoError(t, f.Sync())
	require.NoError(t, f.Truncate(1<<20))
	_, err = f.WriteAt([]byte("zzz"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	img, _ := c.Crash()
	c.Close()
	b, err := os.ReadFile(filepath.Join(img, "d", "old"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
}

// TestSyncWriteOnlyFile: a file opened write-only (the timer wheel's
// slots: O_WRONLY|O_APPEND) can be fsynced, and what was synced is in the
// image. The server read the synced ranges through the handle's own
// descriptor, which a write-only open cannot read: fsync failed with
// EBADF.
func TestSyncWriteOnlyFile(t *testing.T) {
	c := crashfs.Mount(t, t.TempDir())
	p := filepath.Join(c.Dir, "slot")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString("appended")
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, durable.SyncDir(c.Dir))
	require.NoError(t, f.Close())
	img, _ := c.Crash()
	c.Close()
	b, err := os.ReadFile(filepath.Join(img, "slot"))
	require.NoError(t, err)
	assert.Equal(t, "appended", string(b))
}
