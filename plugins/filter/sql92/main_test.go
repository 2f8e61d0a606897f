package sql92_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The conformance suite shares matchers between goroutines; make sure it
// joins them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
