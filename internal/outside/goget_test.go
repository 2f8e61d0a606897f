package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestGoGetFromProxy publishes the checkout's HEAD as a module version on
// a file:// module proxy, then, in a fresh module with no replace at all,
// does what client/README.md tells a user to do: go get Quiver and build
// an application that dials quic://. It catches what a replace of Quiver
// hides: a dependency Quiver wires with a replace of its own, files the
// module zip leaves out, or a package that is not in the module.
func TestGoGetFromProxy(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(run(t, root, nil, "git", "rev-parse", "HEAD"))
	unix := strings.TrimSpace(run(t, root, nil, "git", "show", "-s", "--format=%ct", "HEAD"))
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		t.Fatalf("commit time %q: %v", unix, err)
	}
	version := "v0.0.0-" + time.Unix(sec, 0).UTC().Format("20060102150405") + "-" + rev[:12]
	mv := module.Version{Path: "github.com/quivermq/quiver", Version: version}

	proxy := t.TempDir()
	vdir := filepath.Join(proxy, "github.com", "quivermq", "quiver", "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(vdir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// The committed tree, as git archive gives it (CreateFromVCS wants a
	// .git directory, which a git worktree does not have).
	src := t.TempDir()
	run(t, root, nil, "sh", "-c", "git archive --format=tar "+rev+" | tar -x -C "+src)
	if err := modzip.CreateFromDir(zf, mv, src); err != nil {
		t.Fatalf("module zip of %s: %v", rev, err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(vdir, version+".mod"), run(t, root, nil, "git", "show", rev+":go.mod"))
	write(filepath.Join(vdir, version+".info"), `{"Version":"`+version+`","Time":"`+time.Unix(sec, 0).UTC().Format(time.RFC3339)+`"}`)
	write(filepath.Join(vdir, "list"), version+"\n")

	app := t.TempDir()
	// A user's module, as client/README.md has them start.
	write(filepath.Join(app, "go.mod"), "module example.com/fresh\n\ngo 1.26.0\n")
	write(filepath.Join(app, "main.go"), `package main

import (
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
)

func main() {
	c, err := client.New(client.WithNameServers("quic://127.0.0.1:9876"), transports.WithDialer(transports.WithInsecureQUIC()))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println("client ready")
}
`)
	upstream := strings.TrimSpace(run(t, app, nil, "go", "env", "GOPROXY"))
	env := []string{
		"GOPROXY=file://" + filepath.ToSlash(proxy) + "," + upstream,
		"GONOSUMDB=github.com/quivermq/quiver", "GOFLAGS=-mod=mod", "GOWORK=off",
	}
	run(t, app, env, "go", "get", "github.com/quivermq/quiver@"+version)
	if mod := run(t, app, nil, "cat", "go.mod"); strings.Contains(mod, "replace") {
		t.Fatalf("the fresh module has a replace:\n%s", mod)
	}
	run(t, app, env, "go", "build", "-o", filepath.Join(app, "fresh"), ".")
	if out := run(t, app, nil, filepath.Join(app, "fresh")); out != "client ready\n" {
		t.Fatalf("fresh app printed %q", out)
	}
	cleanModCache(t, app, mv)
}

// run runs name in dir with env added and returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// cleanModCache removes the test's version of Quiver from the module
// cache (read-only files, as go leaves them), so runs leave nothing
// behind.
func cleanModCache(t *testing.T, dir string, mv module.Version) {
	t.Helper()
	cache := strings.TrimSpace(run(t, dir, nil, "go", "env", "GOMODCACHE"))
	extracted := filepath.Join(cache, "github.com", "quivermq", "quiver@"+mv.Version)
	filepath.Walk(extracted, func(p string, info os.FileInfo, err error) error { //nolint:errcheck // best effort
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755) //nolint:errcheck // best effort
		}
		return nil
	})
	os.RemoveAll(extracted) //nolint:errcheck // best effort
	dl := filepath.Join(cache, "cache", "download", "github.com", "quivermq", "quiver", "@v")
	for _, ext := range []string{".info", ".mod", ".zip", ".ziphash", ".lock"} {
		os.Remove(filepath.Join(dl, mv.Version+ext)) //nolint:errcheck // best effort
	}
}
