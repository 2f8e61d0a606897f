package pebblestore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// TestOpenRefusesMIPS: on MIPS Open refuses with the reason and the fix
// instead of opening a database that dies with SIGBUS at its first
// compaction; other architectures open.
func TestOpenRefusesMIPS(t *testing.T) {
	defer func(a string) { hostArch = a }(hostArch)
	for _, arch := range []string{"mips", "mipsle", "mips64", "mips64le"} {
		hostArch = arch
		_, err := Open(NewConfig(), store.Deps{Settings: store.Settings{Dir: t.TempDir(), Flush: store.FlushAsync}})
		require.Error(t, err, arch)
		assert.True(t, errors.Is(err, ErrUnsupportedArch), arch)
		assert.Contains(t, err.Error(), "use storage.engine: commitlog")
	}
	hostArch = "arm"
	s, err := Open(NewConfig(), store.Deps{Settings: store.Settings{Dir: t.TempDir(), Flush: store.FlushAsync}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
