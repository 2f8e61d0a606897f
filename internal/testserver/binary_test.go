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

// TestRemoveEndedBinaries: the binaries of ended test processes go, those
// of running ones (this one, a child still running) and other files stay.
func TestRemoveEndedBinaries(t *testing.T) {
	dir := t.TempDir()
	ended := exec.Command("true")
	require.NoError(t, ended.Run())
	alive := exec.Command("sleep", "30")
	require.NoError(t, alive.Start())
	t.Cleanup(func() {
		_ = alive.Process.Kill()
		_ = alive.Wait()
	})
	name := func(pid int) string { return "mq-" + strconv.Itoa(pid) }
	for _, f := range []string{name(ended.Process.Pid), "release-" + strconv.Itoa(ended.Process.Pid), name(alive.Process.Pid), name(os.Getpid()), "mq-x", "other"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}

	removeEndedBinaries(dir)

	left, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	var names []string
	for _, l := range left {
		names = append(names, filepath.Base(l))
	}
	assert.ElementsMatch(t, []string{name(alive.Process.Pid), name(os.Getpid()), "mq-x", "other"}, names)
}
