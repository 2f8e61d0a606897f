package sql92_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/plugins/filter/sql92"
)

var fuzzSeeds = []string{
	"a > 5 AND b = 'x' AND c IN ('p','q')",
	"a BETWEEN 1 AND 10", "a NOT BETWEEN -1.5 AND 2e3",
	"NOT (a IS NULL) OR b IS NOT NULL",
	"TAGS IN ('TagA') AND a CONTAINS 'x' AND b NOT STARTSWITH 'y' OR c ENDSWITH 'z'",
	"a = 'it''s'", "a = TRUE", "TRUE = a", "'x' <> a", "a = b", "-a < 0", "- -5 = a",
	"((a = 1) = TRUE) = FALSE", "a > 9223372036854775807", "a = 1.5e-3", "a = .5",
	"a = 1 -- c\n AND b = 2", "a /* c */ = 1", "NULL", "TRUE OR a > 5", "a",
	"a = 1 AND", "a IN ()", "(((a)))", "a > 'x'", "", "\xff",
}

// FuzzCompile compiles arbitrary expressions: Compile must not panic or
// hang, errors must be *filter.SyntaxError, and compiled matchers must be
// deterministic, honest about MatchesAll and panic-free on every sample,
// including the fuzzer's own property value.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "7")
	}
	c := sql92.NewCompiler(nil)
	f.Fuzz(func(t *testing.T, expr, v string) {
		samples := append(filtertest.Samples(),
			message.Properties{"a": v, "b": v, "c": v, message.PropertyTags: v},
			message.Properties{"a": "7", "b": "x", "c": "p"},
			message.Properties{"a": "-1.5e3", "b": "", "c": "NaN"},
		)
		filtertest.CheckCompile(t, filter.TypeSQL92, c, expr, samples)
	})
}

// FuzzEval evaluates fixed expressions against arbitrary property values
// and checks them against independent definitions of RocketMQ's rules.
func FuzzEval(f *testing.F) {
	for _, s := range []string{"7", "-7", "+7", "7.5", "abc", "", "'", "3000000000", " 7", "NaN", "1e400", "\xff"} {
		f.Add(s, "x")
	}
	must := func(expr string) *sql92.Matcher {
		m, err := sql92.Compile(expr)
		if err != nil {
			f.Fatalf("Compile(%q): %v", expr, err)
		}
		return m
	}
	var (
		gt5     = must("a > 5")
		ngt5    = must("NOT (a > 5)")
		le5     = must("a <= 5")
		eqB     = must("a = b")
		isNull  = must("a IS NULL")
		notNull = must("a IS NOT NULL")
		between = must("a BETWEEN 0 AND 10")
		nbetw   = must("a NOT BETWEEN 0 AND 10")
		eqTrue  = must("a = TRUE")
		eqFalse = must("a = FALSE")
	)
	f.Fuzz(func(t *testing.T, a, b string) {
		p := message.Properties{"a": a, "b": b}
		// Integer.valueOf of an ASCII string is strconv.ParseInt(s, 10, 32).
		n, err := strconv.ParseInt(a, 10, 32)
		isInt := err == nil
		check := func(name string, got, want bool) {
			t.Helper()
			if got != want {
				t.Fatalf("%s with a=%q b=%q: got %v, want %v", name, a, b, got, want)
			}
		}
		check("a > 5", gt5.Match(p), isInt && n > 5)
		check("NOT (a > 5)", ngt5.Match(p), isInt && n <= 5)
		check("a <= 5", le5.Match(p), isInt && n <= 5)
		check("a BETWEEN 0 AND 10", between.Match(p), isInt && n >= 0 && n <= 10)
		check("a NOT BETWEEN 0 AND 10", nbetw.Match(p), isInt && (n < 0 || n > 10))
		check("a = b", eqB.Match(p), a == b)
		check("a IS NULL", isNull.Match(p), false)
		check("a IS NOT NULL", notNull.Match(p), true)
		check("a = TRUE", eqTrue.Match(p), strings.EqualFold(a, "true"))
		check("a = FALSE", eqFalse.Match(p), !strings.EqualFold(a, "true"))

		// Any string survives a round trip through a literal.
		lit := "'" + strings.ReplaceAll(a, "'", "''") + "'"
		for expr, want := range map[string]bool{
			"a = " + lit:              true,
			lit + " = a":              true,
			"a <> " + lit:             false,
			"a IN ('x', " + lit + ")": true,
			"a NOT IN (" + lit + ")":  false,
			"a CONTAINS " + lit:       a != "",
			"a STARTSWITH " + lit:     a != "",
			"a ENDSWITH " + lit:       a != "",
			"a NOT CONTAINS " + lit:   false,
		} {
			m, err := sql92.Compile(expr)
			if err != nil {
				if len(expr) > sql92.DefaultMaxLength {
					continue
				}
				t.Fatalf("Compile(%q): %v", expr, err)
			}
			check(expr, m.Match(p), want)
		}
	})
}
