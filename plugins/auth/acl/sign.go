package acl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strconv"
	"time"
)

// extFields keys of ACL 1.0.
const (
	KeyAccessKey     = "AccessKey"
	KeySignature     = "Signature"
	KeySecurityToken = "SecurityToken"
	// KeyUniqueKeyQuery is MixAll.UNIQUE_MSG_QUERY_FLAG, which Java's
	// server leaves out of the signed content.
	KeyUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Content is the signed content as Java's PlainAccessResource.parse builds
// it: the values of all extFields except Signature and _UNIQUE_KEY_QUERY,
// in key order, concatenated, followed by the body.
func Content(ext map[string]string, body []byte) []byte {
	return content(ext, body, KeySignature, KeyUniqueKeyQuery)
}

// GoClientContent is the content the official Go client signs: the same,
// except that SecurityToken is left out and _UNIQUE_KEY_QUERY is kept
// (internal/remote/interceptor.go ACLInterceptor puts the token in the map
// but never in the sorted key list; spec §8.1).
func GoClientContent(ext map[string]string, body []byte) []byte {
	return content(ext, body, KeySignature, KeySecurityToken)
}

func content(ext map[string]string, body []byte, skip ...string) []byte {
	keys := make([]string, 0, len(ext))
	n := len(body)
outer:
	for k, v := range ext {
		for _, s := range skip {
			if k == s {
				continue outer
			}
		}
		keys = append(keys, k)
		n += len(v)
	}
	sort.Strings(keys)
	buf := make([]byte, 0, n)
	for _, k := range keys {
		buf = append(buf, ext[k]...)
	}
	return append(buf, body...)
}

// Signature is Base64(HMAC-SHA1(secretKey, content)), standard padded
// Base64, as Java's AclSigner and the Go client's calculateSignature.
func Signature(secretKey, content []byte) string {
	mac := hmac.New(sha1.New, secretKey)
	mac.Write(content)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Sign adds AccessKey (and SecurityToken when token is not empty) to ext
// and then Signature, computed over Content: what a Java client's
// AclClientRPCHook does, and what Quiver's own client should do. ext must
// not be nil.
func Sign(ext map[string]string, body []byte, accessKey, secretKey, token string) {
	delete(ext, KeySignature)
	ext[KeyAccessKey] = accessKey
	if token != "" {
		ext[KeySecurityToken] = token
	}
	ext[KeySignature] = Signature([]byte(secretKey), Content(ext, body))
}

// verifySignature checks sig against the Java content and, when they
// differ, the Go client's, in constant time.
func verifySignature(secretKey []byte, ext map[string]string, body []byte, sig string) bool {
	if sig == "" {
		return false
	}
	ok := hmac.Equal([]byte(sig), []byte(Signature(secretKey, Content(ext, body))))
	_, tok := ext[KeySecurityToken]
	_, uniq := ext[KeyUniqueKeyQuery]
	if tok || uniq {
		// Both are computed so that the time does not tell which matched.
		alt := hmac.Equal([]byte(sig), []byte(Signature(secretKey, GoClientContent(ext, body))))
		ok = ok || alt
	}
	return ok
}

// Strict signatures (auth.acl.strict_signatures). An ACL 1.0 signature covers
// the values of the extFields and the body, but not the request code, not
// the keys, and no time: a captured request can be sent again (a SEND
// stores another copy) or re-sent under another code whose fields it
// happens to carry (a signed GET_ROUTEINFO for topic T, re-sent as
// DELETE_TOPIC_IN_BROKER, deletes T), and bytes can move between adjacent
// values. A strict signature adds three extFields and signs all of it,
// unambiguously:
//
//	QuiverSignVersion: 2
//	QuiverTs:          milliseconds since the Unix epoch
//	QuiverNonce:       16 random bytes, hex
//	Signature:         Base64(HMAC-SHA1(secretKey, StrictContent))
//
// StrictContent is "QuiverSign2", 0, the decimal request code, 0, then for
// each extField but Signature in key order uvarint(len(key)) key
// uvarint(len(value)) value, then uvarint(len(body)) body. The server
// accepts a timestamp within auth.acl.signature_window of its clock and each
// (accessKey, nonce) once.
const (
	KeySignVersion = "QuiverSignVersion"
	KeyTimestamp   = "QuiverTs"
	KeyNonce       = "QuiverNonce"
	// SignVersion2 is the only strict version.
	SignVersion2 = "2"
)

const strictPrefix = "QuiverSign2"

// StrictContent is the content of a strict signature (see above).
func StrictContent(code int32, ext map[string]string, body []byte) []byte {
	keys := make([]string, 0, len(ext))
	n := len(strictPrefix) + 16 + len(body) + binary.MaxVarintLen64
	for k, v := range ext {
		if k == KeySignature {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	sort.Strings(keys)
	buf := make([]byte, 0, n)
	buf = append(buf, strictPrefix...)
	buf = append(buf, 0)
	buf = strconv.AppendInt(buf, int64(code), 10)
	buf = append(buf, 0)
	for _, k := range keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		v := ext[k]
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(body)))
	return append(buf, body...)
}

// SignStrict adds AccessKey (and SecurityToken when token is not empty),
// QuiverSignVersion, QuiverTs (now), a fresh QuiverNonce and then the
// strict Signature for a request with code. ext must not be nil.
func SignStrict(code int32, ext map[string]string, body []byte, accessKey, secretKey, token string, now time.Time) {
	delete(ext, KeySignature)
	ext[KeyAccessKey] = accessKey
	if token != "" {
		ext[KeySecurityToken] = token
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	ext[KeySignVersion] = SignVersion2
	ext[KeyTimestamp] = strconv.FormatInt(now.UnixMilli(), 10)
	ext[KeyNonce] = hex.EncodeToString(nonce[:])
	ext[KeySignature] = Signature([]byte(secretKey), StrictContent(code, ext, body))
}

// verifyStrict checks a strict signature in constant time.
func verifyStrict(secretKey []byte, code int32, ext map[string]string, body []byte, sig string) bool {
	if sig == "" {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(Signature(secretKey, StrictContent(code, ext, body))))
}

// VerifySignature reports whether ext's Signature is the ACL 1.0
// signature of secretKey over ext and body, as the Java client or the Go
// client computes it, compared in constant time. ACL 2.0
// (plugins/auth/acl/acl2) checks its users' signatures with it.
func VerifySignature(secretKey []byte, ext map[string]string, body []byte) bool {
	return verifySignature(secretKey, ext, body, ext[KeySignature])
}
