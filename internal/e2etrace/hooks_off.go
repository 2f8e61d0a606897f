//go:build !e2etrace

package e2etrace

import "log/slog"

// On reports a tracing build. Hooks are called as
// `if e2etrace.On { e2etrace.X(...) }`: without the e2etrace tag the
// branch is constant false and the compiler drops it with its arguments.
const On = false

// Now is 0 without the tag.
func Now() int64 { return 0 }

// FrameRead does nothing without the tag.
func FrameRead(t int64, peer uint64, code, opaque int32) {}

// Stored does nothing without the tag.
func Stored(topic string, queue int32, offset int64) {}

// SendDone does nothing without the tag.
func SendDone(peer uint64, opaque int32, topic string, queue int32, offset int64, n int) {}

// Pull does nothing without the tag.
func Pull(peer uint64, opaque int32, topic string, queue int32, offset int64) {}

// Held does nothing without the tag.
func Held(peer uint64, opaque int32, topic string, queue int32, offset int64) {}

// Found does nothing without the tag.
func Found(peer uint64, opaque int32, topic string, queue int32, offset, max int64) {}

// Written returns sent without the tag.
func Written(sent func(), peer uint64, opaque int32, topic string, queue int32, offset, next int64, records int) func() {
	return sent
}

// Start does nothing without the tag.
func Start(log *slog.Logger) {}

// Stop does nothing without the tag.
func Stop() {}

// DumpNow does nothing without the tag.
func DumpNow() error { return nil }
