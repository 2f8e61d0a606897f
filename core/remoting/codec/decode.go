// Package codec is RocketMQ's RemotingCommand on the wire: the frame
// (header-length word, JSON or ROCKETMQ binary header, body), its decoding
// and encoding, and the Command a handler reads. It knows nothing of
// connections, calls or handlers (core/remoting).
//
// A request's decode, from the transport's frame to the fields its handler
// reads, stays in decode.go: Decode or DecodeWith splits the frame, the
// fast JSON parser (or the binary one) reads the header, and the
// extFields land in a pooled map or, for a send whose handler reads no
// map (Options.RawSends), as byte ranges of the header; the pools and the
// shared strings sit at the end of the file. The handler then reads the
// fields through Command (command.go: Ext, RawExtFields). Headers the
// fast parser does not take go to the reference decoder (reference.go),
// which is also the definition the fast path is fuzzed against; encoding
// is encode.go.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/quivermq/quiver/core/transport"
)

// ErrBadHeader reports a frame whose header cannot be decoded.
var ErrBadHeader = errors.New("remoting: malformed header")

// MaxHeaderSize bounds the header length accepted by Decode (the low 24
// bits allow 16 MiB; real headers are a few hundred bytes).
const MaxHeaderSize = 1 << 20

// Options say how DecodeWith decodes a connection's frames.
type Options struct {
	// RawSends keeps the extFields of SEND_MESSAGE, SEND_MESSAGE_V2 and
	// SEND_BATCH_MESSAGE requests without their map, as byte ranges of
	// the header in header order (Command.RawExtFields), with the same
	// checks as for the map. Ext, SetExt, ExtMap and the encoders build
	// the map on first use; the field ExtFields stays nil until then.
	// Whoever serves the request must promise that nothing reads that
	// field (remoting.Mode.NoExtMap).
	RawSends bool
	// Recycler, when set, takes the frame back when the command is
	// released (Command.Release).
	Recycler transport.FrameRecycler
}

// Decode parses a frame (without its total-length prefix) into a Command.
// The body aliases frame.
func Decode(frame []byte) (*Command, error) { return DecodeWith(frame, Options{}) }

// DecodeWith is Decode with o: what it accepts and refuses is Decode's.
func DecodeWith(frame []byte, o Options) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes has no header length", ErrBadHeader, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	st := byte(word >> 24)
	hl := int(word & 0xFFFFFF)
	if hl > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d exceeds frame of %d bytes", ErrBadHeader, hl, len(frame))
	}
	if hl > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header length %d exceeds %d", ErrBadHeader, hl, MaxHeaderSize)
	}
	hdr := frame[4 : 4+hl]
	var c *Command
	var err error
	switch st {
	case SerializeJSON:
		var ok bool
		if c, ok = decodeJSONHeaderFast(hdr, o.RawSends); !ok {
			c, err = decodeJSONHeaderStd(hdr)
		}
	case SerializeRocketMQ:
		c, err = decodeBinaryHeader(hdr, o.RawSends)
	default:
		return nil, fmt.Errorf("%w: unknown serialize type %d", ErrBadHeader, st)
	}
	if err != nil {
		var he *HeaderShapeError
		if errors.As(err, &he) {
			he.SerializeType = st
		}
		return nil, err
	}
	c.SerializeType = st
	return c.withFrame(frame, hl, o.Recycler), nil
}

// withFrame sets c's body, the part of frame after its header of hl
// bytes, and the recycler that takes frame back.
func (c *Command) withFrame(frame []byte, hl int, r transport.FrameRecycler) *Command {
	if body := frame[4+hl:]; len(body) > 0 {
		c.Body = body
	}
	if r != nil {
		c.frame, c.recycler = frame, r
	}
	return c
}

