package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// remotingImport is the package whose commands cmd/mq must not build.
const remotingImport = "github.com/quivermq/quiver/core/remoting"

// traceImport is client/trace, whose record types share names with codes.
const traceImport = "github.com/quivermq/quiver/client/trace"

// TestAdminLayer keeps cmd/mq on one admin layer (issue 25): no file of
// the command (tests aside) imports core/remoting or names a request code,
// directly or through a package re-exporting one (retry.ResendDLQ); the
// requests are made by client/admin (and client/ for producing and
// consuming).
func TestAdminLayer(t *testing.T) {
	codes := requestCodeNames(t)
	require.Contains(t, codes, "PullMessage", "request codes read from core/remoting/codes.go")
	require.Contains(t, codes, "ResendDLQ")

	paths, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	assert.Empty(t, adminLayerProblems(fset, files, codes))
}

// TestAdminLayerCatches shows the check failing on the code cmd/mq had.
func TestAdminLayerCatches(t *testing.T) {
	const src = `package main

import (
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/retry"
)

func f(c *remoting.Client) {
	_ = remoting.NewRequest(remoting.PullMessage, nil, nil)
	_ = retry.ResendDLQ
	_ = retry.PropertyResentFromDLQ
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	assert.Equal(t, []string{
		`bad.go:4:2: imports core/remoting; make the request in client/admin`,
		`bad.go:9:26: names request code remoting.PullMessage; make the request in client/admin`,
		`bad.go:10:6: names request code retry.ResendDLQ; make the request in client/admin`,
	}, adminLayerProblems(fset, []*ast.File{f}, requestCodeNames(t)))
}

// requestCodeNames are the constants of core/remoting's request-code
// block (the const declaration documented "Request codes").
func requestCodeNames(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "core", "remoting", "codes.go"), nil, parser.ParseComments|parser.SkipObjectResolution)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || gd.Doc == nil || !strings.HasPrefix(gd.Doc.Text(), "Request codes") {
			continue
		}
		for _, s := range gd.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				out[n.Name] = true
			}
		}
	}
	return out
}

// adminLayerProblems lists, as file:line:col: text, every import of
// core/remoting and every selector pkg.Name naming a request code through
// an imported package.
func adminLayerProblems(fset *token.FileSet, files []*ast.File, codes map[string]bool) []string {
	var out []string
	for _, f := range files {
		imported := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			// client/trace names the trace record types as Java's
			// TraceType (trace.EndTransaction), not request codes.
			imported[name] = path != traceImport
			if path == remotingImport {
				out = append(out, fset.Position(imp.Pos()).String()+": imports core/remoting; make the request in client/admin")
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && imported[x.Name] && codes[sel.Sel.Name] {
				out = append(out, fset.Position(sel.Pos()).String()+": names request code "+x.Name+"."+sel.Sel.Name+"; make the request in client/admin")
			}
			return true
		})
	}
	return out
}
