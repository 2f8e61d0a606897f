package suffixfilter_test

import (
	"testing"

	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/message"

	"example.com/quiver-outside/suffixfilter"
)

// TestConformance runs Quiver's filter conformance suite on the plugin,
// as an outside author's own test would.
func TestConformance(t *testing.T) {
	keys := func(k string) message.Properties { return message.Properties{message.PropertyKeys: k} }
	filtertest.Run(t, suffixfilter.NewProvider(), []filtertest.Case{
		{Name: "one key", Expr: "-eu", Props: keys("order-1-eu"), Want: true},
		{Name: "second key", Expr: "-eu", Props: keys("order-1-us order-1-eu"), Want: true},
		{Name: "other suffix", Expr: "-eu", Props: keys("order-1-us")},
		{Name: "inside, not at the end", Expr: "-eu", Props: keys("order-eu-1")},
		{Name: "no keys", Expr: "-eu", Props: message.Properties{"color": "x-eu"}},
		{Name: "err/empty", Expr: "", WantErr: true},
		{Name: "err/blank", Expr: "a b", WantErr: true},
		{Name: "err/too long", Expr: string(make([]byte, 65)), WantErr: true},
	})
}
