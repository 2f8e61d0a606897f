//go:build e2etrace && unix

package e2etrace

import (
	"os"
	"syscall"
)

// dumpSignals ask a running broker for a dump.
var dumpSignals = []os.Signal{syscall.SIGUSR1}
