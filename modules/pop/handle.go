package pop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// A receipt handle is base64url(version | queue | offset | nonce | attempt
// | mac), where mac is the first 16 bytes of HMAC-SHA256 under the
// service's secret key over group, topic and the fields before it. The
// secret is random, made once per data directory and kept in it, so a
// handle stays valid across a restart, cannot be made up without the key,
// and a handle of one group or topic does not validate for another.
const (
	handleVersion = 1
	macLen        = 16
	handleFields  = 1 + 4 + 8 + 8 + 4
	handleLen     = handleFields + macLen
)

// ErrInvalidHandle is returned for a receipt handle that is malformed, was
// not made by this broker for this group and topic, or was replaced by a
// later one (the message was redelivered or its invisibility changed).
var ErrInvalidHandle = errors.New("pop: invalid receipt handle")

type handle struct {
	queue   int32
	offset  int64
	nonce   uint64
	attempt int32
}

func mac(key []byte, group, topic string, fields []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(group))
	h.Write([]byte{0})
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(fields)
	return h.Sum(nil)[:macLen]
}

func encodeHandle(key []byte, group, topic string, h handle) string {
	b := make([]byte, handleLen)
	b[0] = handleVersion
	binary.BigEndian.PutUint32(b[1:], uint32(h.queue))
	binary.BigEndian.PutUint64(b[5:], uint64(h.offset))
	binary.BigEndian.PutUint64(b[13:], h.nonce)
	binary.BigEndian.PutUint32(b[21:], uint32(h.attempt))
	copy(b[handleFields:], mac(key, group, topic, b[:handleFields]))
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeHandle(key []byte, group, topic, s string) (handle, error) {
	if len(s) > 2*handleLen {
		return handle{}, fmt.Errorf("%w: too long", ErrInvalidHandle)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != handleLen || b[0] != handleVersion {
		return handle{}, fmt.Errorf("%w: malformed", ErrInvalidHandle)
	}
	if !hmac.Equal(b[handleFields:], mac(key, group, topic, b[:handleFields])) {
		return handle{}, fmt.Errorf("%w: not issued for group %q topic %q", ErrInvalidHandle, group, topic)
	}
	return handle{
		queue:   int32(binary.BigEndian.Uint32(b[1:])),
		offset:  int64(binary.BigEndian.Uint64(b[5:])),
		nonce:   binary.BigEndian.Uint64(b[13:]),
		attempt: int32(binary.BigEndian.Uint32(b[21:])),
	}, nil
}
