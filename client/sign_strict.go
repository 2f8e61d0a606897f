package client

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

	"github.com/quivermq/quiver/core/remoting"
)

// signStrict signs req with Quiver's strict signature (the server side is
// plugins/auth/acl sign.go, StrictContent): HMAC-SHA1 over "QuiverSign2",
// 0, the decimal request code, 0, then each extField but Signature in key
// order as uvarint(len(key)) key uvarint(len(value)) value, then
// uvarint(len(body)) body; with QuiverSignVersion 2, QuiverTs (Unix ms)
// and a random QuiverNonce among the signed fields.
func (c *Client) signStrict(req *remoting.Command, now time.Time) {
	ext := req.ExtFields
	delete(ext, "Signature")
	ext["AccessKey"] = c.opts.accessKey
	if c.opts.securityToken != "" {
		ext["SecurityToken"] = c.opts.securityToken
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // never fails (Go 1.24+)
	ext["QuiverSignVersion"] = "2"
	ext["QuiverTs"] = strconv.FormatInt(now.UnixMilli(), 10)
	ext["QuiverNonce"] = hex.EncodeToString(nonce[:])
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(c.opts.secretKey))
	var buf [binary.MaxVarintLen64]byte
	uv := func(n int) { mac.Write(buf[:binary.PutUvarint(buf[:], uint64(n))]) }
	mac.Write([]byte("QuiverSign2\x00"))
	mac.Write(strconv.AppendInt(nil, int64(req.Code), 10))
	mac.Write([]byte{0})
	for _, k := range keys {
		uv(len(k))
		mac.Write([]byte(k))
		uv(len(ext[k]))
		mac.Write([]byte(ext[k]))
	}
	if len(req.BodyParts) > 0 {
		n := 0
		for _, b := range req.BodyParts {
			n += len(b)
		}
		uv(n)
		for _, b := range req.BodyParts {
			mac.Write(b)
		}
	} else {
		uv(len(req.Body))
		mac.Write(req.Body)
	}
	ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
