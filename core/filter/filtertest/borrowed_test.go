package filtertest_test

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/filter/filtertest"
	"github.com/quivermq/quiver/core/message"
)

// exactTag matches messages whose TAGS is the expression. With memo set it
// makes the mistake the contract forbids: it remembers the map it last saw
// and answers again from memory when handed the same map.
type exactTag struct {
	memo bool
}

func (c exactTag) Compile(expr string) (filter.Matcher, error) {
	return &tagMatcher{tag: expr, memo: c.memo}, nil
}

type tagMatcher struct {
	tag  string
	memo bool
	mu   sync.Mutex
	last message.Properties
	ans  bool
}

func (m *tagMatcher) Match(props message.Properties) bool {
	if !m.memo {
		return props[message.PropertyTags] == m.tag
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last != nil && reflect.ValueOf(m.last).UnsafePointer() == reflect.ValueOf(props).UnsafePointer() {
		return m.ans
	}
	m.last, m.ans = props, props[message.PropertyTags] == m.tag
	return m.ans
}

type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fail()   { r.record("Fail") }
func (r *recorder) FailNow() {
	r.record("FailNow")
	runtime.Goexit()
}
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any) {
	r.record(fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.errors) > 0 }

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.errors = append(r.errors, s)
	r.mu.Unlock()
}

func runRecorded(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestCheckBorrowedInputs(t *testing.T) {
	exprs := []string{"TagA", "TagB"}
	tests := []struct {
		name     string
		memo     bool
		wantFail bool
	}{
		{name: "keeps nothing", memo: false},
		{name: "remembers the map it last saw", memo: true, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRecorded(t, func(tb testing.TB) {
				filtertest.CheckBorrowedInputs(tb, exactTag{memo: tt.memo}, exprs, filtertest.Samples())
			})
			if !tt.wantFail {
				assert.Empty(t, r.errors)
				return
			}
			assert.True(t, r.Failed(), "the check passes a matcher that keeps the borrowed map")
			assert.Contains(t, strings.Join(r.errors, "\n"), "kept an earlier message's map")
		})
	}
}
