package auth

import "context"

// AnswerFilter is an optional interface of a Checker whose rules let an
// account see only part of some answers (a list of every topic, for an
// account that may use a few). FilterAnswer returns the body to send for
// req's successful answer: body itself for codes it does not narrow and
// for principals that see everything. It does not consume anything the
// request's Check consumed (a nonce): it runs after Check passed. An error
// wraps ErrUnauthenticated or ErrDenied.
type AnswerFilter interface {
	FilterAnswer(ctx context.Context, req Request, body []byte) ([]byte, error)
}

// ClusterSigner is an optional interface of an auth plugin that signs the
// process's own requests. ClusterCredential says why that credential
// cannot act as a cluster member's (none is configured, or the plugin's
// own rules know the account without the cluster role); nil when it can,
// or when the plugin cannot tell (the account is only known elsewhere).
type ClusterSigner interface {
	ClusterCredential() error
}
