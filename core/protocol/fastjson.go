package protocol

// Java's fastjson bodies: tables keyed by MessageQueue objects
// ({"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}),
// integer keys written bare ({0:5}), and what fastjson's default parser
// features accept on input (unquoted and single-quoted names and strings,
// arbitrary commas, comments). encoding/json reads none of it, so
// FastjsonToJSON rewrites such a body into standard JSON first: a key that
// is an object or a number becomes a string holding its JSON text, which
// MQTable and ParseMQKey turn back into a MessageQueue.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of FastjsonToJSON: bodies come from the network.
const (
	// MaxFastjsonSize is the largest body read (the largest remoting
	// frame is smaller).
	MaxFastjsonSize = 64 << 20
	// MaxFastjsonDepth is the deepest nesting of objects and arrays read
	// (Java's deepest table, a ConsumeStatsList, nests six).
	MaxFastjsonDepth = 64
)

// ErrFastjson is matched by every error of FastjsonToJSON.
var ErrFastjson = errors.New("protocol: bad fastjson")

// FastjsonError says where and why a body is not fastjson.
type FastjsonError struct {
	Offset  int // byte offset in the body
	Problem string
}

func (e *FastjsonError) Error() string {
	return fmt.Sprintf("protocol: bad fastjson at byte %d: %s", e.Offset, e.Problem)
}

// Is makes errors.Is(err, ErrFastjson) true.
func (e *FastjsonError) Is(target error) bool { return target == ErrFastjson }

// FastjsonToJSON rewrites body, as Java's fastjson (1.2.x, default parser
// features) reads it, into standard JSON:
//   - object keys that are objects ({"brokerName":..}:5) or numbers (0:5)
//     become strings holding their JSON text; unquoted names (topic:"t")
//     and single-quoted ones become ordinary string keys;
//   - single-quoted strings, fastjson's extra escapes (\' \v \xHH \0-\7)
//     and raw control characters in strings become standard strings;
//   - runs of commas and trailing commas (AllowArbitraryCommas), /* */
//     and // comments, and number suffixes (5L, 1.5D) are dropped; a
//     number's leading zeros too; undefined reads as null.
//
// It refuses bodies over MaxFastjsonSize, nesting deeper than
// MaxFastjsonDepth and anything else (a *FastjsonError).
func FastjsonToJSON(body []byte) ([]byte, error) {
	if len(body) > MaxFastjsonSize {
		return nil, &FastjsonError{Offset: 0, Problem: fmt.Sprintf("%d bytes exceeds the limit of %d", len(body), MaxFastjsonSize)}
	}
	r := fjReader{s: body, out: make([]byte, 0, len(body)+len(body)/8+16)}
	r.ws()
	if r.i >= len(r.s) {
		return nil, r.errf("empty body")
	}
	if err := r.value(); err != nil {
		return nil, err
	}
	r.ws()
	if r.i < len(r.s) {
		return nil, r.errf("unexpected %q after the value", r.s[r.i])
	}
	return r.out, nil
}

// UnmarshalFastjson decodes a fastjson body into v with encoding/json,
// after FastjsonToJSON. Fields keyed by MessageQueue are read with an
// MQTable.
func UnmarshalFastjson(body []byte, v any) error {
	std, err := FastjsonToJSON(body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(std, v); err != nil {
		return fmt.Errorf("protocol: decode fastjson: %w", err)
	}
	return nil
}

// MQTable is a Java Map<MessageQueue, V> as fastjson writes it. It reads
// (as a field decoded by UnmarshalFastjson, or on its own from standard
// JSON) an object whose keys are MessageQueue objects or strings holding
// one, gson's array of [queue, value] pairs, or null. A value written as
// a string holding the JSON of V ("5" for a number) is accepted, as
// fastjson accepts it.
type MQTable[V any] map[MessageQueue]V

// UnmarshalJSON implements json.Unmarshaler.
func (t *MQTable[V]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	out := MQTable[V]{}
	switch {
	case bytes.Equal(b, []byte("null")):
	case len(b) > 0 && b[0] == '[':
		var pairs [][]json.RawMessage
		if err := json.Unmarshal(b, &pairs); err != nil {
			return fmt.Errorf("protocol: message queue table: %w", err)
		}
		for i, p := range pairs {
			if len(p) != 2 {
				return fmt.Errorf("protocol: message queue table: pair %d has %d elements, want 2", i, len(p))
			}
			mq, err := ParseMQKey(p[0])
			if err != nil {
				return err
			}
			v, err := decodeLenient[V](p[1])
			if err != nil {
				return fmt.Errorf("protocol: message queue table: value of %s: %w", mqName(mq), err)
			}
			out[mq] = v
		}
	default:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("protocol: message queue table: %w", err)
		}
		for k, raw := range m {
			mq, err := ParseMQKey([]byte(k))
			if err != nil {
				return err
			}
			v, err := decodeLenient[V](raw)
			if err != nil {
				return fmt.Errorf("protocol: message queue table: value of %s: %w", mqName(mq), err)
			}
			out[mq] = v
		}
	}
	*t = out
	return nil
}

