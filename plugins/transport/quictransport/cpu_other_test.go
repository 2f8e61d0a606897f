//go:build !unix

package quictransport

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
