package tag_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/plugins/filter/tag"
)

func tags(v string) message.Properties { return message.Properties{message.PropertyTags: v} }

func TestConformance(t *testing.T) {
	cases := []filtertest.Case{
		// "*" and blank subscribe to everything.
		{Name: "star/tagged", Expr: "*", Props: tags("TagA"), Want: true},
		{Name: "star/untagged", Expr: "*", Props: message.Properties{}, Want: true},
		{Name: "star/nil props", Expr: "*", Props: nil, Want: true},
		{Name: "star/spaced", Expr: "  *  ", Props: tags("x"), Want: true},
		{Name: "empty", Expr: "", Props: tags("TagA"), Want: true},
		{Name: "blank", Expr: " \t ", Props: message.Properties{}, Want: true},

		// One tag: exact, case-sensitive comparison.
		{Name: "single/equal", Expr: "TagA", Props: tags("TagA"), Want: true},
		{Name: "single/other", Expr: "TagA", Props: tags("TagB"), Want: false},
		{Name: "single/case", Expr: "TagA", Props: tags("taga"), Want: false},
		{Name: "single/prefix", Expr: "TagA", Props: tags("Tag"), Want: false},
		{Name: "single/longer", Expr: "TagA", Props: tags("TagAB"), Want: false},
		{Name: "single/untagged", Expr: "TagA", Props: message.Properties{}, Want: false},
		{Name: "single/nil props", Expr: "TagA", Props: nil, Want: false},
		{Name: "single/empty tag", Expr: "TagA", Props: tags(""), Want: false},
		{Name: "single/expr trimmed", Expr: "  TagA  ", Props: tags("TagA"), Want: true},
		{Name: "single/message not trimmed", Expr: "TagA", Props: tags(" TagA "), Want: false},
		{Name: "single/java trim of control chars", Expr: "\tTagA\r\n", Props: tags("TagA"), Want: true},
		{Name: "single/nbsp is not trimmed", Expr: "\u00a0TagA", Props: tags("TagA"), Want: false},
		{Name: "single/nbsp tag", Expr: "\u00a0TagA", Props: tags("\u00a0TagA"), Want: true},
		{Name: "single/other property", Expr: "TagA", Props: message.Properties{"a": "TagA"}, Want: false},
		{Name: "single/star is literal in message", Expr: "TagA", Props: tags("*"), Want: false},

		// Several tags.
		{Name: "or/first", Expr: "TagA || TagB", Props: tags("TagA"), Want: true},
		{Name: "or/second", Expr: "TagA || TagB", Props: tags("TagB"), Want: true},
		{Name: "or/neither", Expr: "TagA || TagB", Props: tags("TagC"), Want: false},
		{Name: "or/no spaces", Expr: "TagA||TagB", Props: tags("TagB"), Want: true},
		{Name: "or/empties dropped", Expr: "||TagA|| ||TagB||", Props: tags("TagB"), Want: true},
		{Name: "or/duplicates", Expr: "TagA || TagA", Props: tags("TagA"), Want: true},
		{Name: "or/single pipe is part of a tag", Expr: "TagA|TagB", Props: tags("TagA"), Want: false},
		{Name: "or/single pipe tag", Expr: "TagA|TagB", Props: tags("TagA|TagB"), Want: true},
		{Name: "or/many", Expr: "t0||t1||t2||t3||t4||t5||t6||t7||t8||t9||t10||t11", Props: tags("t10"), Want: true},
		{Name: "or/many miss", Expr: "t0||t1||t2||t3||t4||t5||t6||t7||t8||t9||t10||t11", Props: tags("t12"), Want: false},

		// Non-ASCII tags (Java and the Go client hash these differently).
		{Name: "unicode/han", Expr: "标签 || TagB", Props: tags("标签"), Want: true},
		{Name: "unicode/emoji", Expr: "😀", Props: tags("😀"), Want: true},
		{Name: "unicode/other", Expr: "😀", Props: tags("😁"), Want: false},

		// Multi-tag messages match when any of their tags is subscribed.
		{Name: "multi/first", Expr: "TagA", Props: tags("TagA||TagB"), Want: true},
		{Name: "multi/second", Expr: "TagB", Props: tags("TagA||TagB"), Want: true},
		{Name: "multi/spaced", Expr: "TagB", Props: tags("TagA || TagB"), Want: true},
		{Name: "multi/none", Expr: "TagC || TagD", Props: tags("TagA||TagB"), Want: false},
		{Name: "multi/empties", Expr: "TagA", Props: tags("||TagA||"), Want: true},
		{Name: "multi/only separators", Expr: "TagA", Props: tags("||"), Want: false},
		{Name: "multi/whole string is not a tag", Expr: "TagA||TagB", Props: tags("TagA||TagB"), Want: true},

		// Expressions with no tag, or "*" among tags, are rejected.
		{Name: "err/separators only", Expr: "||", WantErr: true},
		{Name: "err/separators and spaces", Expr: " || || ", WantErr: true},
		{Name: "err/star with tag", Expr: "TagA || *", WantErr: true},
		{Name: "err/star first", Expr: "* || TagA", WantErr: true},
		{Name: "err/star twice", Expr: "*||*", WantErr: true},
	}
	filtertest.Run(t, tag.NewProvider(), cases)
}

