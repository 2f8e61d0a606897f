package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGuideLinks: docs/README.md links every guide. (That every relative
// link of the docs resolves, down to its heading, is internal/lint's
// TestDocLinks.)
func TestGuideLinks(t *testing.T) {
	index, err := os.ReadFile("../../docs/README.md")
	require.NoError(t, err)
	for _, g := range guides(t) {
		assert.Contains(t, string(index), "](guide/"+filepath.Base(g)+")", "docs/README.md does not link %s", filepath.Base(g))
	}
}

var goFence = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestClientReadmeExamples: every Go block of client/README.md is, line
// for line, a function of client/example_quickstart_test.go (so the
// README shows the examples `go test ./client` runs, not a stale copy),
// and the README shows every Example function of that file.
func TestClientReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("../../client/README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("../../client/example_quickstart_test.go")
	require.NoError(t, err)
	blocks := goFence.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks, "client/README.md has no Go example")
	for _, b := range blocks {
		assert.Contains(t, string(src), b[1], "client/README.md shows code that is not in client/example_quickstart_test.go")
	}
	for _, m := range regexp.MustCompile(`(?m)^func (Example\w*)\(\)`).FindAllStringSubmatch(string(src), -1) {
		assert.Contains(t, string(readme), "func "+m[1]+"() {", "client/README.md does not show %s", m[1])
	}
}
