// Package lint holds repository-wide checks that run as tests (pebble's
// internal/lint style). TestDependencyRule enforces STYLE.md's dependency
// rule on every package of the module. For the code that ships (non-test
// files):
//
//   - core/ imports nothing under plugins/, modules/, client/ or cmd/;
//   - a plugin (plugins/<kind>/<name>/...) imports, of this module, only
//     core/ and its own packages;
//   - modules/ never import plugins/;
//   - nothing imports cmd/;
//   - plugins never import go.uber.org/fx (a plugin is a value a binary
//     lists in kernel.Plugins); in core, only core/kernel imports fx.
//
// Test files follow the same rule except that they may also import
// plugins/ and internal/, to run against a real transport or store and the
// loopback helpers (core/remoting's tests use the TCP plugin; namesrv's
// tests too). They still may not import modules/ from core or plugins,
// client/ from core, or cmd/.
//
// Files are parsed directly (go/parser), so files excluded by build tags
// are checked too.
package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listedPackage is the part of `go list -json` output the checks need.
type listedPackage struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	TestGoFiles    []string
	XTestGoFiles   []string
}

// goFile is one parsed source file.
type goFile struct {
	Pkg     string // import path relative to the module ("core/filter")
	Name    string // base name ("filter.go")
	Test    bool
	Imports []string
}

