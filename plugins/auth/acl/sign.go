package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"sort"
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
