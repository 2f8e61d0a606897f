package acl

import (
	"github.com/quivermq/quiver/core/auth"

	"strconv"
	"time"
)

// verify checks req's signature: a strict one (QuiverSignVersion, see
// sign.go) with its request code, time window and nonce; else an ACL 1.0
// one, unless auth.acl.strict_signatures is require. consume records the
// nonce (a second request with it is a replay).
func (a *ACL) verify(acct *account, req auth.Request, consume bool) error {
	ext, ak := req.ExtFields, acct.accessKey
	v, strict := ext[KeySignVersion]
	if !strict {
		if a.signMode == SignRequire {
			return unauthenticated("a strict signature is required for accessKey=%s (auth.acl.strict_signatures=require): ACL 1.0 signatures are refused", ak)
		}
		if !verifySignature(acct.secretKey, ext, req.Body, ext[KeySignature]) {
			return unauthenticated("Check signature failed for accessKey=%s", ak)
		}
		return nil
	}
	if v != SignVersion2 {
		return unauthenticated("unknown %s %q for accessKey=%s", KeySignVersion, v, ak)
	}
	if !verifyStrict(acct.secretKey, req.Code, ext, req.Body, ext[KeySignature]) {
		return unauthenticated("Check signature failed for accessKey=%s (a strict signature covers the request code, here %d)", ak, req.Code)
	}
	ms, err := strconv.ParseInt(ext[KeyTimestamp], 10, 64)
	if err != nil {
		return unauthenticated("bad %s for accessKey=%s", KeyTimestamp, ak)
	}
	now := a.now()
	if d := now.Sub(time.UnixMilli(ms)); d > a.window || d < -a.window {
		return unauthenticated("the signature of accessKey=%s is dated %v from the server's clock, outside the %v window: a replayed request or a wrong clock",
			ak, d.Round(time.Second), a.window)
	}
	nonce := ext[KeyNonce]
	if len(nonce) < 16 || len(nonce) > 128 {
		return unauthenticated("bad %s for accessKey=%s (16 to 128 characters)", KeyNonce, ak)
	}
	if !consume {
		return nil
	}
	seen, full := a.nonces.add(ak+"\x00"+nonce, now)
	switch {
	case seen:
		return unauthenticated("replayed request refused: accessKey=%s has used this nonce already", ak)
	case full:
		a.log.Warn("acl: nonce cache full; strict requests are refused until the window turns (auth.acl.nonce_cache_size)", "size", a.nonces.max)
		return unauthenticated("too many signed requests in the signature window; retry later")
	}
	return nil
}
