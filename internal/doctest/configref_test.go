package doctest

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/guide/configuration.md from config.example.yaml")

const (
	configExample = "../../config.example.yaml"
	configRef     = "../../docs/guide/configuration.md"
)

// configKey is one key of config.example.yaml.
type configKey struct {
	path  string // broker.quota.topics
	value string // the default as written ("" for a section)
	doc   []string
	leaf  bool
}

// configSection is a top-level key with the comment lines above it.
type configSection struct {
	name  string
	intro []string
	keys  []configKey
}

// splitComment cuts "value  # comment" at the first '#' outside quotes
// that follows a space.
func splitComment(s string) (string, string) {
	inQuote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '"' || c == '\'':
			inQuote = c
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		}
	}
	return strings.TrimSpace(s), ""
}

// parseConfigExample reads config.example.yaml's keys, defaults and
// comments. It relies on the file's layout: two-space indentation, one
// key per line, a key's comment on its line (continued on following
// comment-only lines indented deeper than the key), a section's
// introduction on comment lines right above it.
func parseConfigExample(t *testing.T) (header []string, sections []*configSection) {
	t.Helper()
	f, err := os.Open(configExample)
	require.NoError(t, err)
	defer f.Close()
	var (
		pending []string // comment lines not yet attached
		stack   []string // key path by indentation level
		cur     *configSection
		last    *configKey
		lastInd int
		inHead  = true
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		raw := sc.Text()
		trimmed := strings.TrimSpace(raw)
		ind := len(raw) - len(strings.TrimLeft(raw, " "))
		switch {
		case trimmed == "":
			if inHead {
				header, inHead = pending, false
			}
			pending = nil
			last = nil
			continue
		case strings.HasPrefix(trimmed, "#"):
			text := strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
			if last != nil && ind > lastInd {
				last.doc = append(last.doc, text)
				continue
			}
			pending = append(pending, text)
			continue
		}
		inHead = false
		key, rest, ok := strings.Cut(trimmed, ":")
		require.True(t, ok, "config.example.yaml: %q is no key", raw)
		require.Zero(t, ind%2, "config.example.yaml: %q: indentation", raw)
		level := ind / 2
		stack = append(stack[:level], key)
		value, comment := splitComment(rest)
		if level == 0 {
			cur = &configSection{name: key, intro: pending}
			sections = append(sections, cur)
		}
		require.NotNil(t, cur)
		k := configKey{path: strings.Join(stack, "."), value: value, leaf: value != ""}
		if comment != "" {
			k.doc = append(k.doc, comment)
		}
		if level > 0 && len(pending) > 0 {
			k.doc = append(pending, k.doc...)
		}
		pending = nil
		cur.keys = append(cur.keys, k)
		last, lastInd = &cur.keys[len(cur.keys)-1], ind
	}
	require.NoError(t, sc.Err())
	return header, sections
}

func envName(path string) string {
	return "QUIVER_" + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// renderConfigReference writes the configuration guide.
func renderConfigReference(header []string, sections []*configSection) string {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("<!-- Generated from config.example.yaml by `go test ./internal/doctest -run TestConfigurationReference -update`. Do not edit: edit config.example.yaml and regenerate. -->\n\n")
	b.WriteString("Every key Quiver reads, with its default and meaning, as documented in\n")
	b.WriteString("[`config.example.yaml`](../../config.example.yaml) (a file you can start\n")
	b.WriteString("from: it sets every key to its default).\n\n")
	for _, h := range header {
		if h == "" || strings.HasPrefix(h, "Quiver configuration") {
			continue
		}
		b.WriteString("> " + h + "\n")
	}
	b.WriteString("\nEvery key can also be set by an environment variable: `QUIVER_`, then the\n")
	b.WriteString("key in capitals with `__` between levels (`broker.listen` is\n")
	b.WriteString("`QUIVER_BROKER__LISTEN`), or by `--set key=value`. Sizes take `KiB`, `MiB`,\n")
	b.WriteString("`GiB`; durations `ms`, `s`, `m`, `h`. A value that starts with `[` or `{` is a\n")
	b.WriteString("YAML flow list or map, as in the file (`--set 'broker.namesrv=[10.0.0.1:9876,\n")
	b.WriteString("10.0.0.2:9876]'`, `QUIVER_BROKER__QUOTA__TOPICS='{orders: {messages_per_sec:\n")
	b.WriteString("100}}'`; quote them for the shell), and one that does not parse is refused\n")
	b.WriteString("naming the key; a list key also takes a comma- or semicolon-separated\n")
	b.WriteString("string (`10.0.0.1:9876,10.0.0.2:9876`).\n")
	b.WriteString("Quote a bracketed IPv6 address inside a list (`['[::1]:9876']`); alone,\n")
	b.WriteString("`[::1]:9876` stays a string. Addresses (`broker.namesrv`, `ha.master_addr`,\n")
	b.WriteString("and `broker`, `namesrv`, `metrics`, `console` `.listen`) must be host:port\n")
	b.WriteString("with the port in range, checked by `--check-config` and at start.\n\n")
	b.WriteString("Sections:")
	for i, s := range sections {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " [`%s`](#%s)", s.name, s.name)
	}
	b.WriteString(".\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.name)
		if len(s.intro) > 0 {
			b.WriteString(strings.Join(s.intro, "\n") + "\n\n")
		}
		b.WriteString("| key | default | meaning |\n|---|---|---|\n")
		for _, k := range s.keys {
			def := "—"
			if k.leaf {
				def = "`" + cell(k.value) + "`"
			}
			doc := cell(strings.Join(k.doc, " "))
			if !k.leaf && k.path != s.name {
				doc = "*(section)* " + doc
			}
			if k.path == s.name && !k.leaf && doc == "" {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.path, def, strings.TrimSpace(doc))
		}
	}
	return b.String()
}

// TestConfigurationReference: docs/guide/configuration.md is generated
// from config.example.yaml (go test -run TestConfigurationReference
// -update rewrites it) and lists every key of it.
func TestConfigurationReference(t *testing.T) {
	header, sections := parseConfigExample(t)
	require.NotEmpty(t, sections)
	names := map[string]bool{}
	for _, s := range sections {
		names[s.name] = true
	}
	for _, want := range []string{"namesrv", "broker", "storage", "ha", "auth", "metrics", "console", "transport"} {
		assert.True(t, names[want], "config.example.yaml has no %s section", want)
	}
	got := renderConfigReference(header, sections)
	if *update {
		require.NoError(t, os.WriteFile(configRef, []byte(got), 0o644))
		return
	}
	for _, s := range sections {
		for _, k := range s.keys {
			if k.leaf && !strings.Contains(got, "| `"+k.path+"` |") {
				t.Errorf("key %s (%s) missing from the rendering", k.path, envName(k.path))
			}
		}
	}
	want, err := os.ReadFile(configRef)
	require.NoError(t, err, "generate it: go test ./internal/doctest -run TestConfigurationReference -update")
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("docs/guide/configuration.md is stale after a change of config.example.yaml: regenerate it with\n\tgo test ./internal/doctest -run TestConfigurationReference -update\nfirst difference, line %d:\n\twant %s\n\thave %s", i+1, line(gl), line(wl))
	}
}
