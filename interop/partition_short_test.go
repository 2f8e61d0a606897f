//go:build linux && !soak

package interop

import "time"

// partitionRounds: short random rounds in CI (make soak: partition_soak_test.go).
func partitionRounds() partitionParams {
	return partitionParams{randomRounds: 2, maxHold: 4 * time.Second}
}
