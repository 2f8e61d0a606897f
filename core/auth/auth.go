// Package auth is the seam for authentication and authorization. An
// Authenticator identifies who sent a request; an Authorizer decides
// whether that principal may act on a resource. The default allows all.
// The conformance suite lives in authtest.
//
// # Authorization by the guard
//
// A plugin's Provider.Open returns an Authenticator and an Authorizer;
// those two declared interfaces are all a plugin needs. The kernel's guard
// (core/kernel/guard.go) checks every request before its handler runs:
//
//   - By default it calls Authenticate, then Authorize for what the
//     request code's row of the request-code table (core/remoting's
//     codeRows, read by core/kernel/guard_needs.go) needs: the row's
//     action (auth.Pub, auth.Sub or auth.Any) on each topic and group
//     (as %RETRY%<group>, IsGroup set) a header or a stored message
//     names; nothing more than a valid sender for public rows and for
//     names in a body (HEART_BEAT, (UN)LOCK_BATCH_MQ); a cluster member
//     (Principal.Cluster or Trusted) for cluster rows (REGISTER_BROKER,
//     HA_PULL, ...), a cluster member or auth.Admin for what a slave
//     copies from its master, and auth.Admin (on the zero Resource) for
//     the other rows. Codes clients serve, and codes without a row, are
//     refused, so that a code the table does not know is closed rather
//     than open.
//   - An Authenticator that also implements Checker decides by its own
//     table instead (RocketMQ's ACL knows which resources every code and
//     body names): the guard calls Check and nothing else.
//   - An Authenticator with a method Interceptor() remoting.Interceptor
//     (and no Checker) installs that interceptor as it is; it then owns the
//     whole decision, the process's own cluster credential included.
//
// A refusal is answered NO_PERMISSION with the error's message as the
// remark, so errors name what is missing and never a secret. The other
// optional interfaces (Signer, RequestSigner, AnswerFilter, ClusterSigner,
// AccountAdmin, HMACAuthenticator) are found by type assertion on the
// Authenticator. HMACAuthenticator checks the credential of RocketMQ 5
// clients (an HMAC over the x-mq-date-time header of each gRPC call):
// the gRPC endpoint (modules/grpc) refuses to start beside an auth plugin
// without it, and authtest checks its contract when a plugin has it.
// examples/custom-auth is a plugin written against the declared interfaces
// only.
package auth

import (
	"context"
	"errors"
	"log/slog"
)

// Sentinels.
var (
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	ErrDenied          = errors.New("auth: denied")
)

// Request is what an Authenticator sees of a remoting request.
//
// ExtFields and Body are borrowed for the duration of one call
// (Authenticate, Checker.Check, AnswerFilter.FilterAnswer,
// AccountAdmin.AuthorizeAdmin): for the hot request codes the map comes
// from the decoder's pool and Body aliases the network frame the request
// arrived in; once the handler returns, the router gives the map back to
// the pool and the frame back to the transport, and both are refilled by
// the next request. A plugin keeps nothing of either after it returns: it
// copies what it needs (strings read from the map may be kept, and a
// Principal holds only strings). authtest.CheckBorrowedInputs checks it.
type Request struct {
	Code       int32
	RemoteAddr string
	ExtFields  map[string]string // borrowed; never written by a plugin
	Body       []byte            // borrowed; never written by a plugin
	// Lookup finds the message stored at a commit-log offset, for codes
	// whose resource is a stored message's topic (VIEW_MESSAGE_BY_ID,
	// END_TRANSACTION, CONSUMER_SEND_MSG_BACK). Nil where the process
	// stores no messages (a name server): such checks then refuse.
	Lookup MessageLookup
}

// StoredMessage is what authorization reads of a stored message.
type StoredMessage struct {
	// Topic is the topic the message is stored under.
	Topic string
	// RealTopic is the REAL_TOPIC property of a message parked under a
	// system topic (a transaction's half message, a delayed message); ""
	// otherwise.
	RealTopic string
}

// MessageLookup reads the message stored at a commit-log offset.
type MessageLookup func(ctx context.Context, commitLogOffset int64) (StoredMessage, error)

// Principal is an authenticated identity.
type Principal struct {
	AccessKey string
	Admin     bool
	// Trusted is set for white-listed addresses that skip checks.
	Trusted bool
	// Cluster marks a cluster member (a broker): only cluster members may
	// register brokers with a name server, replicate (HA_PULL) and talk to
	// controllers. An ordinary account, admin included, is not one.
	Cluster bool
	// Remote is the client's address ("ip:port"), set by plugins whose
	// Authorize decides by it (ACL 2.0's source-IP conditions).
	Remote string
}

// Action is what a request does to a resource.
type Action uint8

// Actions (RocketMQ permission bits).
const (
	Any   Action = 2 // PUB or SUB, either will do
	Pub   Action = 4
	Sub   Action = 8
	Admin Action = 16
)

// Resource is a topic or group (groups as %RETRY%<group>, like RocketMQ).
type Resource struct {
	Name    string
	IsGroup bool
}

// Authenticator identifies the sender of a request.
type Authenticator interface {
	Authenticate(ctx context.Context, req Request) (Principal, error)
}

// Authorizer decides on an action.
type Authorizer interface {
	Authorize(ctx context.Context, p Principal, res Resource, act Action) error
}

// AllowAll authenticates everybody as a trusted admin and allows every
// action. It is the default when no auth plugin is enabled.
type AllowAll struct{}

var (
	_ Authenticator = AllowAll{}
	_ Authorizer    = AllowAll{}
)

// Authenticate implements Authenticator.
func (AllowAll) Authenticate(context.Context, Request) (Principal, error) {
	return Principal{Trusted: true, Admin: true}, nil
}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, Principal, Resource, Action) error { return nil }

// Deps are what the kernel hands an auth plugin.
type Deps struct{ Logger *slog.Logger }

// Provider describes an auth plugin (fx group "auth"), configured in the
// section auth.<ID>. Write one with Define (a typed config, no
// conversion by hand).
type Provider interface {
	ID() string
	NewConfig() any
	Open(ctx context.Context, cfg any, deps Deps) (Authenticator, Authorizer, error)
}
