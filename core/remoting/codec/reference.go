package codec

// The reference JSON header decoder: encoding/json tokenizes, and the
// values are read as Java's fastjson reads them. The fast parser
// (decode.go) hands it whatever it does not take, and is fuzzed against
// it (FuzzFastJSONHeader).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// HeaderShapeError is a frame whose framing is intact (its lengths hold and its
// JSON header is well-formed JSON) but whose header has a field of the
// wrong shape: extFields an array, code an object, a number out of range.
// The header's opaque, flag and code could be read, so a request can be
// answered with an error instead of dropping the connection. It matches
// ErrBadHeader with errors.Is.
type HeaderShapeError struct {
	// Field names the offending field ("extFields", "code",
	// "extFields.topic"), cut to a bounded length.
	Field string
	// Problem says what is wrong with it.
	Problem string
	// Code, Opaque and Flag are what the header carried (0 when absent).
	Code, Opaque, Flag int32
	// SerializeType is the header encoding, for the answer.
	SerializeType byte
}

func (e *HeaderShapeError) Error() string {
	return fmt.Sprintf("%v: field %s: %s", ErrBadHeader, e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrBadHeader) hold.
func (e *HeaderShapeError) Is(target error) bool { return target == ErrBadHeader }

// maxFieldName bounds a field name quoted in errors and answers: a header
// key can be up to MaxHeaderSize long and must not be echoed whole.
const maxFieldName = 64

func fieldName(prefix, k string) string {
	if len(k) > maxFieldName {
		k = strings.ToValidUTF8(k[:maxFieldName], "") + "..."
	}
	return prefix + k
}

// decodeJSONHeaderStd is the reference decoder: encoding/json tokenizes,
// and the values are read the way Java 4.9's fastjson reads them into
// RemotingCommand (its int fields, String remark and HashMap<String,String>
// extFields). Well-formed JSON with a field of the wrong shape gives a
// *HeaderShapeError; malformed JSON an ErrBadHeader the caller cannot answer.
//
// The leniency, as fastjson:
//   - extFields values that are JSON numbers keep their literal text when
//     integers (StringCodec returns numberString()); other numbers become
//     BigDecimal.toString() of the literal (1.50 stays "1.50", 1e3 becomes
//     "1E+3", 0.0000001 becomes "1E-7"); true and false become "true" and
//     "false"; null is an absent field (HashMap.put(k, null), and Java's
//     header decoding treats a null value as missing). Object and array
//     values are refused (fastjson would store their re-serialised JSON,
//     whose key order we cannot reproduce).
//   - code, version, opaque and flag accept integers, strings holding one
//     (TypeUtils.castToInt: "" and "null" leave the field unset, commas and
//     a trailing ".0…" are dropped, then Integer.parseInt), other numbers
//     truncated toward zero (BigDecimal.intValue), true/false as 1/0, and
//     null (unset). Values outside int32 are refused where Java would wrap
//     or throw.
//   - remark accepts a string, null, a number or a boolean (as text).
//   - keys match case-insensitively (fastjson's smartMatch, encoding/json),
//     a repeated key's last value wins, a repeated extFields replaces the
//     map, unknown keys are ignored.
//
// It is slower than the fast path (two passes, reflection) and runs only
// for input the fast path leaves to it.
func decodeJSONHeaderStd(b []byte) (*Command, error) {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v) // for the syntax error's message
		return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
	}
	c := &Command{}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
	}
	if tok == nil { // null: an empty header, as encoding/json always did
		c.ExtFields = map[string]string{}
		return c, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: json: %s where the header object belongs", ErrBadHeader, jsonKind(b))
	}
	var he *HeaderShapeError
	opaqueOK := true
	fail := func(field, problem string) {
		if he == nil {
			he = &HeaderShapeError{Field: field, Problem: problem}
		}
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: json: %v", ErrBadHeader, err)
		}
		switch name := canonicalHeaderKey(key); name {
		case "code", "version", "opaque", "flag":
			v, set, problem := lenientInt32(raw)
			if problem != "" {
				fail(fieldName("", key), problem)
				if name == "opaque" {
					opaqueOK = false
				}
				continue
			}
			if !set {
				continue
			}
			switch name {
			case "code":
				c.Code = v
			case "version":
				c.Version = v
			case "opaque":
				c.Opaque, opaqueOK = v, true
			default:
				c.Flag = v
			}
		case "language":
			c.Language = lenientLanguage(raw)
		case "remark":
			s, problem := lenientString(raw)
			if problem != "" {
				fail(fieldName("", key), problem)
			}
			c.Remark = s
		case "extFields":
			m, field, problem := lenientExtFields(raw)
			if problem != "" {
				fail(field, problem)
			}
			c.ExtFields = m
		}
	}
	if he != nil {
		if !opaqueOK {
			return nil, he.withoutAnswer()
		}
		he.Code, he.Opaque, he.Flag = c.Code, c.Opaque, c.Flag
		return nil, he
	}
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	return c, nil
}

