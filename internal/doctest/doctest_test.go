package doctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

const (
	blockTimeout = 90 * time.Second // one foreground block (or all tries of a retry block)
	readyTimeout = 60 * time.Second // a background block's listeners
	stopTimeout  = 30 * time.Second // SIGTERM to SIGKILL at the end of a guide
)

// block is one runnable fenced block of a guide.
type block struct {
	line       int // of the opening fence
	script     string
	background bool
	retry      bool
	defaults   bool
	goProgram  bool // a ```go block: a whole program, built in the module and run
	node       bool // a ```js block: a whole program run by node with the 5.x client
	// output is what a node program must print (the ```text block after
	// it marked <!-- doctest: output -->), compared after trimming space.
	output    string
	hasOutput bool
}

var marker = regexp.MustCompile(`^<!--\s*doctest(?::\s*([a-z ]*))?\s*-->$`)

// parseGuide returns the runnable blocks of a guide, in order.
func parseGuide(text string) ([]block, error) {
	var out []block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if strings.Contains(lines[i], "<!-- doctest") {
				return nil, fmt.Errorf("line %d: malformed doctest marker %q", i+1, lines[i])
			}
			continue
		}
		b := block{}
		isOutput := false
		for _, o := range strings.Fields(m[1]) {
			switch o {
			case "background":
				b.background = true
			case "retry":
				b.retry = true
			case "defaults":
				b.defaults = true
			case "go":
				b.goProgram = true
			case "node":
				b.node = true
			case "output":
				isOutput = true
			default:
				return nil, fmt.Errorf("line %d: unknown doctest option %q", i+1, o)
			}
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		fence := "```sh"
		if b.goProgram {
			if b.background || b.retry || b.defaults {
				return nil, fmt.Errorf("line %d: the go option takes no other", i+1)
			}
			fence = "```go"
		}
		if b.node {
			if b.background || b.retry || b.defaults || b.goProgram {
				return nil, fmt.Errorf("line %d: the node option takes no other", i+1)
			}
			fence = "```js"
		}
		if isOutput {
			if len(strings.Fields(m[1])) != 1 {
				return nil, fmt.Errorf("line %d: the output option takes no other", i+1)
			}
			if len(out) == 0 || !out[len(out)-1].node || out[len(out)-1].hasOutput {
				return nil, fmt.Errorf("line %d: an output block follows a node block (one each)", i+1)
			}
			fence = "```text"
		}
		if j == len(lines) || strings.TrimSpace(lines[j]) != fence {
			return nil, fmt.Errorf("line %d: this doctest marker must precede a %s block", i+1, fence)
		}
		b.line = j + 1
		// A fence indented in a list item: its indentation is not part
		// of the lines (here-document terminators must start the line).
		indent := lines[j][:len(lines[j])-len(strings.TrimLeft(lines[j], " "))]
		var body []string
		k := j + 1
		for ; k < len(lines) && strings.TrimSpace(lines[k]) != "```"; k++ {
			body = append(body, strings.TrimPrefix(lines[k], indent))
		}
		if k == len(lines) {
			return nil, fmt.Errorf("line %d: unterminated ```sh block", j+1)
		}
		b.script = strings.Join(body, "\n") + "\n"
		if strings.TrimSpace(b.script) == "" {
			return nil, fmt.Errorf("line %d: empty runnable block", j+1)
		}
		if isOutput {
			out[len(out)-1].output, out[len(out)-1].hasOutput = strings.TrimSpace(b.script), true
			i = k
			continue
		}
		out = append(out, b)
		i = k
	}
	return out, nil
}

