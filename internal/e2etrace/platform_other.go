//go:build e2etrace && !unix

package e2etrace

import "os"

// dumpSignals: none where there is no SIGUSR1 (dumps at stop only).
var dumpSignals []os.Signal

// processCPU is unknown here.
func processCPU() float64 { return 0 }