// canonicalHeaderKey is the header field k names, matched case-insensitively
// (encoding/json's and fastjson's rule), or "".
func canonicalHeaderKey(k string) string {
	for _, f := range [...]string{"code", "version", "opaque", "flag", "language", "remark", "extFields"} {
		if strings.EqualFold(k, f) {
			return f
		}
	}
	return ""
}

// withoutAnswer is e as a plain ErrBadHeader: its opaque is unknown, so
// nobody could match an answer.
func (e *HeaderShapeError) withoutAnswer() error {
	return fmt.Errorf("%w: field %s: %s (and no readable opaque)", ErrBadHeader, e.Field, e.Problem)
}

// jsonKind names the kind of the JSON value raw starts with.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// lenientInt32 reads an int header field as fastjson's IntegerCodec does;
// set is false when the field stays unset (null, "", "null").
func lenientInt32(raw []byte) (v int32, set bool, problem string) {
	switch raw[0] {
	case 'n':
		return 0, false, ""
	case 't':
		return 1, true, ""
	case 'f':
		return 0, true, ""
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, "not a string"
		}
		return intFromString(s)
	case '{', '[':
		return 0, false, jsonKind(raw) + " where an integer belongs"
	}
	return intFromNumber(string(raw))
}

// intFromString is fastjson's TypeUtils.castToInt for a string: "", "null"
// and "NULL" leave the field unset; commas and a trailing "." with zeros
// are removed; the rest must be Integer.parseInt's [+-]digits in range.
func intFromString(s string) (int32, bool, string) {
	if s == "" || s == "null" || s == "NULL" {
		return 0, false, ""
	}
	if len(s) > 64 {
		return 0, false, "a string that is not an integer"
	}
	if strings.IndexByte(s, ',') >= 0 {
		s = strings.ReplaceAll(s, ",", "")
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 && strings.Trim(s[i+1:], "0") == "" {
		s = s[:i]
	}
	d := s
	if len(d) > 0 && (d[0] == '+' || d[0] == '-') {
		d = d[1:]
	}
	if d == "" || strings.Trim(d, "0123456789") != "" {
		return 0, false, "a string that is not an integer"
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false, "an integer outside int32"
	}
	return int32(v), true, ""
}

// intFromNumber converts a JSON number literal to int32: integers as they
// are, others truncated toward zero (BigDecimal.intValue).
func intFromNumber(lit string) (int32, bool, string) {
	d, ok := parseDecimal(lit)
	if !ok {
		return 0, false, "a number out of range"
	}
	s, ok := d.truncated()
	if !ok {
		return 0, false, "an integer outside int32"
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false, "an integer outside int32"
	}
	return int32(v), true, ""
}

// lenientLanguage reads the language as before: a name, or a binary
// header's language code; anything else leaves it empty.
func lenientLanguage(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if n, err := strconv.Atoi(string(raw)); err == nil {
		return languageNames[byte(n)]
	}
	return ""
}

// lenientString reads a String field or extFields value as fastjson's
// StringCodec does: a string, null (""), a number's text, true or false.
func lenientString(raw []byte) (string, string) {
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "not a string"
		}
		return s, ""
	case 'n':
		return "", ""
	case 't':
		return "true", ""
	case 'f':
		return "false", ""
	case '{', '[':
		return "", jsonKind(raw) + " where a string belongs"
	}
	s, ok := numberText(string(raw))
	if !ok {
		return "", "a number out of range"
	}
	return s, ""
}

