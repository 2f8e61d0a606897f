// Package filtertest is the conformance suite every filter plugin must
// pass. A plugin's test calls Run with its provider and a table of cases;
// Run checks the cases and the properties the broker relies on: Compile is
// deterministic and never panics, bad expressions are *filter.SyntaxError,
// compiled matchers are safe for concurrent use, MatchesAll is honest, the
// tagsCode pre-filter never rejects a message that Match accepts, and a
// matcher keeps nothing of the props map Match borrowed
// (CheckBorrowedInputs).
//
// The tagsCode of a sample message is message.TagsHashCode of its TAGS
// property (what a Java broker stores), unless the provider's Compiler has
// a method TagsCode(tags string) int64, in which case that method says what
// the broker stores for the plugin (the tag plugin uses it for multi-tag
// messages).
package filtertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// Case is one expression and one message.
type Case struct {
	Name string
	Expr string
	// Props are the message's properties (TAGS, user properties, ...).
	Props message.Properties
	// Want is Match's answer; ignored when WantErr.
	Want bool
	// WantErr says Compile must fail with a *filter.SyntaxError.
	WantErr bool
}

// tagsCoder is implemented by compilers that tell the broker which
// tagsCode to store for a message.
type tagsCoder interface {
	TagsCode(tags string) int64
}

// TagsCodeFunc returns the function the suite uses to compute a message's
// stored tagsCode for c: c's TagsCode method if it has one, otherwise
// message.TagsHashCode.
func TagsCodeFunc(c filter.Compiler) func(tags string) int64 {
	if tc, ok := c.(tagsCoder); ok {
		return tc.TagsCode
	}
	return message.TagsHashCode
}

// Samples are messages the generic checks run every compiled expression
// against, in addition to the props of the cases.
func Samples() []message.Properties {
	return []message.Properties{
		nil,
		{},
		{message.PropertyTags: ""},
		{message.PropertyTags: "TagA"},
		{message.PropertyTags: "TagB"},
		{message.PropertyTags: "taga"},
		{message.PropertyTags: " TagA "},
		{message.PropertyTags: "TagA||TagB"},
		{message.PropertyTags: "TagC || TagA"},
		{message.PropertyTags: "||"},
		{message.PropertyTags: "*"},
		{message.PropertyTags: "标签"},
		{message.PropertyTags: "😀"},
		{message.PropertyTags: "\xff\xfe"},
		{message.PropertyKeys: "k1 k2", "a": "1", "b": "x", "region": "hz"},
		{message.PropertyTags: "TagA", "a": "2", "b": "", "region": "bj"},
	}
}

// Garbage are expressions every compiler must survive: each either
// compiles or fails with a *filter.SyntaxError, and none panics.
func Garbage() []string {
	return []string{
		"", " ", "\t\n", "*", " * ", "**", "||", " || ", "|||", "| |", "a|", "|a",
		"(", ")", "()", "((a)", "'", "\"", "'unterminated", "a = ", "a = 'x", "a IN (", "a IN ()",
		"1 = 1 AND", "NOT", "a BETWEEN 1 AND", "a > 99999999999999999999999999",
		"\x00", "\x01\x02", "\xff\xfe\xfd", "😀", "\u2028", "\ufeff*",
		strings.Repeat("(", 10000), strings.Repeat("a || ", 2000), strings.Repeat("NOT ", 5000) + "a",
		strings.Repeat("x", 1<<16),
	}
}

