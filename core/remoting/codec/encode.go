package codec

import (
	"encoding/binary"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendHeader appends the 4-byte serialize-type/header-length word and the
// header of c in its SerializeType, leaving the body to the caller.
func AppendHeader(b []byte, c *Command) []byte {
	c.ensureExtMap() // a request decoded without its map (Options.RawSends)
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	if c.SerializeType == SerializeRocketMQ {
		b = appendBinaryHeader(b, c)
	} else {
		b = appendJSONHeader(b, c)
	}
	hl := len(b) - start - 4
	binary.BigEndian.PutUint32(b[start:], uint32(c.SerializeType)<<24|uint32(hl))
	return b
}

// Encode returns the whole frame of c, without the total-length prefix.
// The body is c.BodyParts concatenated when set, else c.Body, as
// remoting.Peer.Send writes it.
func Encode(c *Command) []byte {
	b := AppendHeader(make([]byte, 0, 256+c.BodyLen()), c)
	return appendBody(b, c)
}

// EncodeWithLength returns the frame with its 4-byte total length in front,
// as it travels over a stream.
func EncodeWithLength(c *Command) []byte {
	b := AppendHeader(make([]byte, 4, 260+c.BodyLen()), c)
	b = appendBody(b, c)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// BodyLen is the length of the body c is sent with: BodyParts' when set,
// else Body's.
func (c *Command) BodyLen() int {
	if len(c.BodyParts) == 0 {
		return len(c.Body)
	}
	n := 0
	for _, p := range c.BodyParts {
		n += len(p)
	}
	return n
}

func appendBody(b []byte, c *Command) []byte {
	if len(c.BodyParts) == 0 {
		return append(b, c.Body...)
	}
	for _, p := range c.BodyParts {
		b = append(b, p...)
	}
	return b
}

// appendSortedKeys appends m's keys to keys, sorted; callers pass a stack
// array's slice so a small map's keys need no allocation.
func appendSortedKeys(keys []string, m map[string]string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// extShadowed reports whether f is hidden by an ExtFields entry (Ext reads
// the map first, and the header must not carry a key twice).
func (c *Command) extShadowed(f *ExtField) bool {
	if len(c.ExtFields) == 0 {
		return false
	}
	_, ok := c.ExtFields[f.Key]
	return ok
}

func appendJSONHeader(b []byte, c *Command) []byte {
	lang := c.Language
	if lang == "" {
		lang = ServerLanguage
	}
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(c.Code), 10)
	b = append(b, `,"extFields":{`...)
	first := true
	// Fields set without a map go first, in the order set: JSON readers
	// (the official Go client's encoding/json, Java's fastjson) decode
	// extFields into a map, so the order is free.
	for i := range c.ext {
		f := &c.ext[i]
		if c.extShadowed(f) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, f.Key)
		b = append(b, ':')
		b = appendJSONString(b, f.Value)
	}
	if len(c.ExtFields) > 0 {
		var buf [32]string
		for _, k := range appendSortedKeys(buf[:0], c.ExtFields) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, c.ExtFields[k])
		}
	}
	b = append(b, `},"flag":`...)
	b = strconv.AppendInt(b, int64(c.Flag), 10)
	b = append(b, `,"language":`...)
	b = appendJSONString(b, lang)
	b = append(b, `,"opaque":`...)
	b = strconv.AppendInt(b, int64(c.Opaque), 10)
	if c.Remark != "" {
		b = append(b, `,"remark":`...)
		b = appendJSONString(b, c.Remark)
	}
	b = append(b, `,"serializeTypeCurrentRPC":"JSON","version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping control characters,
// quotes, backslashes and invalid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendBinaryHeader(b []byte, c *Command) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, uint16(c.Code))
	lang := c.Language
	if lang == "" {
		lang = ServerLanguage // as the JSON header does
	}
	lc, ok := languageCodes[lang]
	if !ok {
		lc = languageCodes["OTHER"]
	}
	b = append(b, lc)
	b = be.AppendUint16(b, uint16(c.Version))
	b = be.AppendUint32(b, uint32(c.Opaque))
	b = be.AppendUint32(b, uint32(c.Flag))
	b = be.AppendUint32(b, uint32(len(c.Remark)))
	b = append(b, c.Remark...)
	lenPos := len(b)
	b = append(b, 0, 0, 0, 0)
	// Java's RocketMQSerializable and the Go client read these pairs into
	// a map: the order is free.
	for i := range c.ext {
		f := &c.ext[i]
		if c.extShadowed(f) {
			continue
		}
		b = appendBinaryPair(b, f.Key, f.Value)
	}
	if len(c.ExtFields) > 0 {
		var buf [32]string
		for _, k := range appendSortedKeys(buf[:0], c.ExtFields) {
			b = appendBinaryPair(b, k, c.ExtFields[k])
		}
	}
	be.PutUint32(b[lenPos:], uint32(len(b)-lenPos-4))
	return b
}

func appendBinaryPair(b []byte, k, v string) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, uint16(len(k)))
	b = append(b, k...)
	b = be.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}
