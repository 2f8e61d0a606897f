package crossarch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/platforms"
)

// TestTargetsAreTheEdgeTargets: every linux platform of platforms.Edge
// runs here, and every emulation entry is one of them.
func TestTargetsAreTheEdgeTargets(t *testing.T) {
	want := map[string]bool{}
	for _, p := range platforms.Edge {
		if p.GOOS == "linux" {
			want[p.Name()] = true
		}
	}
	for name := range emulation {
		assert.True(t, want[name], "emulation has %s, which platforms.Edge does not list", name)
	}
	for name := range want {
		_, ok := emulation[name]
		assert.True(t, ok, "platforms.Edge lists %s: say how it runs in emulation", name)
	}
	require.NotEmpty(t, targets)
	assert.Equal(t, "linux-amd64", targets[0].name, "the host's own build first")
}
