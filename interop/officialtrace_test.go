package interop

import (
	"sync/atomic"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// officialTraceConfig is the TraceConfig of an official Go client traced
// through the name server ns. The client keeps one trace client per
// process (instance INNER_TRACE_CLIENT_DEFAULT) that no Shutdown removes,
// and NewTraceDispatcher returns a nil dispatcher, on which the first
// traced send panics, when a later TraceConfig resolves to other name
// servers than the first one did: with static addresses a second test
// server in the process (go test -count=2) cannot trace. Every config
// resolves through one process-wide address instead, set here to the
// current server, so the kept client is reused and the new dispatcher
// looks its routes up on ns. Tests using it must not run in parallel.
func officialTraceConfig(ns string) *primitive.TraceConfig {
	officialTraceNamesrv.Store(ns)
	return &primitive.TraceConfig{Resolver: officialTraceResolver{}, Access: primitive.Local}
}

var officialTraceNamesrv atomic.Value // string

// officialTraceResolver resolves to officialTraceNamesrv.
type officialTraceResolver struct{}

func (officialTraceResolver) Resolve() []string {
	return []string{officialTraceNamesrv.Load().(string)}
}

func (officialTraceResolver) Description() string { return "the current test server's name server" }
