package sql92_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/plugins/filter/sql92"
)

func TestProvider(t *testing.T) {
	p := sql92.NewProvider()
	assert.Equal(t, "sql92", p.ID())
	assert.Equal(t, filter.TypeSQL92, p.Type())
	assert.Equal(t, sql92.NewConfig(), p.NewConfig())
	_, err := p.New(nil)
	assert.NoError(t, err)
	_, err = p.New(struct{}{})
	assert.EqualError(t, err, "filter.sql92: config is struct {}, want *sql92.Config: filter: bad config")
	assert.ErrorIs(t, err, filter.ErrBadConfig)
	_, err = p.New(&sql92.Config{MaxLength: 0, MaxDepth: -1})
	assert.ErrorContains(t, err, "filter.sql92: max_length: 0 is outside 1..1048576")
	assert.ErrorContains(t, err, "max_depth: -1 is outside 1..10000")

	c, err := p.New(p.NewConfig())
	require.NoError(t, err)
	m, err := c.Compile("a =")
	assert.Error(t, err)
	assert.Nil(t, m, "a failed Compile must return a nil interface, not a typed nil")
}

func TestConfigDefaults(t *testing.T) {
	c := sql92.NewConfig()
	assert.Equal(t, &sql92.Config{MaxLength: 4096, MaxDepth: 64, Enabled: true}, c)
	assert.NoError(t, c.Validate())
}

func TestDisabled(t *testing.T) {
	cfg := sql92.NewConfig()
	cfg.Enabled = false
	c, err := sql92.NewProvider().New(cfg)
	require.NoError(t, err)
	for _, expr := range []string{"TRUE", "a > 5", "garbage ("} {
		m, err := c.Compile(expr)
		assert.Nil(t, m)
		assert.True(t, errors.Is(err, sql92.ErrDisabled), "Compile(%q): %v", expr, err)
		assert.EqualError(t, err, "SQL92 filtering is disabled on this broker (filter.sql92.enabled=false)")
	}
}

func TestMaxLength(t *testing.T) {
	// "a = '" + n x + "'" is n+6 bytes.
	exact := "a = '" + strings.Repeat("x", 4096-6) + "'"
	require.Len(t, exact, 4096)
	m, err := sql92.Compile(exact)
	require.NoError(t, err)
	assert.True(t, m.Match(message.Properties{"a": strings.Repeat("x", 4090)}))

	long := exact + " "
	_, err = sql92.Compile(long)
	se := requireSyntaxError(t, err)
	assert.Equal(t, 4096, se.Pos)
	assert.Equal(t, "expected an expression of at most 4096 bytes (filter.sql92.max_length), found 4097", se.Expected)

	cfg := sql92.NewConfig()
	cfg.MaxLength = 8
	c := sql92.NewCompiler(cfg)
	_, err = c.Compile("a = 'x'")
	assert.NoError(t, err)
	_, err = c.Compile("a = 'xyz'")
	se = requireSyntaxError(t, err)
	assert.Equal(t, 8, se.Pos)
}

func TestMaxDepth(t *testing.T) {
	cfg := sql92.NewConfig()
	cfg.MaxDepth = 3
	c := sql92.NewCompiler(cfg)
	tests := []struct {
		give    string
		wantErr bool
		wantPos int
	}{
		{give: "a = 'x'"},
		{give: "((a = 'x'))"},
		{give: "(((a = 'x')))", wantErr: true, wantPos: 3},
		{give: "NOT NOT a"},
		{give: "NOT NOT NOT a", wantErr: true, wantPos: 12},
		{give: "- - -5 = a", wantErr: true, wantPos: 5},
		// Chained operators grow the tree without parentheses.
		{give: "a = 1 = TRUE = TRUE"},
		{give: "a = 1 = TRUE = TRUE = TRUE", wantErr: true, wantPos: 20},
		// AND and OR chains are flat.
		{give: "a = '1' AND b = '2' AND c = '3' AND d = '4' OR e = '5'"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := c.Compile(tt.give)
			if !tt.wantErr {
				assert.NoError(t, err)
				return
			}
			se := requireSyntaxError(t, err)
			assert.Equal(t, tt.wantPos, se.Pos)
			assert.Equal(t, "expected at most 3 levels of nesting (filter.sql92.max_depth)", se.Expected)
		})
	}
	// The default limit stops pathological input long before the stack
	// matters.
	for _, expr := range []string{
		strings.Repeat("(", 2000) + "a" + strings.Repeat(")", 2000),
		strings.Repeat("NOT ", 1000) + "a",
		strings.Repeat("- ", 2000) + "1 = a",
	} {
		_, err := sql92.Compile(expr)
		assert.Contains(t, requireSyntaxError(t, err).Expected, "levels of nesting")
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := sql92.Compile("a = 1 AND")
	se := requireSyntaxError(t, err)
	assert.Equal(t, &filter.SyntaxError{Type: "SQL92", Expr: "a = 1 AND", Pos: 9, Expected: "expected an operand after AND, found end of expression"}, se)
	assert.EqualError(t, err, `filter: SQL92 expression "a = 1 AND": at position 9: expected an operand after AND, found end of expression`)
}

func requireSyntaxError(t *testing.T, err error) *filter.SyntaxError {
	t.Helper()
	var se *filter.SyntaxError
	require.True(t, errors.As(err, &se), "error %v (%T) is not a *filter.SyntaxError", err, err)
	assert.Equal(t, filter.TypeSQL92, se.Type)
	return se
}

func TestMatchesAll(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"TRUE", true},
		{"true", true},
		{"(TRUE)", true},
		{"TRUE OR a = 'x'", true},
		{"a = 'x' OR TRUE", false}, // a = 'x' is evaluated first
		{"FALSE", false},
		{"NOT FALSE", false}, // TRUE, but not folded
		{"a IS NULL", false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			m, err := sql92.Compile(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, m.MatchesAll())
			assert.Equal(t, tt.give, m.String())
		})
	}
}

func TestNoTagsCodeMatcher(t *testing.T) {
	m, err := sql92.NewCompiler(nil).Compile("TAGS = 'TagA'")
	require.NoError(t, err)
	_, ok := m.(filter.TagsCodeMatcher)
	assert.False(t, ok, "SQL92 matchers cannot pre-filter on tag hashes without false negatives")
}

func TestMatchAllocs(t *testing.T) {
	props := message.Properties{"a": "7", "b": "x", "c": "q", "d": "3.5", "e": "hello", "TAGS": "TagA", "bad": "abc"}
	for _, expr := range []string{
		"a > 5 AND b = 'x' AND c IN ('p','q')",
		"a BETWEEN 1 AND 10 OR d >= 1.5",
		"c IN ('a','b','c','d','e','f','g','h','i','q')",
		"e CONTAINS 'ell' AND e STARTSWITH 'he' AND e NOT ENDSWITH 'x'",
		"NOT (missing IS NOT NULL) AND TAGS <> 'TagB'",
		"a = b OR 'x' = b OR a > d OR -a < 0 OR a = 7.0 OR a = TRUE",
		"bad > 5", // the exception path
		"bad > 5.0",
	} {
		m, err := sql92.Compile(expr)
		require.NoError(t, err, expr)
		allocs := testing.AllocsPerRun(1000, func() { m.Match(props) })
		assert.Zero(t, allocs, "Compile(%q).Match allocates", expr)
	}
}
