package namesrv

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []property
	}{
		{name: "java properties2String", give: "a=1\nb=2\n", want: []property{{"a", "1"}, {"b", "2"}}},
		{name: "separators", give: "a : 1\nb 2\nc=\nd\n", want: []property{{"a", "1"}, {"b", "2"}, {"c", ""}, {"d", ""}}},
		{name: "comments and blanks", give: "# x\n! y\n\n   \n  a=1", want: []property{{"a", "1"}}},
		{name: "line endings", give: "a=1\r\nb=2\rc=3", want: []property{{"a", "1"}, {"b", "2"}, {"c", "3"}}},
		{name: "value keeps inner and trailing space", give: "a=x y ", want: []property{{"a", "x y "}}},
		{name: "continuation", give: "a=1\\\n   2\n", want: []property{{"a", "12"}}},
		{name: "escapes", give: `k\=ey=\u0041\t\\`, want: []property{{"k=ey", "A\t\\"}}},
		{name: "later wins", give: "a=1\nb=2\na=3", want: []property{{"a", "3"}, {"b", "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProperties(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseProperties(`a=\u00zz`)
	assert.ErrorContains(t, err, "malformed")
}

// FuzzParseProperties: any text parses or fails cleanly, and what Java's
// properties2String writes for parsed pairs reads back the same.
func FuzzParseProperties(f *testing.F) {
	for _, seed := range []string{"a=1\nb=2\n", "k\\=v", "#c\n!d\n a : b \\\n c", `\u00zz=1`, "a\r\nb\rc", "=x", "\\"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		props, err := parseProperties(text)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range props {
			if p.key == "" || strings.ContainsAny(p.key, "=: \t\f\r\n#!\\") || strings.ContainsAny(p.value, "\r\n\\") ||
				strings.TrimLeft(p.value, " \t\f") != p.value || !utf8.ValidString(p.key+p.value) {
				return // not writable as a plain line
			}
			b.WriteString(p.key + "=" + p.value + "\n")
		}
		again, err := parseProperties(b.String())
		require.NoError(t, err)
		assert.Equal(t, props, again)
	})
}
