package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// shellWords splits one command line as sh would for our purpose: quotes
// group, and it stops at a comment, a pipe, a redirection or a list
// operator. A placeholder (<topic>, $VAR) becomes "1", which every flag
// type but a duration takes.
func shellWords(line string) []string {
	line = placeholder.ReplaceAllString(line, "1")
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	flush := func() {
		if in {
			words = append(words, cur.String())
			cur.Reset()
			in = false
		}
	}
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '>' && in && isDigits(cur.String()):
			return words // 2>/dev/null: the 2 is the redirection's
		case r == '#' && !in, r == '|', r == ';', r == '>', r == '<', r == '&':
			flush()
			return words
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	flush()
	return words
}

// guideCommands returns every mq command line of the markdown in dir:
// inline code spans and lines (or parts of lines after && ; | do then) of
// fenced blocks, with the file and line they are on.
func guideCommands(t *testing.T, files []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fence, shell := false, false
		for i, line := range strings.Split(string(b), "\n") {
			where := filepath.Base(f) + ":" + itoaTest(i+1)
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "```") {
				fence = !fence
				lang := strings.TrimPrefix(l, "```")
				shell = fence && (lang == "" || lang == "sh" || lang == "bash" || lang == "console" || lang == "shell")
				continue
			}
			if fence && !shell {
				continue // YAML, Go, JSON: their comments may mention mq
			}
			if !fence {
				// Code spans are the odd pieces between backticks.
				for j, span := range strings.Split(line, "`") {
					if j%2 == 1 && strings.HasPrefix(span, "mq ") {
						out[span] = append(out[span], where)
					}
				}
				continue
			}
			for _, part := range regexp.MustCompile(`&&|;|\|\||\$\(|\bdo\b|\bthen\b|^\s*\$`).Split(line, -1) {
				part = strings.TrimSpace(part)
				if strings.HasPrefix(part, "mq ") {
					out[part] = append(out[part], where)
				}
			}
		}
	}
	return out
}

// placeholder matches what a reader fills in: <topic>, $VAR, "$v".
var placeholder = regexp.MustCompile(`<[A-Za-z][^<>]*>|\$\{?[A-Za-z_][A-Za-z_0-9]*\}?`)

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func itoaTest(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestGuideCommandsParse: every mq command line the user guides, the
// READMEs and docs/README.md show — run by the doctests or not — names
// commands that exist and flags (short and long) those commands take, with
// the positional arguments they accept, so a guide cannot drift from the
// binary. It replaced internal/doctest's TestGuideCommandsExist, which read
// `mq ... --help` and saw long flags only.
// Values are not checked (they may be placeholders); run the doctests
// for behaviour.
func TestGuideCommandsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/guide/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no guides: %v", err)
	}
	files = append(files, "../../README.md", "../../client/README.md", "../../docs/README.md", "../../docs/figures.md")
	cmds := guideCommands(t, files)
	if len(cmds) < 50 {
		t.Fatalf("found only %d mq command lines in the guides", len(cmds))
	}
	for line, where := range cmds {
		if wrongOnPurpose[line] || regexp.MustCompile(`#\s*exit [1-9]`).MatchString(line) {
			continue // shown to fail: the doctests check that they do
		}
		words := shellWords(line)
		if len(words) < 2 {
			continue
		}
		if err := parseOnly(words[1:]); err != nil {
			t.Errorf("%s: %q: %v", strings.Join(where, ", "), line, err)
		}
	}
}

// wrongOnPurpose are the guides' examples of usage errors, in prose.
var wrongOnPurpose = map[string]bool{"mq admin topic lst": true, "mq admin printMesg": true}

// parseOnly resolves args to an mq command and parses its flags without
// running it.
func parseOnly(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		// `mq console --auth` in prose names a flag; it is not a line to run.
		if last := rest[len(rest)-1]; strings.HasPrefix(last, "-") && strings.Contains(err.Error(), "needs an argument") {
			return nil
		}
		return err
	}
	pos := cmd.Flags().Args()
	check := func(pos []string) error {
		if cmd.HasSubCommands() && len(pos) > 0 {
			return &unknownCmd{cmd, pos[0]}
		}
		if cmd.Args != nil {
			return cmd.Args(cmd, pos)
		}
		return nil
	}
	err = check(pos)
	// A placeholder standing alone may be a flag ($o for --order).
	if i := slices.Index(pos, "1"); err != nil && i >= 0 {
		err = check(slices.Delete(slices.Clone(pos), i, i+1))
	}
	return err
}

type unknownCmd struct {
	cmd  *cobra.Command
	name string
}

func (e *unknownCmd) Error() string {
	return "unknown command " + e.name + " for " + e.cmd.CommandPath()
}
