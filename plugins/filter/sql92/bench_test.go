package sql92_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/plugins/filter/sql92"
)

const benchExpr = "a > 5 AND b = 'x' AND c IN ('p','q')"

func BenchmarkCompile(b *testing.B) {
	for _, bm := range []struct{ name, expr string }{
		{"3-predicate", benchExpr},
		{"complex", "(TAGS IN ('TagA', 'TagB') OR region STARTSWITH 'cn-') AND price BETWEEN 10 AND 99.5 AND NOT (vip IS NULL) AND name NOT CONTAINS 'test'"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			c := sql92.NewCompiler(nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Compile(bm.expr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	m, err := sql92.Compile(benchExpr)
	require.NoError(b, err)
	for _, bm := range []struct {
		name  string
		props message.Properties
		want  bool
	}{
		{"match", message.Properties{"a": "7", "b": "x", "c": "q", message.PropertyTags: "TagA", message.PropertyKeys: "k1"}, true},
		{"first fails", message.Properties{"a": "3", "b": "x", "c": "q", message.PropertyTags: "TagA"}, false},
		{"last fails", message.Properties{"a": "7", "b": "x", "c": "z", message.PropertyTags: "TagA"}, false},
		{"missing", message.Properties{message.PropertyTags: "TagA"}, false},
		{"not a number", message.Properties{"a": "seven", "b": "x", "c": "q"}, false},
	} {
		b.Run(bm.name, func(b *testing.B) {
			require.Equal(b, bm.want, m.Match(bm.props))
			b.ReportAllocs()
			for b.Loop() {
				m.Match(bm.props)
			}
		})
	}
}
