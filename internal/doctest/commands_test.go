package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

var (
	codeSpan  = regexp.MustCompile("`(mq [^`]+)`")
	longFlag  = regexp.MustCompile(`^--[a-z][a-z0-9-]*`)
	commandOK = regexp.MustCompile(`^[a-z][a-zA-Z0-9-]*$`)
)

// mqInvocations returns every `mq ...` command of a guide: inline code
// spans and the lines of fenced sh blocks (runnable or not) that start
// with mq, each cut at the first shell operator.
func mqInvocations(text string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	inSh := false
	for _, line := range strings.Split(text, "\n") {
		tl := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(tl, "```sh"):
			inSh = true
		case tl == "```":
			inSh = false
		case inSh:
			for _, part := range regexp.MustCompile(`;|&&|\|\||\|`).Split(tl, -1) {
				part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "do "))
				if strings.HasPrefix(part, "mq ") || strings.HasPrefix(part, "if mq ") {
					out = append(out, strings.TrimPrefix(part, "if "))
				}
			}
		}
	}
	return out
}

// TestGuideCommandsExist: every mq subcommand and long flag the guides
// and docs/README.md name (in code spans and shell blocks, run or not)
// exists: the subcommand path is resolved through `mq ... --help`, and
// each --flag must appear in the help of the command it is given to. So
// the commands a reader copies from prose cannot rot either.
func TestGuideCommandsExist(t *testing.T) {
	bin := testserver.Binary(t)
	helpCache := map[string]string{}
	help := func(path []string) string {
		key := strings.Join(path, " ")
		if h, ok := helpCache[key]; ok {
			return h
		}
		out, err := exec.Command(bin, append(append([]string{}, path...), "--help")...).CombinedOutput()
		require.NoError(t, err, "mq %s --help: %s", key, out)
		helpCache[key] = string(out)
		return string(out)
	}
	files := append([]string{"../../docs/README.md"}, guides(t)...)
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, inv := range mqInvocations(string(raw)) {
			fields := strings.Fields(inv)[1:] // after "mq"
			var path []string
			i := 0
			for ; i < len(fields); i++ {
				w := fields[i]
				if !commandOK.MatchString(w) {
					break
				}
				h := help(path)
				if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(w) + `\s`).MatchString(subcommandSection(h)) {
					break
				}
				path = append(path, w)
			}
			if len(fields) > 0 && strings.HasPrefix(fields[0], "<") {
				i = 1 // `mq <command> --flag`: a flag every command takes
			} else if len(path) == 0 {
				assert.Failf(t, "unknown mq command", "%s: `%s`: no such mq subcommand", filepath.Base(f), inv)
				continue
			}
			h := help(path)
			for _, w := range fields[i:] {
				fl := longFlag.FindString(w)
				if fl == "" {
					continue
				}
				assert.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(fl)+`\b`), h, "%s: `%s`: mq %s has no flag %s", filepath.Base(f), inv, strings.Join(path, " "), fl)
			}
			checked++
		}
	}
	assert.Greater(t, checked, 50, "too few mq commands found: is the extraction broken?")
	t.Logf("%d mq commands checked", checked)
}

// subcommandSection is the part of a cobra help text listing
// subcommands (after "Commands:" or "Available Commands:", up to "Flags:").
func subcommandSection(h string) string {
	i := strings.Index(h, "Commands:")
	if i < 0 {
		return ""
	}
	h = h[i:]
	if j := strings.Index(h, "\nFlags:"); j >= 0 {
		h = h[:j]
	}
	return h
}

func TestMqInvocations(t *testing.T) {
	got := mqInvocations("run `mq admin topic list --system` and\n```sh\nfor i in 1; do mq admin cluster list | grep x; done\nif mq admin topic create --topic T 2>/dev/null; then exit 1; fi\necho mq not\n```\n")
	assert.Equal(t, []string{"mq admin topic list --system", "mq admin cluster list", "mq admin topic create --topic T 2>/dev/null"}, got)
}
