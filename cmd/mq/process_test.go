package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProcessSection checks process.memory_limit through the plan of a
// server role: a value is decoded, too small or unknown keys are problems
// naming the key.
func TestProcessSection(t *testing.T) {
	plan := func(sets ...string) (*processConfig, error) {
		g := &globalFlags{sets: append([]string{"storage.dir=" + t.TempDir()}, sets...)}
		p, err := planConfig(g, roleDev)
		if err != nil {
			return nil, err
		}
		pc, _ := p.Section("process").(*processConfig)
		return pc, nil
	}
	pc, err := plan()
	require.NoError(t, err)
	require.NotNil(t, pc)
	assert.Zero(t, pc.MemoryLimit, "default: the runtime's own limit")

	pc, err = plan("process.memory_limit=40MiB")
	require.NoError(t, err)
	assert.EqualValues(t, 40<<20, pc.MemoryLimit)

	_, err = plan("process.memory_limit=1MiB")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "process.memory_limit")
	assert.Contains(t, err.Error(), "below 8MiB")

	_, err = plan("process.gogc=50")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "process.gogc")
}

// TestApplyProcess checks that a memory limit reaches the Go runtime and
// that 0 leaves the runtime's limit alone.
func TestApplyProcess(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	applyProcess(&processConfig{MemoryLimit: 40 << 20}, log)
	assert.EqualValues(t, 40<<20, debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(before)
	applyProcess(&processConfig{}, log)
	assert.Equal(t, before, debug.SetMemoryLimit(-1))
}
