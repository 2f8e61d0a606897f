package main

import (
	"io"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPprofLoopbackOnly: --pprof on an address that is not loopback
// fails the command before its server starts.
func TestPprofLoopbackOnly(t *testing.T) {
	ran := false
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	addPprofFlag(cmd)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--pprof", "0.0.0.0:0"})
	err := cmd.Execute()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a loopback address")
	assert.False(t, ran)
	// (The loopback case serves for the rest of the process: the flood
	// soak and bench/peers -pprof use it.)
}
