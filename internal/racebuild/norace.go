//go:build !race

// Package racebuild says whether the binary was built with the race
// detector, for tests whose bounds (allocations, memory, timings) the
// detector's instrumentation changes.
package racebuild

// Enabled is true in builds with -race.
const Enabled = false
