//go:build tools

// Package deps pins modules that tests and plugins use, so go mod tidy
// keeps the versions the project has agreed on (see README).
package deps

import (
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
)
