package testserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoveEndedBinaries: the directories of ended test processes go,
// those of running ones (this one, a child still running) and other
// entries stay.
func TestRemoveEndedBinaries(t *testing.T) {
	base := t.TempDir()
	ended := exec.Command("true")
	require.NoError(t, ended.Run())
	alive := exec.Command("sleep", "30")
	require.NoError(t, alive.Start())
	t.Cleanup(func() {
		_ = alive.Process.Kill()
		_ = alive.Wait()
	})
	for _, pid := range []int{ended.Process.Pid, alive.Process.Pid, os.Getpid()} {
		dir := filepath.Join(base, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "mq"), nil, 0o600))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(base, "x"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(base, "1"), nil, 0o600)) // a file, not a process's directory

	removeEndedBinaries(base)

	left, err := filepath.Glob(filepath.Join(base, "*"))
	require.NoError(t, err)
	var names []string
	for _, l := range left {
		names = append(names, filepath.Base(l))
	}
	assert.ElementsMatch(t, []string{strconv.Itoa(alive.Process.Pid), strconv.Itoa(os.Getpid()), "x", "1"}, names)
}

// TestBinaryPathKeepsTheName: the file is named as asked (guides run
// `mq` from PATH), in this process's own directory.
func TestBinaryPathKeepsTheName(t *testing.T) {
	p, err := BinaryPath("mq")
	require.NoError(t, err)
	assert.Equal(t, "mq", filepath.Base(p))
	assert.Equal(t, strconv.Itoa(os.Getpid()), filepath.Base(filepath.Dir(p)))
	assert.DirExists(t, filepath.Dir(p))
}
