package filtertest

import (
	"maps"
	"testing"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
)

// CheckBorrowedInputs checks the ownership rule of filter.Matcher: the
// props handed to Match are borrowed (a reader may decode every record
// into one reused map), so a matcher keeps nothing of the map after Match
// returns. For each expression it matches every sample on a copy of its
// own, then on one map cleared and refilled for each sample (and
// scribbled over in between), then on copies again, and requires the
// same answers.
func CheckBorrowedInputs(t testing.TB, c filter.Compiler, exprs []string, samples []message.Properties) {
	t.Helper()
	for _, expr := range exprs {
		m, err := compile(t, c, expr)
		if err != nil {
			continue // CheckCompile reports what is wrong with it
		}
		want := make([]bool, len(samples))
		for i, p := range samples {
			want[i] = match(t, m, expr, cloneProps(p))
		}
		pooled := message.Properties{}
		for i, p := range samples {
			if p == nil {
				continue
			}
			clear(pooled)
			maps.Copy(pooled, p)
			if got := match(t, m, expr, pooled); got != want[i] {
				t.Errorf("Compile(%q).Match(%v) = %v on a reused map, %v on its own copy: the matcher kept an earlier message's map", expr, p, got, want[i])
			}
			for k := range pooled {
				pooled[k] = "scribbled"
			}
			pooled[message.PropertyTags] = "scribbled"
		}
		for i, p := range samples {
			if got := match(t, m, expr, cloneProps(p)); got != want[i] {
				t.Errorf("Compile(%q).Match(%v) = %v after the caller reused the maps of earlier calls, %v before: the matcher kept a borrowed map", expr, p, got, want[i])
			}
		}
	}
}

// cloneProps copies p, keeping nil as nil.
func cloneProps(p message.Properties) message.Properties {
	if p == nil {
		return nil
	}
	return maps.Clone(p)
}
