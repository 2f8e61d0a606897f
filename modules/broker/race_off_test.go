//go:build !race

package broker

// raceDetector is true in builds with -race.
const raceDetector = false
