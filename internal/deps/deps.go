//go:build tools

// Package deps pins modules the tests and later plugins use, so go mod tidy
// keeps the versions the project has agreed on.
package deps

import (
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
)