// decodeLenient decodes raw into a V; a JSON string that does not decode
// is tried again as the JSON it holds ("5" for an int64).
func decodeLenient[V any](raw json.RawMessage) (V, error) {
	var v V
	err := json.Unmarshal(raw, &v)
	if err == nil {
		return v, nil
	}
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		var w V
		if json.Unmarshal([]byte(strings.TrimSpace(s)), &w) == nil {
			return w, nil
		}
	}
	return v, err
}

// mqName is topic@brokerName@queueId, for messages.
func mqName(mq MessageQueue) string {
	return mq.Topic + "@" + mq.BrokerName + "@" + strconv.Itoa(int(mq.QueueID))
}

// ParseMQKey reads one MessageQueue map key: an object (fastjson or
// standard JSON, fields in any order and case, unknown ones ignored, as
// fastjson does) or a JSON string holding one. queueId may be a number or
// a string holding one; missing fields keep their zero values, as in Java.
func ParseMQKey(key []byte) (MessageQueue, error) {
	var mq MessageQueue
	std, err := FastjsonToJSON(key)
	if err != nil {
		return mq, fmt.Errorf("protocol: message queue key %.100q: %w", key, err)
	}
	if len(std) > 0 && std[0] == '"' {
		var s string
		if err := json.Unmarshal(std, &s); err != nil {
			return mq, fmt.Errorf("protocol: message queue key %.100q: %w", key, err)
		}
		if std, err = FastjsonToJSON([]byte(s)); err != nil {
			return mq, fmt.Errorf("protocol: message queue key %.100q: %w", key, err)
		}
	}
	var fields map[string]json.RawMessage
	if len(std) == 0 || std[0] != '{' || json.Unmarshal(std, &fields) != nil {
		return mq, fmt.Errorf("protocol: message queue key %.100q is not an object", key)
	}
	for name, raw := range fields {
		switch {
		case strings.EqualFold(name, "topic"):
			mq.Topic, err = lenientString(raw)
		case strings.EqualFold(name, "brokerName"):
			mq.BrokerName, err = lenientString(raw)
		case strings.EqualFold(name, "queueId"):
			mq.QueueID, err = lenientInt32(raw)
		}
		if err != nil {
			return mq, fmt.Errorf("protocol: message queue key %.100q: %s: %w", key, name, err)
		}
	}
	return mq, nil
}

// lenientString reads a string, null ("") or a number (its text).
func lenientString(raw json.RawMessage) (string, error) {
	switch {
	case len(raw) == 0:
		return "", errors.New("empty value")
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case string(raw) == "null":
		return "", nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil
	}
	return "", fmt.Errorf("%.40s is not a string", raw)
}

// lenientInt32 reads a number or a string holding one; null is 0.
func lenientInt32(raw json.RawMessage) (int32, error) {
	s := string(raw)
	if s == "null" {
		return 0, nil
	}
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		s = strings.TrimSpace(s)
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%.40q is not a 32-bit integer", s)
	}
	return int32(n), nil
}

// fjReader rewrites fastjson into standard JSON, appending to out.
type fjReader struct {
	s     []byte
	i     int
	out   []byte
	depth int
}

func (r *fjReader) errf(format string, args ...any) error {
	return &FastjsonError{Offset: r.i, Problem: fmt.Sprintf(format, args...)}
}

