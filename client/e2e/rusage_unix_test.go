//go:build unix

package e2e

import (
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports the benchmark process's CPU time (user + system) per
// operation: with the broker in its own process, this is the client's
// cost of a message, the figure bench/peers calls "client CPU per
// message".
type cpuMeter struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuMeter { return cpuMeter{start: processCPU()} }

func (m cpuMeter) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64((processCPU()-m.start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}
