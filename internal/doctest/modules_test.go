package doctest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocsListEveryModule: docs/ARCHITECTURE.md (its module table) and
// the README's layout name every package under modules/, so a new module
// cannot land without its line.
func TestDocsListEveryModule(t *testing.T) {
	entries, err := os.ReadDir("../../modules")
	require.NoError(t, err)
	for _, doc := range []string{"../../docs/ARCHITECTURE.md", "../../README.md"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, e := range entries {
			if e.IsDir() {
				assert.Contains(t, string(b), "`modules/"+e.Name()+"`", "%s does not list modules/%s", doc, e.Name())
			}
		}
	}
}