// Run runs the cases and the generic checks against p. Each case name must
// be unique and non-empty.
func Run(t *testing.T, p filter.Provider, cases []Case) {
	t.Helper()
	require.NotEmpty(t, p.ID(), "provider ID")
	require.NotEmpty(t, p.Type(), "provider Type")
	c, err := p.New(p.NewConfig())
	require.NoError(t, err, "New(NewConfig())")
	require.NotNil(t, c, "New(NewConfig())")

	names := map[string]bool{}
	for _, tt := range cases {
		require.NotEmpty(t, tt.Name, "case with expression %q has no name", tt.Expr)
		require.False(t, names[tt.Name], "case name %q is used twice", tt.Name)
		names[tt.Name] = true
	}

	samples := Samples()
	var exprs []string
	seen := map[string]bool{}
	for _, tt := range cases {
		samples = append(samples, tt.Props)
		if !tt.WantErr && !seen[tt.Expr] {
			seen[tt.Expr] = true
			exprs = append(exprs, tt.Expr)
		}
	}

	t.Run("Cases", func(t *testing.T) {
		for _, tt := range cases {
			t.Run(tt.Name, func(t *testing.T) {
				m, err := compile(t, c, tt.Expr)
				if tt.WantErr {
					requireSyntaxError(t, p.Type(), tt.Expr, m, err)
					return
				}
				require.NoError(t, err, "Compile(%q)", tt.Expr)
				require.NotNil(t, m, "Compile(%q)", tt.Expr)
				assert.Equal(t, tt.Want, match(t, m, tt.Expr, tt.Props), "Compile(%q).Match(%v)", tt.Expr, tt.Props)
			})
		}
	})

	t.Run("Properties", func(t *testing.T) {
		for _, expr := range exprs {
			CheckCompile(t, p.Type(), c, expr, samples)
		}
	})

	t.Run("Garbage", func(t *testing.T) {
		for _, expr := range Garbage() {
			CheckCompile(t, p.Type(), c, expr, samples)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		checkConcurrent(t, c, exprs, samples)
	})

	t.Run("BorrowedInputs", func(t *testing.T) {
		CheckBorrowedInputs(t, c, exprs, samples)
	})
}

// CheckCompile compiles expr with c and checks what must hold for any
// expression, valid or not (fuzz targets call it): no panic; an error is a
// *filter.SyntaxError of type typ naming expr; a matcher answers the same
// as a second compilation of expr on every sample; MatchesAll implies
// Match; and MatchTagsCode is true whenever Match is, for the tagsCode the
// broker stores (TagsCodeFunc).
func CheckCompile(t testing.TB, typ string, c filter.Compiler, expr string, samples []message.Properties) {
	t.Helper()
	m, err := compile(t, c, expr)
	m2, err2 := compile(t, c, expr)
	if err != nil {
		requireSyntaxError(t, typ, expr, m, err)
		require.Error(t, err2, "Compile(%q) failed once and succeeded the second time", expr)
		assert.Equal(t, err.Error(), err2.Error(), "Compile(%q) is not deterministic", expr)
		return
	}
	require.NotNil(t, m, "Compile(%q) returned a nil matcher and no error", expr)
	require.NoError(t, err2, "Compile(%q) succeeded once and failed the second time", expr)
	code := TagsCodeFunc(c)
	all, isAll := m.(filter.AllMatcher)
	all2, isAll2 := m2.(filter.AllMatcher)
	require.Equal(t, isAll, isAll2, "Compile(%q): matchers of different types", expr)
	if isAll {
		assert.Equal(t, all.MatchesAll(), all2.MatchesAll(), "Compile(%q).MatchesAll is not deterministic", expr)
	}
	tm, isTM := m.(filter.TagsCodeMatcher)
	for _, props := range samples {
		got := match(t, m, expr, props)
		assert.Equal(t, got, match(t, m2, expr, props), "Compile(%q) is not deterministic: Match(%v) differs between two compilations", expr, props)
		if isAll && all.MatchesAll() {
			assert.True(t, got, "Compile(%q).MatchesAll() but Match(%v) is false", expr, props)
		}
		if isTM && got {
			tags := props[message.PropertyTags]
			assert.True(t, tm.MatchTagsCode(code(tags)),
				"Compile(%q): Match(%v) is true but MatchTagsCode(%d) (the tagsCode of TAGS %q) is false: the pre-filter would lose the message",
				expr, props, code(tags), tags)
		}
	}
}

func compile(t testing.TB, c filter.Compiler, expr string) (m filter.Matcher, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Compile(%q) panicked: %v", expr, r)
		}
	}()
	return c.Compile(expr)
}

func match(t testing.TB, m filter.Matcher, expr string, props message.Properties) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Compile(%q).Match(%v) panicked: %v", expr, props, r)
		}
	}()
	return m.Match(props)
}

func requireSyntaxError(t testing.TB, typ, expr string, m filter.Matcher, err error) {
	t.Helper()
	require.Error(t, err, "Compile(%q) should fail", expr)
	assert.Nil(t, m, "Compile(%q) returned a matcher with its error", expr)
	var se *filter.SyntaxError
	require.True(t, errors.As(err, &se), "Compile(%q) error %q (%T) is not a *filter.SyntaxError", expr, err, err)
	assert.Equal(t, typ, se.Type, "SyntaxError.Type for %q", expr)
	assert.Equal(t, expr, se.Expr, "SyntaxError.Expr for %q", expr)
	assert.True(t, se.Pos >= 0 && se.Pos <= len(expr), "SyntaxError.Pos %d for %q is outside the expression", se.Pos, expr)
	assert.NotEmpty(t, se.Expected, "SyntaxError.Expected for %q", expr)
}

// checkConcurrent shares one matcher per expression between goroutines
// (and compiles concurrently on one Compiler); run it with -race.
func checkConcurrent(t *testing.T, c filter.Compiler, exprs []string, samples []message.Properties) {
	const workers, rounds = 8, 20
	code := TagsCodeFunc(c)
	type compiled struct {
		expr string
		m    filter.Matcher
		want []bool
	}
	var ms []compiled
	for _, expr := range exprs {
		m, err := compile(t, c, expr)
		require.NoError(t, err, "Compile(%q)", expr)
		want := make([]bool, len(samples))
		for i, p := range samples {
			want[i] = match(t, m, expr, p)
		}
		ms = append(ms, compiled{expr, m, want})
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				for _, cm := range ms {
					if (w+r)%4 == 0 {
						if _, err := c.Compile(cm.expr); err != nil {
							errs <- fmt.Sprintf("concurrent Compile(%q): %v", cm.expr, err)
							return
						}
					}
					for i, p := range samples {
						if got := cm.m.Match(p); got != cm.want[i] {
							errs <- fmt.Sprintf("concurrent Compile(%q).Match(%v) = %v, alone %v", cm.expr, p, got, cm.want[i])
							return
						}
						if tm, ok := cm.m.(filter.TagsCodeMatcher); ok {
							_ = tm.MatchTagsCode(code(p[message.PropertyTags]))
						}
						if am, ok := cm.m.(filter.AllMatcher); ok {
							_ = am.MatchesAll()
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