// decodeJSONHeaderFast parses the JSON header shape RocketMQ clients send
// without reflection. It accepts only input that encoding/json would decode
// to the same Command, and reports false for anything else (unusual
// spellings, escapes it does not handle, invalid UTF-8, numbers that are
// not plain int32s), so the caller falls back to the reference decoder,
// which stays the definition for odd input and for error messages. With
// rawSends a send request keeps its extFields without a map
// (Options.RawSends): its code must come before extFields (it does in the
// headers of the Go and Java clients), and a command that turns out not
// to be such a request gets its map built at the end.
func decodeJSONHeaderFast(b []byte, rawSends bool) (*Command, bool) {
	p := jsonParser{b: b}
	c := &Command{}
	// rawCode is the code of the command when its extFields were kept raw.
	var rawCode int32
	if !p.consume('{') {
		return nil, false
	}
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			key, ok := p.str()
			if !ok || !p.consume(':') {
				return nil, false
			}
			switch key {
			case "code":
				ok = p.intField(&c.Code)
			case "version":
				ok = p.intField(&c.Version)
			case "opaque":
				ok = p.intField(&c.Opaque)
			case "flag":
				ok = p.intField(&c.Flag)
			case "language":
				if p.peek() == '"' {
					c.Language, ok = p.str()
				} else {
					var n int32
					n, ok = p.int32()
					c.Language = languageNames[byte(n)]
				}
			case "remark":
				if p.null() {
					c.Remark = ""
				} else {
					c.Remark, ok = p.str()
				}
			case "extFields":
				c.releaseExt() // a repeated extFields replaces the first
				c.ExtFields = nil
				if rawSends && rawExtCode(c.Code) {
					c.raw, ok = p.extRaw()
					rawCode = c.Code
					break
				}
				// From the pool whatever the command: whether it goes back
				// is known once the code and flag are (below).
				c.ExtFields, ok = p.extFields()
				c.pooledExt = ok && c.ExtFields != nil
			case "serializeTypeCurrentRPC":
				ok = p.skipValue(0)
			default:
				if isHeaderFieldFold(key) {
					return nil, false // encoding/json matches keys case-insensitively
				}
				ok = p.skipValue(0)
			}
			if !ok {
				c.releaseExt()
				return nil, false
			}
			p.ws()
			if p.peek() == ',' {
				p.i++
				continue
			}
			if !p.consume('}') {
				return nil, false
			}
			break
		}
	}
	p.ws()
	if p.i != len(p.b) {
		c.releaseExt()
		return nil, false
	}
	if c.raw != nil && (c.Code != rawCode || c.Flag&FlagResponse != 0) {
		c.ensureExtMap() // the code changed after extFields, or a response
	}
	if !pooledExt(c) {
		c.pooledExt = false // the map stays with the command
	}
	if c.ExtFields == nil && c.raw == nil {
		c.ExtFields = map[string]string{}
	}
	return c, true
}

var headerFields = [...]string{"code", "version", "opaque", "flag", "language", "remark", "extfields"}

