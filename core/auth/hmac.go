package auth

import "context"

// HMACRequest is a credential proven by an HMAC-SHA1 over content other
// than a remoting request's: RocketMQ 5 clients sign the value of the
// x-mq-date-time header of each gRPC call with their secret key
// (authorization: MQv2-HMAC-SHA1 Credential=<AccessKey>, ...,
// Signature=<hex>).
//
// Content and MAC are borrowed for the duration of the call.
type HMACRequest struct {
	RemoteAddr string
	// AccessKey is the account the sender claims; empty when the request
	// carries no credential (a white-listed address may still pass).
	AccessKey string
	// Content is what was signed; MAC is the signature as sent (raw bytes,
	// hex-decoded), to be compared with HMAC-SHA1(secretKey, Content).
	Content []byte
	MAC     []byte
}

// HMACAuthenticator is an optional interface of an Authenticator whose
// accounts hold secret keys. AuthenticateHMAC applies the same rules as
// Authenticate (white lists first, then the account, then the signature,
// compared in constant time) to a credential of another protocol; the
// gRPC endpoint for RocketMQ 5 clients needs it and refuses to start
// beside an auth plugin without it. A refusal wraps ErrUnauthenticated and
// its message is fit for the client (never a secret). The Principal is
// then authorized with the plugin's Authorizer, as for remoting requests.
type HMACAuthenticator interface {
	AuthenticateHMAC(ctx context.Context, req HMACRequest) (Principal, error)
}