// lenientExtFields reads the extFields object (null: none); on a problem
// it names the field.
func lenientExtFields(raw []byte) (map[string]string, string, string) {
	switch raw[0] {
	case 'n':
		return nil, "", ""
	case '{':
	default:
		return nil, "extFields", jsonKind(raw) + " where an object belongs"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() //nolint:errcheck // '{': raw is valid JSON
	m := map[string]string{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, "extFields", "malformed"
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, "extFields", "malformed"
		}
		if v[0] == 'n' {
			delete(m, k) // null: absent, as Java's header decoding sees it
			continue
		}
		s, problem := lenientString(v)
		if problem != "" {
			return nil, fieldName("extFields.", k), problem
		}
		m[k] = s
	}
	return m, "", ""
}

// decimal is a JSON number literal as java.math.BigDecimal holds it: the
// digits of its unscaled value (no leading zeros; "0" for zero), its sign
// and its scale (value = ±digits × 10^-scale).
type decimal struct {
	neg    bool
	digits string
	scale  int64
}

// parseDecimal reads a JSON number literal (the grammar is already checked
// by the caller's tokenizer); ok is false when the scale leaves int32, where
// BigDecimal's constructor throws.
func parseDecimal(lit string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(lit) && lit[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	intPart := lit[start:i]
	frac := ""
	if i < len(lit) && lit[i] == '.' {
		i++
		f := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
		frac = lit[f:i]
	}
	var exp int64
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		eneg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			eneg = lit[i] == '-'
			i++
		}
		e := strings.TrimLeft(lit[i:], "0")
		if len(e) > 10 {
			return d, false
		}
		exp, _ = strconv.ParseInt("0"+e, 10, 64)
		if eneg {
			exp = -exp
		}
		i = len(lit)
	}
	if i != len(lit) || intPart == "" {
		return d, false
	}
	d.digits = strings.TrimLeft(intPart+frac, "0")
	if d.digits == "" {
		d.digits, d.neg = "0", false
	}
	d.scale = int64(len(frac)) - exp
	if d.scale < math.MinInt32 || d.scale > math.MaxInt32 {
		return d, false
	}
	return d, true
}

// String is BigDecimal.toString(): plain notation when the scale is not
// negative and the adjusted exponent is at least -6, else scientific
// notation with a signed exponent.
func (d decimal) String() string {
	sign := ""
	if d.neg {
		sign = "-"
	}
	if d.scale == 0 {
		return sign + d.digits
	}
	n := int64(len(d.digits))
	adjusted := -d.scale + n - 1
	if d.scale > 0 && adjusted >= -6 {
		if pad := d.scale - n; pad >= 0 {
			return sign + "0." + strings.Repeat("0", int(pad)) + d.digits
		}
		cut := n - d.scale
		return sign + d.digits[:cut] + "." + d.digits[cut:]
	}
	s := sign + d.digits[:1]
	if n > 1 {
		s += "." + d.digits[1:]
	}
	if adjusted != 0 {
		s += "E"
		if adjusted > 0 {
			s += "+"
		}
		s += strconv.FormatInt(adjusted, 10)
	}
	return s
}

// truncated is the integer part's decimal text (toward zero), with ok
// false when it has more than 10 digits (outside int32 for certain).
func (d decimal) truncated() (string, bool) {
	sign := ""
	if d.neg {
		sign = "-"
	}
	switch {
	case d.digits == "0":
		return "0", true
	case d.scale <= 0:
		if int64(len(d.digits))-d.scale > 10 {
			return "", false
		}
		return sign + d.digits + strings.Repeat("0", int(-d.scale)), true
	case int64(len(d.digits)) <= d.scale:
		return "0", true
	default:
		s := d.digits[:int64(len(d.digits))-d.scale]
		if len(s) > 10 {
			return "", false
		}
		return sign + s, true
	}
}

// numberText is the text fastjson gives a JSON number read as a String:
// an integer literal as written, any other number as BigDecimal.toString.
func numberText(lit string) (string, bool) {
	if !strings.ContainsAny(lit, ".eE") {
		return lit, true
	}
	d, ok := parseDecimal(lit)
	if !ok {
		return "", false
	}
	return d.String(), true
}