// rel returns path relative to the module, or "" for other modules.
func rel(mod, path string) (string, bool) {
	if path == mod {
		return "", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// pluginRoot returns "plugins/<kind>/<name>" for a package in a plugin.
func pluginRoot(p string) (string, bool) {
	parts := strings.SplitN(p, "/", 4)
	if len(parts) < 3 || parts[0] != "plugins" {
		return "", false
	}
	return strings.Join(parts[:3], "/"), true
}

func isFx(imp string) bool { return under(imp, "go.uber.org/fx") }

// checkFiles applies the dependency rule and returns one message per
// violation, naming the file and the offending import.
func checkFiles(mod string, files []goFile) []string {
	var out []string
	bad := func(f goFile, imp, why string) {
		kind := ""
		if f.Test {
			kind = " (test)"
		}
		out = append(out, fmt.Sprintf("%s/%s%s imports %s: %s", f.Pkg, f.Name, kind, imp, why))
	}
	for _, f := range files {
		for _, imp := range f.Imports {
			if isFx(imp) && !f.Test {
				if under(f.Pkg, "plugins") {
					bad(f, imp, "a plugin does not import fx: expose NewProvider() for a binary's kernel.Plugins")
				}
				if under(f.Pkg, "core") && f.Pkg != "core/kernel" {
					bad(f, imp, "core/kernel is the only core package that imports fx")
				}
			}
			r, ours := rel(mod, imp)
			if !ours {
				continue
			}
			switch {
			case under(r, "cmd"):
				bad(f, imp, "nothing imports cmd/")
			case f.Test && (under(r, "plugins") || under(r, "internal")) && !under(f.Pkg, "plugins"):
				// Tests may run on real plugins and loopback helpers.
			case under(f.Pkg, "core"):
				for _, d := range []string{"plugins", "modules", "client"} {
					if under(r, d) {
						bad(f, imp, "core/ must not import plugins/, modules/, client/ or cmd/")
					}
				}
			case under(f.Pkg, "plugins"):
				root, _ := pluginRoot(f.Pkg)
				switch {
				case under(r, "core"), root != "" && under(r, root):
				case f.Test && (under(r, "internal") || under(r, "plugins") || under(r, "client")):
				case under(r, "plugins"):
					bad(f, imp, "a plugin must not import another plugin")
				case under(r, "modules"):
					bad(f, imp, "a plugin must not import modules/")
				default:
					bad(f, imp, "a plugin imports only core/ (and its own packages)")
				}
			case under(f.Pkg, "modules"):
				if under(r, "plugins") && !f.Test {
					bad(f, imp, "modules/ must not import plugins/ (depend on the core seam; cmd/mq wires plugins in)")
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// moduleRoot returns the module path and its directory.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	require.NoError(t, err, "go list -m: %s", stderrOf(err))
	path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	require.True(t, ok, "go list -m printed %q", out)
	return path, dir
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// listPackages runs go list on every package of the module. -e keeps
// packages with build errors (a broken package is the compiler's
// business; its imports are still checked).
func listPackages(t *testing.T, dir string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func parseFiles(t *testing.T, mod string, pkgs []listedPackage) []goFile {
	t.Helper()
	var files []goFile
	fset := token.NewFileSet()
	for _, p := range pkgs {
		r, ok := rel(mod, p.ImportPath)
		require.True(t, ok, "package %s outside module %s", p.ImportPath, mod)
		var names []string
		names = append(names, p.GoFiles...)
		names = append(names, p.CgoFiles...)
		names = append(names, p.IgnoredGoFiles...)
		names = append(names, p.TestGoFiles...)
		names = append(names, p.XTestGoFiles...)
		seen := map[string]bool{}
		for _, name := range names {
			if seen[name] || !strings.HasSuffix(name, ".go") {
				continue
			}
			seen[name] = true
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			f := goFile{Pkg: r, Name: name, Test: strings.HasSuffix(name, "_test.go")}
			for _, is := range af.Imports {
				imp, err := strconv.Unquote(is.Path.Value)
				require.NoError(t, err)
				f.Imports = append(f.Imports, imp)
			}
			files = append(files, f)
		}
	}
	return files
}

func TestDependencyRule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the whole module")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	mod, dir := moduleRoot(t)
	pkgs := listPackages(t, dir)
	files := parseFiles(t, mod, pkgs)
	require.NotEmpty(t, files)
	var sawCore, sawPlugin bool
	for _, f := range files {
		sawCore = sawCore || under(f.Pkg, "core")
		sawPlugin = sawPlugin || under(f.Pkg, "plugins")
	}
	require.True(t, sawCore && sawPlugin, "go list found no core or plugin packages; is %s the module root?", dir)
	for _, v := range checkFiles(mod, files) {
		t.Error(v)
	}
}

// TestCheckFiles shows the checks fire, with messages naming the import.
func TestCheckFiles(t *testing.T) {
	const mod = "example.com/q"
	tests := []struct {
		name string
		give []goFile
		want []string
	}{
		{
			name: "clean tree",
			give: []goFile{
				{Pkg: "core/filter", Name: "filter.go", Imports: []string{"errors", mod + "/core/message"}},
				{Pkg: "core/kernel", Name: "kernel.go", Imports: []string{"go.uber.org/fx", mod + "/core/store"}},
				{Pkg: "core/kernel", Name: "kernel_test.go", Test: true, Imports: []string{"go.uber.org/fx/fxtest"}},
				{Pkg: "core/remoting", Name: "remoting_test.go", Test: true, Imports: []string{mod + "/plugins/transport/tcp", mod + "/internal/testserver"}},
				{Pkg: "plugins/filter/tag", Name: "tag.go", Imports: []string{mod + "/core/filter", mod + "/plugins/filter/tag/internal/x"}},
				{Pkg: "plugins/filter/tag", Name: "tag_test.go", Test: true, Imports: []string{"go.uber.org/fx", mod + "/internal/testserver", mod + "/plugins/filter/tag"}},
				{Pkg: "plugins/filter/tag/internal/x", Name: "x.go", Imports: []string{mod + "/core/message"}},
				{Pkg: "modules/broker", Name: "broker.go", Imports: []string{"go.uber.org/fx", mod + "/core/store", mod + "/client"}},
				{Pkg: "modules/broker", Name: "broker_test.go", Test: true, Imports: []string{mod + "/plugins/transport/tcp"}},
				{Pkg: "cmd/mq", Name: "main.go", Imports: []string{mod + "/plugins/filter/tag", mod + "/modules/broker"}},
			},
		},
		{
			name: "core imports outward",
			give: []goFile{
				{Pkg: "core/store", Name: "store.go", Imports: []string{mod + "/plugins/storage/pebblestore", mod + "/modules/broker"}},
				{Pkg: "core/remoting", Name: "x_test.go", Test: true, Imports: []string{mod + "/client", mod + "/modules/namesrv"}},
			},
			want: []string{
				"core/remoting/x_test.go (test) imports example.com/q/client: core/ must not import plugins/, modules/, client/ or cmd/",
				"core/remoting/x_test.go (test) imports example.com/q/modules/namesrv: core/ must not import plugins/, modules/, client/ or cmd/",
				"core/store/store.go imports example.com/q/modules/broker: core/ must not import plugins/, modules/, client/ or cmd/",
				"core/store/store.go imports example.com/q/plugins/storage/pebblestore: core/ must not import plugins/, modules/, client/ or cmd/",
			},
		},
		{
			name: "plugin imports another plugin, a module, internal",
			give: []goFile{
				{Pkg: "plugins/storage/pebblestore", Name: "store.go", Imports: []string{
					mod + "/plugins/storage/commitlog", mod + "/modules/broker", mod + "/internal/testserver", mod + "/client"}},
				{Pkg: "plugins/storage/pebblestore", Name: "store_test.go", Test: true, Imports: []string{mod + "/plugins/transport/tcp", mod + "/modules/broker"}},
			},
			want: []string{
				"plugins/storage/pebblestore/store.go imports example.com/q/client: a plugin imports only core/ (and its own packages)",
				"plugins/storage/pebblestore/store.go imports example.com/q/internal/testserver: a plugin imports only core/ (and its own packages)",
				"plugins/storage/pebblestore/store.go imports example.com/q/modules/broker: a plugin must not import modules/",
				"plugins/storage/pebblestore/store.go imports example.com/q/plugins/storage/commitlog: a plugin must not import another plugin",
				"plugins/storage/pebblestore/store_test.go (test) imports example.com/q/modules/broker: a plugin must not import modules/",
			},
		},
		{
			name: "module imports a plugin",
			give: []goFile{{Pkg: "modules/namesrv", Name: "namesrv.go", Imports: []string{mod + "/plugins/transport/tcp"}}},
			want: []string{"modules/namesrv/namesrv.go imports example.com/q/plugins/transport/tcp: modules/ must not import plugins/ (depend on the core seam; cmd/mq wires plugins in)"},
		},
		{
			name: "cmd imported",
			give: []goFile{{Pkg: "modules/namesrv", Name: "namesrv.go", Imports: []string{mod + "/cmd/mq"}}},
			want: []string{"modules/namesrv/namesrv.go imports example.com/q/cmd/mq: nothing imports cmd/"},
		},
		{
			name: "fx in a plugin",
			give: []goFile{
				{Pkg: "plugins/transport/quictransport", Name: "module.go", Imports: []string{"go.uber.org/fx", mod + "/core/kernel"}},
				{Pkg: "plugins/transport/quictransport", Name: "quic.go", Imports: []string{"go.uber.org/fx"}},
				{Pkg: "plugins/transport/quictransport/internal/conn", Name: "conn.go", Imports: []string{"go.uber.org/fx/fxevent"}},
				{Pkg: "core/store", Name: "store.go", Imports: []string{"go.uber.org/fx"}},
			},
			want: []string{
				"core/store/store.go imports go.uber.org/fx: core/kernel is the only core package that imports fx",
				"plugins/transport/quictransport/internal/conn/conn.go imports go.uber.org/fx/fxevent: a plugin does not import fx: expose NewProvider() for a binary's kernel.Plugins",
				"plugins/transport/quictransport/module.go imports go.uber.org/fx: a plugin does not import fx: expose NewProvider() for a binary's kernel.Plugins",
				"plugins/transport/quictransport/quic.go imports go.uber.org/fx: a plugin does not import fx: expose NewProvider() for a binary's kernel.Plugins",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, checkFiles(mod, tt.give))
		})
	}
}
