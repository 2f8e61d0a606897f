//go:build linux && soak

package interop

import "time"

// partitionRounds: long random rounds under make soak.
func partitionRounds() partitionParams {
	return partitionParams{randomRounds: 30, maxHold: 12 * time.Second}
}
