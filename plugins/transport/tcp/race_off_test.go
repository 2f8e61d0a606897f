//go:build !race

package tcp

// raceDetector is true in builds with -race.
const raceDetector = false