func TestSyntaxErrorPosition(t *testing.T) {
	tests := []struct {
		give    string
		wantPos int
	}{
		{give: "||", wantPos: 0},
		{give: "TagA || *", wantPos: 8},
		{give: "  * || TagA", wantPos: 2},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := tag.Compile(tt.give)
			var se *filter.SyntaxError
			require.True(t, errors.As(err, &se), "error %v", err)
			assert.Equal(t, tt.wantPos, se.Pos)
			assert.Equal(t, filter.TypeTag, se.Type)
			assert.Contains(t, err.Error(), `TAG expression "`+tt.give+`"`)
		})
	}
}

func TestParseTags(t *testing.T) {
	tests := []struct {
		give string
		want []string
	}{
		{give: "*", want: nil},
		{give: "", want: nil},
		{give: "   ", want: nil},
		{give: "||", want: nil},
		{give: "TagA", want: []string{"TagA"}},
		{give: "TagB || TagA", want: []string{"TagA", "TagB"}},
		{give: " TagA ||TagA|| ", want: []string{"TagA"}},
		{give: "a|b || c", want: []string{"a|b", "c"}},
		{give: "TagA || *", want: []string{"*", "TagA"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, tag.ParseTags(tt.give))
		})
	}
}

func TestTagsCode(t *testing.T) {
	tests := []struct {
		give string
		want int64
	}{
		// Values from the captured heartbeat (codeSet "2598919","2598920").
		{give: "TagA", want: 2598919},
		{give: "TagB", want: 2598920},
		{give: "", want: 0},
		// Java: "标签".hashCode() == 26631*31 + 31614.
		{give: "标签", want: 26631*31 + 31614},
		// Java hashes the surrogate pair of U+1F600 (0xD83D 0xDE00).
		{give: "😀", want: 0xD83D*31 + 0xDE00},
		// int32 wrap-around: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
		{give: "polygenelubricants", want: -2147483648},
		{give: "TagA||TagB", want: tag.MultiTagsCode},
		{give: " || ", want: tag.MultiTagsCode},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, tag.TagsCode(tt.give))
			if !strings.Contains(tt.give, "||") {
				assert.Equal(t, message.TagsHashCode(tt.give), tag.TagsCode(tt.give), "single tags store what a Java broker stores")
			}
		})
	}
	multi := tag.MultiTagsCode
	assert.NotEqual(t, multi, int64(int32(multi)), "MultiTagsCode must not be a possible hash")
}

