package auth

import "context"

// Checker is an optional interface of an Authenticator that also knows
// which resources each request needs (for RocketMQ's ACL, the request code
// decides). Check authenticates req and authorizes all of them; a refusal
// wraps ErrUnauthenticated or ErrDenied and its message is fit for the
// client (it names what is missing, never a secret).
//
// Modules that cannot import plugins find it by type assertion:
//
//	if c, ok := authn.(auth.Checker); ok { ... c.Check(ctx, req) ... }
type Checker interface {
	Check(ctx context.Context, req Request) (Principal, error)
}

// Signer is an optional interface of auth plugins that sign the process's
// own outgoing requests (a broker registering with a name server that checks
// signatures). SignRequest adds the credentials to ext and reports false
// when it has none.
type Signer interface {
	SignRequest(ext map[string]string, body []byte) bool
}

// RequestNarrower is the optional interface of a plugin that lets a
// request through but narrows what it does: NarrowRequest returns the
// body the processor gets instead of req.Body (a new slice; req.Body is
// not written), or false to leave the request as it is. The guard calls
// it after a successful Check. ACL 1.0 drops from a heartbeat the
// producer groups the account holds no permission on, where RocketMQ 4.9
// checks only the consumer groups.
type RequestNarrower interface {
	NarrowRequest(ctx context.Context, p Principal, req Request) ([]byte, bool)
}
