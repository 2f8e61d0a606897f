package transaction

import (
	"context"
	"slices"

	"github.com/quivermq/quiver/core/message"
)

// Check is one check-back: the question "what became of this half
// message?" put to a producer of its group.
type Check struct {
	// Group is the half message's producer group (PGROUP).
	Group string
	// Message is the half message under its real topic and queue, with
	// TRANSACTION_CHECK_TIMES = Times; its CommitLogOffset and QueueOffset
	// are the half message's (what an EndRequest names). Borrowed: valid
	// during the call only (clone what is kept).
	Message *message.Ext
	// Times counts this check-back (1 for the first).
	Times int32
}

// CheckTransport carries check-backs to producers that are not 4.x
// remoting connections of the broker: the gRPC endpoint registers one that
// sends RecoverOrphanedTransactionCommand on a 5.x producer's Telemetry
// stream. The service asks the registered transports in registration
// order before the group's remoting producers (CHECK_TRANSACTION_STATE).
type CheckTransport interface {
	// CheckBack puts c to one producer of c.Group it serves and reports
	// true once the question is on its way (the answer comes back as an
	// End with FromCheck); false when it has no producer to ask about this
	// half message, and the service tries the next transport. It must not
	// block for long: it runs in the check loop.
	CheckBack(ctx context.Context, c Check) bool
}

type namedTransport struct {
	name string
	t    CheckTransport
}

// AddCheckTransport registers a check transport under a name (logged with
// each check-back it carries); the returned function removes it, for a
// transport that stops before the service.
func (s *Service) AddCheckTransport(name string, t CheckTransport) (remove func()) {
	nt := &namedTransport{name: name, t: t}
	s.mu.Lock()
	s.transports = append(slices.Clip(s.transports), nt)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.transports = slices.DeleteFunc(slices.Clone(s.transports), func(x *namedTransport) bool { return x == nt })
	}
}