// ws skips whitespace and comments (fastjson's skipWhitespace).
func (r *fjReader) ws() {
	for r.i < len(r.s) {
		switch c := r.s[r.i]; c {
		case ' ', '\t', '\n', '\r', '\f', '\b':
			r.i++
		case '/':
			if r.i+1 >= len(r.s) {
				return
			}
			switch r.s[r.i+1] {
			case '/':
				j := bytes.IndexByte(r.s[r.i:], '\n')
				if j < 0 {
					r.i = len(r.s)
					return
				}
				r.i += j + 1
			case '*':
				j := bytes.Index(r.s[r.i+2:], []byte("*/"))
				if j < 0 {
					return // the caller reports the '/'
				}
				r.i += 2 + j + 2
			default:
				return
			}
		default:
			return
		}
	}
}

func (r *fjReader) value() error {
	if r.i >= len(r.s) {
		return r.errf("unexpected end, want a value")
	}
	switch c := r.s[r.i]; {
	case c == '{':
		return r.object()
	case c == '[':
		return r.array()
	case c == '"' || c == '\'':
		return r.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return r.number()
	default:
		for _, lit := range [...]struct{ in, out string }{{"true", "true"}, {"false", "false"}, {"null", "null"}, {"undefined", "null"}} {
			if bytes.HasPrefix(r.s[r.i:], []byte(lit.in)) && !identByte(r.at(r.i+len(lit.in))) {
				r.i += len(lit.in)
				r.out = append(r.out, lit.out...)
				return nil
			}
		}
		return r.errf("unexpected %q, want a value", c)
	}
}

func (r *fjReader) at(i int) byte {
	if i < len(r.s) {
		return r.s[i]
	}
	return 0
}

func (r *fjReader) enter() error {
	r.depth++
	if r.depth > MaxFastjsonDepth {
		return r.errf("nested deeper than %d", MaxFastjsonDepth)
	}
	return nil
}