func isHeaderFieldFold(k string) bool {
	if len(k) > 9 {
		return false
	}
	var buf [9]byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		} else if c >= utf8.RuneSelf {
			return true // Unicode case folding (e.g. K for k): let encoding/json decide
		}
		buf[i] = c
	}
	l := string(buf[:len(k)])
	for _, f := range headerFields {
		if l == f {
			return true
		}
	}
	return false
}

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *jsonParser) consume(c byte) bool {
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

func (p *jsonParser) null() bool {
	if p.peek() == 'n' && len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// str parses a string value. Plain strings are returned without copying
// twice; escapes are decoded; invalid UTF-8 or raw control characters make
// it report false.
func (p *jsonParser) str() (string, bool) {
	s, ok := p.strBytes()
	if !ok {
		return "", false
	}
	if len(s) <= maxInterned {
		if v, ok := interned[string(s)]; ok { // no allocation for the lookup
			return v, true
		}
	}
	return string(s), true
}

// strBytes is str's bytes: the input's own when the string has no escapes
// (never nil), else a decoded copy.
func (p *jsonParser) strBytes() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

func (p *jsonParser) strEscaped(start int) ([]byte, bool) {
	// A decoded string is never longer than its escaped form (\uXXXX is
	// at most 3 bytes of UTF-8, a surrogate pair 4): sized to the closing
	// quote, out is allocated once. Sized to the part before the first
	// escape it grew by doubling, 4-5 allocations for a message's
	// properties (their \u0001/\u0002 separators are escapes).
	out := make([]byte, 0, escapedLen(p.b[start:], p.i-start))
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return nil, false
			}
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return nil, false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return nil, false // lone surrogate: encoding/json writes U+FFFD
				}
				p.i += 2
				r2, ok := p.hex4()
				if !ok {
					return nil, false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return nil, false
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

// escapedLen is the length of the string body b up to its closing quote
// (or all of b), scanning from i, where b[i] is a backslash.
func escapedLen(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return len(b)
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// intField reads an int header field leniently, as the reference decoder
// does (fastjson's rules): a plain integer, a string holding one, true or
// false, or null (left unset). Other numbers are left to the reference.
func (p *jsonParser) intField(dst *int32) bool {
	switch p.peek() {
	case '"':
		s, ok := p.str()
		if !ok {
			return false
		}
		v, set, problem := intFromString(s)
		if problem != "" {
			return false
		}
		if set {
			*dst = v
		}
		return true
	case 'n':
		return p.null()
	case 't':
		*dst = 1
		return p.lit("true")
	case 'f':
		*dst = 0
		return p.lit("false")
	}
	v, ok := p.int32()
	if ok {
		*dst = v
	}
	return ok
}

// int32 parses a plain JSON integer that fits in int32.
func (p *jsonParser) int32() (int32, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 11 || (n > 1 && p.b[digits] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// extFields parses the extFields object into a map from the pool (given
// back here if parsing fails).
func (p *jsonParser) extFields() (map[string]string, bool) {
	if p.null() {
		return nil, true
	}
	if !p.consume('{') {
		return nil, false
	}
	m := getExtMap()
	if !p.extFieldsInto(m) {
		putExtMap(m)
		return nil, false
	}
	return m, true
}

// extRaw parses the extFields object as extFields does, keeping its
// entries without a map; nil for null.
func (p *jsonParser) extRaw() (*rawExt, bool) {
	if p.null() {
		return nil, true
	}
	if !p.consume('{') {
		return nil, false
	}
	r := getRawExt()
	if !p.extRawInto(r) {
		putRawExt(r)
		return nil, false
	}
	return r, true
}

// extRawInto is extFieldsInto, appending the entries to r (a nil value for
// null) instead of setting them in a map.
func (p *jsonParser) extRawInto(r *rawExt) bool {
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		k, ok := p.strBytes()
		if !ok || !p.consume(':') {
			return false
		}
		var v []byte
		switch p.peek() {
		case '"':
			if v, ok = p.strBytes(); !ok {
				return false
			}
		case 'n':
			if !p.null() {
				return false
			}
		case 't':
			if !p.lit("true") {
				return false
			}
			v = litTrue
		case 'f':
			if !p.lit("false") {
				return false
			}
			v = litFalse
		default:
			lit, integer, ok := p.number()
			switch {
			case !ok:
				return false
			case integer:
				v = lit[:len(lit):len(lit)] // fastjson keeps an integer's text
			default:
				t, ok := numberText(string(lit))
				if !ok {
					return false
				}
				v = []byte(t)
			}
		}
		r.fields = append(r.fields, RawField{k, v})
		p.ws()
		if p.peek() == ',' {
			p.i++
			continue
		}
		return p.consume('}')
	}
}

func (p *jsonParser) extFieldsInto(m map[string]string) bool {
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		k, ok := p.str()
		if !ok || !p.consume(':') {
			return false
		}
		// The values Java's fastjson turns into a String (see
		// decodeJSONHeaderStd); objects and arrays go to the reference,
		// which refuses them.
		switch p.peek() {
		case '"':
			v, ok := p.str()
			if !ok {
				return false
			}
			m[k] = v
		case 'n':
			if !p.null() {
				return false
			}
			delete(m, k) // null: absent, as Java's header decoding sees it
		case 't':
			if !p.lit("true") {
				return false
			}
			m[k] = "true"
		case 'f':
			if !p.lit("false") {
				return false
			}
			m[k] = "false"
		default:
			lit, integer, ok := p.number()
			if !ok {
				return false
			}
			if integer {
				m[k] = internBytes(lit) // fastjson keeps an integer's text
			} else if v, ok := numberText(string(lit)); ok {
				m[k] = v
			} else {
				return false
			}
		}
		p.ws()
		if p.peek() == ',' {
			p.i++
			continue
		}
		return p.consume('}')
	}
}

// skipValue skips any JSON value, bounded in depth.
func (p *jsonParser) skipValue(depth int) bool {
	if depth > 32 {
		return false
	}
	switch p.peek() {
	case '"':
		_, ok := p.str()
		return ok
	case '{':
		p.i++
		if p.peek() == '}' {
			p.i++
			return true
		}
		for {
			if _, ok := p.str(); !ok || !p.consume(':') || !p.skipValue(depth+1) {
				return false
			}
			if p.peek() == ',' {
				p.i++
				continue
			}
			return p.consume('}')
		}
	case '[':
		p.i++
		if p.peek() == ']' {
			p.i++
			return true
		}
		for {
			if !p.skipValue(depth + 1) {
				return false
			}
			if p.peek() == ',' {
				p.i++
				continue
			}
			return p.consume(']')
		}
	case 't':
		return p.lit("true")
	case 'f':
		return p.lit("false")
	case 'n':
		return p.null()
	default:
		_, _, ok := p.number()
		return ok
	}
}

// number scans a JSON number, strict enough to match encoding/json's
// grammar; integer reports that it has no fraction or exponent.
func (p *jsonParser) number() (lit []byte, integer, ok bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	d := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == d || (p.i-d > 1 && p.b[d] == '0') {
		return nil, false, false
	}
	integer = true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		integer = false
		p.i++
		f := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == f {
			return nil, false, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		f := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == f {
			return nil, false, false
		}
	}
	return p.b[start:p.i], integer, true
}

func (p *jsonParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func decodeBinaryHeader(b []byte, rawSends bool) (*Command, error) {
	if len(b) < 21 {
		return nil, fmt.Errorf("%w: binary header of %d bytes is shorter than 21", ErrBadHeader, len(b))
	}
	be := binary.BigEndian
	c := &Command{
		Code:     int32(int16(be.Uint16(b[0:]))),
		Language: languageNames[b[2]],
		Version:  int32(int16(be.Uint16(b[3:]))),
		Opaque:   int32(be.Uint32(b[5:])),
		Flag:     int32(be.Uint32(b[9:])),
	}
	p := 13
	rl := int(int32(be.Uint32(b[p:])))
	p += 4
	if rl < 0 || rl > len(b)-p {
		return nil, fmt.Errorf("%w: remark length %d", ErrBadHeader, rl)
	}
	c.Remark = string(b[p : p+rl])
	p += rl
	if len(b)-p < 4 {
		return nil, fmt.Errorf("%w: missing extFields length", ErrBadHeader)
	}
	el := int(int32(be.Uint32(b[p:])))
	p += 4
	if el < 0 || el > len(b)-p {
		return nil, fmt.Errorf("%w: extFields length %d", ErrBadHeader, el)
	}
	ext := b[p : p+el]
	var err error
	if c.Flag&FlagResponse == 0 && rawSends && rawExtCode(c.Code) {
		r := getRawExt()
		for len(ext) > 0 {
			var k, v []byte
			if k, v, ext, err = nextBinaryPair(ext); err != nil {
				putRawExt(r)
				return nil, err
			}
			r.fields = append(r.fields, RawField{k, v})
		}
		c.raw = r
		return c, nil
	}
	if pooledExt(c) {
		c.ExtFields, c.pooledExt = getExtMap(), true
	} else {
		c.ExtFields = make(map[string]string)
	}
	for len(ext) > 0 {
		var k, v []byte
		if k, v, ext, err = nextBinaryPair(ext); err != nil {
			return nil, err
		}
		c.ExtFields[internBytes(k)] = internBytes(v)
	}
	return c, nil
}

// nextBinaryPair reads the key and value at the start of a binary
// extFields block (the value non-nil, empty or not) and returns the rest.
func nextBinaryPair(ext []byte) (k, v, rest []byte, err error) {
	be := binary.BigEndian
	if len(ext) < 2 {
		return nil, nil, nil, fmt.Errorf("%w: truncated extFields key length", ErrBadHeader)
	}
	kl := int(be.Uint16(ext))
	ext = ext[2:]
	if kl > len(ext) {
		return nil, nil, nil, fmt.Errorf("%w: extFields key length %d", ErrBadHeader, kl)
	}
	k = ext[:kl]
	ext = ext[kl:]
	if len(ext) < 4 {
		return nil, nil, nil, fmt.Errorf("%w: truncated extFields value length", ErrBadHeader)
	}
	vl := int(int32(be.Uint32(ext)))
	ext = ext[4:]
	if vl < 0 || vl > len(ext) {
		return nil, nil, nil, fmt.Errorf("%w: extFields value length %d", ErrBadHeader, vl)
	}
	return k, ext[:vl:vl], ext[vl:], nil
}

// The extFields maps of SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and
// PULL_MESSAGE requests, and of responses, are recycled: they are a
// quarter of a broker's allocations under a publish load, and every
// request fills one of about the same size. The ownership rule: Decode
// takes the map from the pool for such a command (Command.pooledExt);
// only Release gives it back: the router's, after a handler that keeps
// nothing (remoting.Mode.KeepsNothing) returned, or a caller's done with
// a response (consumer.PullEach). A pooled map that is never released is
// simply collected.

// The request codes the codec treats apart (remoting/codes.go names them
// all; TestCodecCodes checks these against it).
const (
	sendMessage      int32 = 10
	pullMessage      int32 = 11
	sendMessageV2    int32 = 310
	sendBatchMessage int32 = 320
)

// pooledExt reports whether c's decoded header map may go back to the
// pool (its code and flag known): a response's, a send's or a pull's.
func pooledExt(c *Command) bool {
	return c.Flag&FlagResponse != 0 || c.Code == pullMessage || rawExtCode(c.Code)
}

// rawExtCode reports the request codes whose extFields may be kept
// without a map (Options.RawSends), the sends: their maps are pooled, so
// that a map built late goes back to the pool too.
func rawExtCode(code int32) bool {
	return code == sendMessage || code == sendMessageV2 || code == sendBatchMessage
}

// extMapSize is about the fields of SEND_MESSAGE_V2 (a..n) and PULL_MESSAGE.
const extMapSize = 16

// A new map starts small and grows to what its command needs (most
// responses are not given back, and carry a few fields); one that comes
// back keeps its size.
var extMapPool = sync.Pool{New: func() any { return make(map[string]string) }}

func getExtMap() map[string]string { return extMapPool.Get().(map[string]string) }

func putExtMap(m map[string]string) {
	if len(m) > 4*extMapSize {
		return // an odd request grew it: let it go rather than keep it
	}
	clear(m)
	extMapPool.Put(m)
}

// releaseExt gives a pooled ExtFields map (or the entries kept without a
// map) back and leaves c without one.
func (c *Command) releaseExt() {
	c.releaseRaw()
	if !c.pooledExt {
		return
	}
	m := c.ExtFields
	c.ExtFields, c.pooledExt = nil, false
	if m != nil {
		putExtMap(m)
	}
}

// rawExt is a pooled list of RawFields.
type rawExt struct{ fields []RawField }

var rawExtPool = sync.Pool{New: func() any { return &rawExt{fields: make([]RawField, 0, extMapSize)} }}

func getRawExt() *rawExt { return rawExtPool.Get().(*rawExt) }

func putRawExt(r *rawExt) {
	if cap(r.fields) > 4*extMapSize {
		return // an odd request grew it
	}
	clear(r.fields) // no references into a recycled frame
	r.fields = r.fields[:0]
	rawExtPool.Put(r)
}

// ensureExtMap builds c's ExtFields map from entries kept without one, as
// the decoder would have built it.
func (c *Command) ensureExtMap() {
	r := c.raw
	if r == nil {
		return
	}
	c.raw = nil
	m := getExtMap()
	for _, f := range r.fields {
		k := internBytes(f.Key)
		if f.Value == nil {
			delete(m, k) // null: absent, as Java's header decoding sees it
			continue
		}
		m[k] = internBytes(f.Value)
	}
	putRawExt(r)
	c.ExtFields, c.pooledExt = m, true
}

// releaseRaw drops entries kept without a map.
func (c *Command) releaseRaw() {
	if r := c.raw; r != nil {
		c.raw = nil
		putRawExt(r)
	}
}

// litTrue and litFalse are the values of JSON true and false (read-only).
var litTrue, litFalse = []byte("true"), []byte("false")

// interned are the strings every request header repeats: the JSON header's
// own keys, the extFields keys of sends and pulls (RocketMQ 4.x names and
// the single-letter SEND_MESSAGE_V2 ones) and common small values. str
// returns these shared copies instead of allocating a string for each.
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC",
		"GO", "JAVA", "CPP", "JSON", "ROCKETMQ",
		"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
		"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes", "bname",
		"consumerGroup", "queueOffset", "maxMsgNums", "commitOffset", "suspendTimeoutMillis", "subscription",
		"subVersion", "expressionType", "msgId", "offset", "transactionId", "brokerName", "TBW102", "TAG", "SQL92", "*",
		"0", "1", "2", "3", "4", "8", "16", "-1", "true", "false", "",
	} {
		m[s] = s
	}
	return m
}()

const maxInterned = 24

// internBytes is string(b), shared for the interned strings.
func internBytes(b []byte) string {
	if len(b) <= maxInterned {
		if v, ok := interned[string(b)]; ok {
			return v
		}
	}
	return string(b)
}
