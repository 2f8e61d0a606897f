//go:build race

package codec

// raceEnabled: built with the race detector (Release zeroes frames).
const raceEnabled = true