func TestParseGuide(t *testing.T) {
	blocks, err := parseGuide("text\n<!-- doctest -->\n```sh\necho hi\n```\n\n<!-- doctest: background defaults -->\n\n```sh\nmq dev\n```\n```sh\nnot run\n```\n")
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	assert.Equal(t, block{line: 3, script: "echo hi\n"}, blocks[0])
	assert.Equal(t, block{line: 9, script: "mq dev\n", background: true, defaults: true}, blocks[1])
	blocks, err = parseGuide("1. step\n\n   <!-- doctest -->\n   ```sh\n   cat > f <<'EOF'\n   a: 1\n   EOF\n   ```\n")
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	assert.Equal(t, "cat > f <<'EOF'\na: 1\nEOF\n", blocks[0].script, "a list item's indentation is removed")
	blocks, err = parseGuide("<!-- doctest: node -->\n```js\nconsole.log(1)\n```\n\nIt prints:\n\n<!-- doctest: output -->\n```text\n1\n```\n")
	require.NoError(t, err)
	require.Len(t, blocks, 1, "the output block belongs to the node block")
	assert.Equal(t, block{line: 2, script: "console.log(1)\n", node: true, output: "1", hasOutput: true}, blocks[0])
	for _, bad := range []string{
		"<!-- doctest -->\ntext\n```sh\nx\n```\n",
		"<!-- doctest -->\n```go\nx\n```\n",
		"<!-- doctest: go -->\n```sh\nx\n```\n",
		"<!-- doctest: go retry -->\n```go\nx\n```\n",
		"<!-- doctest: sometimes -->\n```sh\nx\n```\n",
		"<!-- doctest -->\n```sh\nx\n",
		"<!-- doctest-->x\n```sh\nx\n```\n",
		"<!-- doctest: node -->\n```sh\nx\n```\n",
		"<!-- doctest: node background -->\n```js\nx\n```\n",
		"<!-- doctest -->\n```sh\nx\n```\n<!-- doctest: output -->\n```text\nx\n```\n",
		"<!-- doctest: node -->\n```js\nx\n```\n<!-- doctest: output -->\n```sh\nx\n```\n",
		"<!-- doctest: node -->\n```js\nx\n```\n<!-- doctest: output -->\n```text\nx\n```\n<!-- doctest: output -->\n```text\ny\n```\n",
	} {
		_, err := parseGuide(bad)
		assert.Error(t, err, "%q", bad)
	}
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:(\d{2,5})\b`)

// ports maps each port a guide's runnable blocks use on 127.0.0.1 to a
// free one.
func ports(t *testing.T, blocks []block) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, def := range []string{"9876", "10911", "9090", "8080"} {
		out[def] = ""
	}
	for _, b := range blocks {
		for _, m := range loopbackAddr.FindAllStringSubmatch(b.script, -1) {
			out[m[1]] = ""
		}
	}
	taken := map[int]bool{}
	for p := range out {
		for {
			f := testserver.FreePort(t)
			if !taken[f] {
				taken[f] = true
				out[p] = strconv.Itoa(f)
				break
			}
		}
	}
	return out
}

func rewrite(s string, ports map[string]string) string {
	return loopbackAddr.ReplaceAllStringFunc(s, func(a string) string {
		return "127.0.0.1:" + ports[strings.TrimPrefix(a, "127.0.0.1:")]
	})
}

type bgProc struct {
	cmdline string
	cmd     *exec.Cmd
	out     *testserver.Output
	done    chan struct{}
}

// guideRun is the state of one guide's run.
type guideRun struct {
	t     *testing.T
	dir   string
	root  string // module root
	env   []string
	ports map[string]string
	bg    []*bgProc
}

func (g *guideRun) blockEnv(b block) []string {
	env := append([]string{}, g.env...)
	if b.defaults {
		env = append(env,
			"QUIVER_NAMESRV__LISTEN=127.0.0.1:"+g.ports["9876"],
			"QUIVER_BROKER__LISTEN=127.0.0.1:"+g.ports["10911"],
			"QUIVER_METRICS__LISTEN=127.0.0.1:"+g.ports["9090"],
			"QUIVER_CONSOLE__LISTEN=127.0.0.1:"+g.ports["8080"],
		)
	}
	return env
}

func (g *guideRun) foreground(name string, b block, script string) {
	t := g.t
	deadline := time.Now().Add(blockTimeout)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = g.dir, g.blockEnv(b)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			t.Logf("%s:%d ok (attempt %d):\n%s", name, b.line, attempt, tailOf(string(out), 1500))
			return
		}
		if !b.retry || time.Now().After(deadline) {
			t.Fatalf("%s:%d: %v (attempt %d)\n--- block\n%s--- output\n%s%s", name, b.line, err, attempt, script, tailOf(string(out), 4000), g.bgLogs())
		}
		g.checkBackground(name)
		time.Sleep(250 * time.Millisecond) // poll interval of a retry block, not synchronisation
	}
}

func (g *guideRun) background(name string, b block, script string) {
	t := g.t
	sc := bufio.NewScanner(strings.NewReader(script))
	var addrs []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := &bgProc{cmdline: line, out: &testserver.Output{}, done: make(chan struct{})}
		p.cmd = exec.Command("bash", "-c", "exec "+line)
		p.cmd.Dir, p.cmd.Env = g.dir, g.blockEnv(b)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, p.cmd.Start(), "%s:%d: %s", name, b.line, line)
		go func() { _ = p.cmd.Wait(); close(p.done) }()
		g.bg = append(g.bg, p)
		addrs = append(addrs, loopbackAddr.FindAllString(line, -1)...)
	}
	if b.defaults {
		addrs = append(addrs, "127.0.0.1:"+g.ports["9876"], "127.0.0.1:"+g.ports["10911"])
	}
	deadline := time.Now().Add(readyTimeout)
	for _, a := range addrs {
		for {
			g.checkBackground(name)
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s:%d: %s not listening after %s%s", name, b.line, a, readyTimeout, g.bgLogs())
			}
			time.Sleep(100 * time.Millisecond) // poll interval
		}
	}
}

// goProgram builds and runs a guide's Go program inside the module (so
// it uses the module's dependencies: the official client, Quiver's
// client) through a build overlay, without writing into the tree.
func (g *guideRun) goProgram(name string, b block, src string) {
	t := g.t
	tmp := t.TempDir()
	file := filepath.Join(tmp, "main.go")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	pkgDir := filepath.Join(g.root, "internal", "doctest", fmt.Sprintf("guide_program_%d", b.line))
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkgDir, "main.go"): file}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "overlay.json"), ov, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 3*blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "-overlay", filepath.Join(tmp, "overlay.json"), "./"+filepath.ToSlash(strings.TrimPrefix(pkgDir, g.root+string(filepath.Separator))))
	cmd.Dir = g.root
	cmd.Env = append(os.Environ(), "QUIVER_NAMESRV=127.0.0.1:"+g.ports["9876"])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d: go program: %v\n--- output\n%s%s", name, b.line, err, tailOf(string(out), 4000), g.bgLogs())
	}
	t.Logf("%s:%d ok:\n%s", name, b.line, tailOf(string(out), 1500))
}

// nodeProgram runs a guide's Node.js program with the official 5.x client
// (rocketmq-client-nodejs, installed in QUIVER_NODE_CLIENT_DIR as .ci/run
// installs it) and compares what it prints with the guide's output block.
// Without node or the client the block is skipped, and logged.
func (g *guideRun) nodeProgram(name string, b block, src string) {
	t := g.t
	if _, err := exec.LookPath("node"); err != nil {
		t.Logf("%s:%d skipped: node is not installed", name, b.line)
		return
	}
	dir := os.Getenv("QUIVER_NODE_CLIENT_DIR")
	if dir == "" {
		t.Logf("%s:%d skipped: QUIVER_NODE_CLIENT_DIR (a directory with node_modules/rocketmq-client-nodejs) is not set", name, b.line)
		return
	}
	_, err := os.Stat(filepath.Join(dir, "node_modules", "rocketmq-client-nodejs"))
	require.NoError(t, err, "QUIVER_NODE_CLIENT_DIR has no node_modules/rocketmq-client-nodejs")
	file := filepath.Join(t.TempDir(), fmt.Sprintf("guide_%d.js", b.line))
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", file)
	cmd.Dir = g.dir
	cmd.Env = append(g.blockEnv(b), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr testserver.Output
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s:%d: node program: %v\n--- stdout\n%s--- stderr\n%s%s", name, b.line, err, tailOf(string(out), 3000), tailOf(stderr.String(), 3000), g.bgLogs())
	}
	if b.hasOutput && strings.TrimSpace(string(out)) != b.output {
		t.Fatalf("%s:%d: the node program printed\n%s\nwhere the guide shows\n%s", name, b.line, out, b.output)
	}
	t.Logf("%s:%d ok:\n%s", name, b.line, tailOf(string(out), 1500))
}

// checkBackground fails the guide when a background process has exited.
func (g *guideRun) checkBackground(name string) {
	for _, p := range g.bg {
		select {
		case <-p.done:
			g.t.Fatalf("%s: background command %q exited: %v%s", name, p.cmdline, p.cmd.ProcessState, g.bgLogs())
		default:
		}
	}
}

func (g *guideRun) bgLogs() string {
	var sb strings.Builder
	for _, p := range g.bg {
		fmt.Fprintf(&sb, "\n--- background %q\n%s", p.cmdline, tailOf(p.out.String(), 3000))
	}
	return sb.String()
}

// stop sends SIGTERM to every background process group and waits; a
// process still running after stopTimeout is killed and reported.
func (g *guideRun) stop() {
	for _, p := range g.bg {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	for _, p := range g.bg {
		select {
		case <-p.done:
		case <-timer.C:
			for _, q := range g.bg {
				_ = syscall.Kill(-q.cmd.Process.Pid, syscall.SIGKILL)
			}
			<-p.done
			g.t.Errorf("background command %q did not stop on SIGTERM within %s", p.cmdline, stopTimeout)
		}
	}
	for _, p := range g.bg {
		<-p.done
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// guides are the files whose runnable blocks run: every docs/guide/*.md
// (docs/guide/admin.md included when it exists).
func guides(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/guide/*.md")
	require.NoError(t, err)
	sort.Strings(files)
	return files
}

// TestGuides runs every runnable block of every guide against a fresh
// mq: each guide in its own directory, on its own free ports.
func TestGuides(t *testing.T) {
	files := guides(t)
	require.NotEmpty(t, files)
	bin := testserver.Binary(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	ran := map[string]int{}
	for _, f := range files {
		name := filepath.Base(f)
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		blocks, err := parseGuide(string(raw))
		require.NoError(t, err, name)
		ran[name] = len(blocks)
		if len(blocks) == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(name, ".md"), func(t *testing.T) {
			for _, tool := range []string{"bash", "curl", "grep", "sed", "awk"} {
				if _, err := exec.LookPath(tool); err != nil && (tool == "bash" || strings.Contains(string(raw), tool+" ")) {
					t.Skipf("%s needs %s, which is not installed", name, tool)
				}
			}
			dir := t.TempDir()
			p := ports(t, blocks)
			env := []string{"HOME=" + dir, "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
				"QUIVER_NAMESRV=127.0.0.1:" + p["9876"], "LANG=C"}
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "HOME" || k == "LANG" || strings.HasPrefix(k, "QUIVER_") {
					continue
				}
				env = append(env, kv)
			}
			g := &guideRun{t: t, dir: dir, root: root, env: env, ports: p}
			t.Cleanup(g.stop)
			for _, b := range blocks {
				script := rewrite(b.script, p)
				switch {
				case b.goProgram:
					g.goProgram(name, b, script)
				case b.node:
					g.nodeProgram(name, b, script)
				case b.background:
					g.background(name, b, script)
				default:
					g.foreground(name, b, script)
				}
			}
			g.checkBackground(name)
		})
	}
	for _, must := range []string{"getting-started.md", "cluster.md", "security.md", "operations.md", "edge.md", "migrating.md", "connecting-apps.md"} {
		assert.Greater(t, ran[must], 0, "docs/guide/%s has no runnable (doctest) block", must)
	}
}
