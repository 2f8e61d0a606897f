package acl

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the permission table in docs/SECURITY.md")

const (
	docBegin = "<!-- BEGIN permission table: generated from core/remoting/codes.go by `go test ./plugins/auth/acl -run TestSecurityDoc -rewrite`; do not edit -->"
	docEnd   = "<!-- END permission table -->"
)

// securityTable renders the permission table as docs/SECURITY.md lists it.
func securityTable() string {
	var b strings.Builder
	b.WriteString("| Code | Name | Who may send it (ACL on) |\n|---:|---|---|\n")
	for _, r := range Rules() {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", r.Code, r.Name(), strings.ReplaceAll(r.Describe(), "|", `\|`))
	}
	b.WriteString("| other | — | refused: not in the table |\n")
	return b.String()
}

// TestSecurityDoc: docs/SECURITY.md lists every row of the permission
// table as the table says it.
func TestSecurityDoc(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "SECURITY.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	require.True(t, i >= 0 && j > i, "docs/SECURITY.md lacks the permission table markers:\n%s\n...\n%s", docBegin, docEnd)
	want := doc[:i+len(docBegin)] + "\n\n" + securityTable() + "\n" + doc[j:]
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	require.Equal(t, want, doc, "docs/SECURITY.md's permission table is stale: go test ./plugins/auth/acl -run TestSecurityDoc -rewrite")
}
