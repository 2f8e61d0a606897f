package regexfilter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/examples/custom-filter/regexfilter"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestConformance(t *testing.T) {
	p := func(kv ...string) message.Properties {
		m := message.Properties{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []filtertest.Case{
		{Name: "prefix", Expr: "color=^bl", Props: p("color", "blue"), Want: true},
		{Name: "prefix other", Expr: "color=^bl", Props: p("color", "black"), Want: true},
		{Name: "prefix not at start", Expr: "color=^bl", Props: p("color", "lightblue")},
		{Name: "case-sensitive", Expr: "color=^bl", Props: p("color", "Blue")},
		{Name: "case-insensitive flag", Expr: "color=(?i)^bl", Props: p("color", "Blue"), Want: true},
		{Name: "unanchored", Expr: "color=bl", Props: p("color", "lightblue"), Want: true},
		{Name: "missing property", Expr: "color=.*", Props: p("size", "9")},
		{Name: "empty value matches .*", Expr: "color=.*", Props: p("color", ""), Want: true},
		{Name: "empty regexp matches any present value", Expr: "color=", Props: p("color", "x"), Want: true},
		{Name: "blanks around name", Expr: " color =^b", Props: p("color", "b"), Want: true},
		{Name: "= inside the regexp", Expr: "kv=^a=b$", Props: p("kv", "a=b"), Want: true},
		{Name: "alternation", Expr: "region=^(hz|bj)$", Props: p("region", "bj"), Want: true},
		{Name: "alternation miss", Expr: "region=^(hz|bj)$", Props: p("region", "sh")},
		{Name: "tags are properties", Expr: "TAGS=^Tag[AB]$", Props: p(message.PropertyTags, "TagB"), Want: true},
		{Name: "unicode", Expr: "city=^杭", Props: p("city", "杭州"), Want: true},
		{Name: "err/no =", Expr: "color", WantErr: true},
		{Name: "err/empty", Expr: "", WantErr: true},
		{Name: "err/no name", Expr: "=x", WantErr: true},
		{Name: "err/blank in name", Expr: "co lor=x", WantErr: true},
		{Name: "err/bad regexp", Expr: "color=(", WantErr: true},
		{Name: "err/bad repeat", Expr: "color=a**", WantErr: true},
		{Name: "err/backreference", Expr: `color=(a)\1`, WantErr: true},
	}
	filtertest.Run(t, regexfilter.NewProvider(), cases)
}

func TestSyntaxErrorPosition(t *testing.T) {
	tests := []struct {
		give    string
		wantPos int
	}{
		{give: "color", wantPos: 5},
		{give: "=x", wantPos: 0},
		{give: "co lor=x", wantPos: 2},
		{give: "color=(", wantPos: 6},
	}
	c := regexfilter.NewCompiler(nil)
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := c.Compile(tt.give)
			var se *filter.SyntaxError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.wantPos, se.Pos)
			assert.Equal(t, regexfilter.Type, se.Type)
		})
	}
	_, err := c.Compile("color=(")
	assert.EqualError(t, err, `filter: REGEX expression "color=(": at position 6: expected a regular expression: missing closing ): (`)
}

func TestMaxLength(t *testing.T) {
	cfg := regexfilter.NewConfig()
	cfg.MaxLength = 8
	c, err := regexfilter.NewProvider().New(cfg)
	require.NoError(t, err)
	_, err = c.Compile("a=123456")
	require.NoError(t, err)
	_, err = c.Compile("a=1234567")
	assert.ErrorContains(t, err, "filter.regex.max_length")
	cfg.MaxLength = 0
	_, err = regexfilter.NewProvider().New(cfg)
	assert.ErrorContains(t, err, "filter.regex: max_length")
}

// TestPlanRegisters: the provider in a binary's plugin list is in the
// plan's filter registry, as every stock filter plugin is.
func TestPlanRegisters(t *testing.T) {
	p, err := kernel.NewPlan(config.FromMap(nil), kernel.Spec{Plugins: kernel.Plugins{
		Filter: []filter.Provider{regexfilter.NewProvider()}, Transport: []transport.Provider{tcp.NewProvider()}}})
	require.NoError(t, err)
	f, err := p.Registries.Filter.Get(regexfilter.ID)
	require.NoError(t, err)
	assert.Equal(t, regexfilter.Type, f.Type())
}
