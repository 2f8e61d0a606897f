package acl

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"

	"github.com/quivermq/quiver/core/auth"
)

var _ auth.HMACAuthenticator = (*ACL)(nil)

// AuthenticateHMAC implements auth.HMACAuthenticator for RocketMQ 5
// clients over gRPC, with Authenticate's order: a globally white-listed
// address is trusted; then the access key must name an account; an address
// in the account's whiteRemoteAddress is trusted for it; else req.MAC must
// equal HMAC-SHA1(secretKey, req.Content), compared in constant time (Java's
// PlainPermissionManager.validate over the content the proxy builds from
// x-mq-date-time). auth.acl.strict_signatures=require refuses these signatures
// as it refuses ACL 1.0 ones: they bind neither the call nor a nonce.
func (a *ACL) AuthenticateHMAC(_ context.Context, req auth.HMACRequest) (auth.Principal, error) {
	r := a.rules.Load()
	ip, hasIP := remoteIP(req.RemoteAddr)
	if hasIP && r.global(ip) {
		return auth.Principal{Trusted: true}, nil
	}
	if req.AccessKey == "" {
		return auth.Principal{}, unauthenticated("No accessKey is configured")
	}
	acct, ok := r.accounts[req.AccessKey]
	if !ok {
		return auth.Principal{}, unauthenticated("No acl config for %s", req.AccessKey)
	}
	p := auth.Principal{AccessKey: acct.accessKey, Admin: acct.admin, Cluster: acct.cluster}
	if hasIP && acct.white(ip) {
		p.Trusted = true
		return p, nil
	}
	if a.signMode == SignRequire {
		return auth.Principal{}, unauthenticated("a strict signature is required for accessKey=%s (auth.acl.strict_signatures=require): RocketMQ 5 client signatures are refused", req.AccessKey)
	}
	mac := hmac.New(sha1.New, acct.secretKey)
	mac.Write(req.Content)
	if len(req.MAC) == 0 || !hmac.Equal(req.MAC, mac.Sum(nil)) {
		return auth.Principal{}, unauthenticated("Check signature failed for accessKey=%s", req.AccessKey)
	}
	return p, nil
}
