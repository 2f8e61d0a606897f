// Package officialtrace gives tests that trace with the official
// RocketMQ Go client (4.x) a TraceConfig that survives a second test
// server in the same process.
package officialtrace

import (
	"sync/atomic"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Config is the TraceConfig of an official Go client traced
// through the name server ns. The client keeps one trace client per
// process (instance INNER_TRACE_CLIENT_DEFAULT) that no Shutdown removes,
// and NewTraceDispatcher returns a nil dispatcher, on which the first
// traced send panics, when a later TraceConfig resolves to other name
// servers than the first one did: with static addresses a second test
// server in the process (go test -count=2) cannot trace. Every config
// resolves through one process-wide address instead, set here to the
// current server, so the kept client is reused and the new dispatcher
// looks its routes up on ns. Tests using it must not run in parallel.
func Config(ns string) *primitive.TraceConfig {
	namesrv.Store(ns)
	return &primitive.TraceConfig{Resolver: resolver{}, Access: primitive.Local}
}

var namesrv atomic.Value // string

// resolver resolves to namesrv.
type resolver struct{}

func (resolver) Resolve() []string {
	return []string{namesrv.Load().(string)}
}

func (resolver) Description() string { return "the current test server's name server" }
