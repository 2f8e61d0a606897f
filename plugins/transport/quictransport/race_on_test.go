//go:build race

package quictransport

// raceDetector is true in builds with -race.
const raceDetector = true