func (r *fjReader) object() error {
	if err := r.enter(); err != nil {
		return err
	}
	r.i++ // '{'
	r.out = append(r.out, '{')
	n := 0
	for {
		r.ws()
		for r.at(r.i) == ',' { // arbitrary commas
			r.i++
			r.ws()
		}
		if r.i >= len(r.s) {
			return r.errf("unexpected end in an object")
		}
		if r.s[r.i] == '}' {
			r.i++
			r.out = append(r.out, '}')
			r.depth--
			return nil
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if err := r.key(); err != nil {
			return err
		}
		r.ws()
		if r.at(r.i) != ':' {
			return r.errf("want ':' after an object key")
		}
		r.i++
		r.out = append(r.out, ':')
		r.ws()
		if err := r.value(); err != nil {
			return err
		}
		n++
		r.ws()
		switch r.at(r.i) {
		case ',', '}':
		default:
			if r.i >= len(r.s) {
				return r.errf("unexpected end in an object")
			}
			return r.errf("unexpected %q in an object, want ',' or '}'", r.s[r.i])
		}
	}
}

// key writes one object key as a JSON string.
func (r *fjReader) key() error {
	c := r.s[r.i]
	switch {
	case c == '"' || c == '\'':
		return r.str()
	case c == '{' || c == '[':
		// An object key (a MessageQueue): its JSON text, as a string.
		start := len(r.out)
		var err error
		if c == '{' {
			err = r.object()
		} else {
			err = r.array()
		}
		if err != nil {
			return err
		}
		text := string(r.out[start:])
		r.out = appendQuoted(r.out[:start], text)
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := len(r.out)
		if err := r.number(); err != nil {
			return err
		}
		text := string(r.out[start:])
		r.out = appendQuoted(r.out[:start], text)
		return nil
	case identByte(c):
		j := r.i
		for j < len(r.s) && identByte(r.s[j]) {
			j++
		}
		r.out = appendQuoted(r.out, string(r.s[r.i:j]))
		r.i = j
		return nil
	}
	return r.errf("unexpected %q, want an object key", c)
}

// identByte is a byte of an unquoted name (fastjson: Java identifier
// parts; non-ASCII letters are taken as such).
func identByte(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80
}

// appendQuoted appends s (standard JSON text, valid UTF-8 or not) as a
// JSON string.
func appendQuoted(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = appendControl(out, c)
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

const hexDigits = "0123456789abcdef"

func appendControl(out []byte, c byte) []byte {
	return append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

func (r *fjReader) array() error {
	if err := r.enter(); err != nil {
		return err
	}
	r.i++ // '['
	r.out = append(r.out, '[')
	n := 0
	for {
		r.ws()
		for r.at(r.i) == ',' {
			r.i++
			r.ws()
		}
		if r.i >= len(r.s) {
			return r.errf("unexpected end in an array")
		}
		if r.s[r.i] == ']' {
			r.i++
			r.out = append(r.out, ']')
			r.depth--
			return nil
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if err := r.value(); err != nil {
			return err
		}
		n++
		r.ws()
		switch r.at(r.i) {
		case ',', ']':
		default:
			if r.i >= len(r.s) {
				return r.errf("unexpected end in an array")
			}
			return r.errf("unexpected %q in an array, want ',' or ']'", r.s[r.i])
		}
	}
}

// str rewrites a double- or single-quoted string.
func (r *fjReader) str() error {
	q := r.s[r.i]
	start := r.i
	r.i++
	r.out = append(r.out, '"')
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == q:
			r.i++
			r.out = append(r.out, '"')
			return nil
		case c == '"': // inside a single-quoted string
			r.out = append(r.out, '\\', '"')
			r.i++
		case c < 0x20:
			r.out = appendControl(r.out, c)
			r.i++
		case c == '\\':
			if r.i+1 >= len(r.s) {
				r.i = start
				return r.errf("unterminated string")
			}
			e := r.s[r.i+1]
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.out = append(r.out, '\\', e)
				r.i += 2
			case '\'':
				r.out = append(r.out, '\'')
				r.i += 2
			case 'v':
				r.out = appendControl(r.out, 0x0b)
				r.i += 2
			case '0', '1', '2', '3', '4', '5', '6', '7':
				r.out = appendControl(r.out, e-'0')
				r.i += 2
			case 'x':
				if r.i+3 >= len(r.s) || !isHex(r.s[r.i+2]) || !isHex(r.s[r.i+3]) {
					return r.errf("bad \\x escape")
				}
				r.out = append(r.out, '\\', 'u', '0', '0', r.s[r.i+2], r.s[r.i+3])
				r.i += 4
			case 'u':
				if r.i+5 >= len(r.s) || !isHex(r.s[r.i+2]) || !isHex(r.s[r.i+3]) || !isHex(r.s[r.i+4]) || !isHex(r.s[r.i+5]) {
					return r.errf("bad \\u escape")
				}
				r.out = append(r.out, r.s[r.i:r.i+6]...)
				r.i += 6
			default:
				return r.errf("bad escape \\%c", e)
			}
		default:
			r.out = append(r.out, c)
			r.i++
		}
	}
	r.i = start
	return r.errf("unterminated string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number rewrites -?digits(.digits)?([eE][+-]?digits)? with fastjson's
// type suffix dropped and leading zeros removed.
func (r *fjReader) number() error {
	start := r.i
	if r.s[r.i] == '-' {
		r.out = append(r.out, '-')
		r.i++
	}
	d := r.i
	for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
		r.i++
	}
	if r.i == d {
		return r.errf("bad number")
	}
	digits := r.s[d:r.i]
	for len(digits) > 1 && digits[0] == '0' {
		digits = digits[1:]
	}
	r.out = append(r.out, digits...)
	if r.at(r.i) == '.' {
		r.i++
		f := r.i
		for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
			r.i++
		}
		if r.i == f {
			return r.errf("bad number %q", r.s[start:r.i])
		}
		r.out = append(r.out, '.')
		r.out = append(r.out, r.s[f:r.i]...)
	}
	if c := r.at(r.i); c == 'e' || c == 'E' {
		r.out = append(r.out, c)
		r.i++
		if c := r.at(r.i); c == '+' || c == '-' {
			r.out = append(r.out, c)
			r.i++
		}
		f := r.i
		for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
			r.i++
		}
		if r.i == f {
			return r.errf("bad number %q", r.s[start:r.i])
		}
		r.out = append(r.out, r.s[f:r.i]...)
	}
	switch r.at(r.i) {
	case 'L', 'S', 'B', 'F', 'D':
		r.i++
	}
	if identByte(r.at(r.i)) {
		return r.errf("bad number %q", r.s[start:r.i+1])
	}
	return nil
}
