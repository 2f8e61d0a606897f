//go:build !race

package grpc_test

// raceDetector is true in builds with -race.
const raceDetector = false
