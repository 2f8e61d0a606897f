//go:build race

package authtest_test

const raceEnabled = true
