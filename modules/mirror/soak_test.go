//go:build soak

package mirror_test

// The soak run (make soak) kills the mirror 10 times.
func init() { mirrorKills = 10 }