func TestMatchTagsCode(t *testing.T) {
	m, err := tag.Compile("TagA || 标签")
	require.NoError(t, err)
	tests := []struct {
		name string
		give int64
		want bool
	}{
		{name: "TagA", give: 2598919, want: true},
		{name: "Java hash of 标签", give: 26631*31 + 31614, want: true},
		// The Go client's UTF-8 hash of 标签 (in its codeSet) is not trusted.
		{name: "Go client hash of 标签", give: goClientHash("标签"), want: false},
		{name: "TagB", give: 2598920, want: false},
		{name: "no tag", give: 0, want: false},
		{name: "multi-tag message", give: tag.MultiTagsCode, want: true},
		{name: "above int32", give: 1 << 40, want: true},
		{name: "below int32", give: -1 << 40, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, m.MatchTagsCode(tt.give))
		})
	}
	require.NotEqual(t, goClientHash("标签"), message.TagsHashCode("标签"))

	all, err := tag.Compile("*")
	require.NoError(t, err)
	assert.True(t, all.MatchesAll())
	assert.True(t, all.MatchTagsCode(12345))
	assert.Nil(t, all.Tags())
	assert.False(t, m.MatchesAll())
	assert.Equal(t, []string{"TagA", "标签"}, m.Tags())
}

// goClientHash is rocketmq-client-go's utils.HashString: Java's formula
// over UTF-8 bytes.
func goClientHash(s string) int64 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(s[i])
	}
	return int64(h)
}

// TestLargeSet covers the binary-search path (more than a few tags).
func TestLargeSet(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		if i > 0 {
			b.WriteString(" || ")
		}
		b.WriteString("tag")
		b.WriteString(strings.Repeat("x", i))
	}
	m, err := tag.Compile(b.String())
	require.NoError(t, err)
	for i := range 100 {
		tg := "tag" + strings.Repeat("x", i)
		assert.True(t, m.Match(tags(tg)), tg)
		assert.True(t, m.MatchTagsCode(tag.TagsCode(tg)), tg)
	}
	assert.False(t, m.Match(tags("tagy")))
	assert.False(t, m.MatchTagsCode(tag.TagsCode("tagy")))
}

func TestProvider(t *testing.T) {
	p := tag.NewProvider()
	assert.Equal(t, "tag", p.ID())
	assert.Equal(t, filter.TypeTag, p.Type())
	assert.IsType(t, &tag.Config{}, p.NewConfig())
	_, err := p.New(nil)
	assert.NoError(t, err)
	_, err = p.New(struct{}{})
	assert.ErrorContains(t, err, "filter.tag: config is struct {}")

	c, err := p.New(p.NewConfig())
	require.NoError(t, err)
	m, err := c.Compile("||")
	assert.Error(t, err)
	assert.Nil(t, m, "a failed Compile must return a nil interface, not a typed nil")
}

func TestMatchAllocs(t *testing.T) {
	m, err := tag.Compile("TagA || TagB || TagC")
	require.NoError(t, err)
	single, multi := tags("TagC"), tags("TagX || TagC")
	code := tag.TagsCode("TagC")
	allocs := testing.AllocsPerRun(1000, func() {
		if !m.MatchTagsCode(code) || !m.Match(single) || !m.Match(multi) {
			t.Fatal("no match")
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkMatch(b *testing.B) {
	m, err := tag.Compile("TagA || TagB || TagC")
	require.NoError(b, err)
	benchmarks := []struct {
		name  string
		props message.Properties
	}{
		{"single/hit", tags("TagB")},
		{"single/miss", tags("TagZ")},
		{"multi/hit", tags("TagX || TagC")},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			code := tag.TagsCode(bm.props[message.PropertyTags])
			b.ReportAllocs()
			for b.Loop() {
				if m.MatchTagsCode(code) {
					m.Match(bm.props)
				}
			}
		})
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{"*", "", "TagA", "TagA || TagB", "||", "TagA || *", " 标签 ||😀", "a|b", "\xff||\x00"} {
		f.Add(s, "TagA")
	}
	c := tag.NewCompiler(nil)
	f.Fuzz(func(t *testing.T, expr, msgTags string) {
		samples := append(filtertest.Samples(), tags(msgTags))
		for _, p := range tag.ParseTags(expr) {
			samples = append(samples, tags(p), tags("x||"+p))
		}
		filtertest.CheckCompile(t, filter.TypeTag, c, expr, samples)
		m, err := tag.Compile(expr)
		if err != nil {
			return
		}
		// Every parsed tag matches exactly, and the pre-filter passes it.
		for _, p := range m.Tags() {
			if !m.Match(tags(p)) || !m.MatchTagsCode(tag.TagsCode(p)) {
				t.Fatalf("Compile(%q) does not match its own tag %q", expr, p)
			}
		}
	})
}
