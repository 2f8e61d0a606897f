package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces to '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the heading anchors of a markdown file (GitHub numbers
// repeats: x, x-1, x-2).
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		s := slug(strings.TrimLeft(line, "#"))
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// TestDocLinks: every relative link in the repository's markdown (README,
// docs/, client/, deploy/, examples/) names a file that exists and, with
// a #fragment into a markdown file, a heading of that file. Moving or
// renaming a document or a heading fails here, not in a reader's browser.
func TestDocLinks(t *testing.T) {
	root := "../.."
	var files []string
	for _, dir := range []string{"docs", "client", "deploy", "examples", "bench", "internal/outside"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return nil
		})
	}
	files = append(files, filepath.Join(root, "README.md"))
	cache := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := f
				if file != "" {
					path = filepath.Join(filepath.Dir(f), file)
				}
				rel, _ := filepath.Rel(root, f)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file", rel, i+1, target)
					continue
				}
				if frag == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if cache[path] == nil {
					cache[path] = anchors(t, path)
				}
				if !cache[path][frag] {
					t.Errorf("%s:%d: link %q: no heading #%s in %s", rel, i+1, target, frag, filepath.Base(path))
				}
			}
		}
	}
}
