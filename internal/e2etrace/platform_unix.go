//go:build e2etrace && unix

package e2etrace

import (
	"os"
	"syscall"
)

// dumpSignals ask a running broker for a dump.
var dumpSignals = []os.Signal{syscall.SIGUSR1}

// processCPU is the process's user+system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
