package trace_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// internal/testserver's process waiter (live mq dev tests) ends
		// when the process does, which may be just after the last cleanup.
		goleak.IgnoreTopFunction("os/exec.(*Cmd).Wait"),
		goleak.IgnoreTopFunction("syscall.Syscall6"),
		goleak.IgnoreTopFunction("os.(*Process).blockUntilWaitable"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}
