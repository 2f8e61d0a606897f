package codec

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeBoth decodes a JSON header with the reference decoder and, when it
// takes it, the fast path, and checks they agree.
func decodeBoth(t *testing.T, hdr string) (c *Command, fastTook bool) {
	t.Helper()
	std, err := decodeJSONHeaderStd([]byte(hdr))
	require.NoError(t, err)
	fast, ok := decodeJSONHeaderFast([]byte(hdr), false)
	if ok {
		assert.Equal(t, std, ForgetPool(fast), "fast path and reference differ")
	}
	return std, ok
}

// TestLenientExtFieldValues: extFields values Java 4.9's fastjson reads
// into HashMap<String,String> become the same text here (StringCodec:
// an integer's literal text, BigDecimal.toString for other numbers,
// "true"/"false"), null is an absent field, and the fast path agrees
// with the reference decoder.
func TestLenientExtFieldValues(t *testing.T) {
	tests := []struct {
		give string // an extFields value as JSON text
		want string // its decoded text; "<absent>" for no entry
		fast bool   // the fast path takes it (no fallback)
	}{
		{`"x"`, "x", true},
		{`""`, "", true},
		{`1`, "1", true},
		{`0`, "0", true},
		{`-5`, "-5", true},
		{`-0`, "-0", true},
		{`12345678901234567890123`, "12345678901234567890123", true}, // beyond int64: the text is kept
		{`true`, "true", true},
		{`false`, "false", true},
		{`null`, "<absent>", true},
		// BigDecimal(literal).toString(), checked with java.math.BigDecimal's
		// documented rules: plain when scale >= 0 and the adjusted exponent
		// is >= -6, else scientific with a signed exponent.
		{`1.50`, "1.50", true},
		{`-2.5`, "-2.5", true},
		{`1e3`, "1E+3", true},
		{`1E3`, "1E+3", true},
		{`1e+3`, "1E+3", true},
		{`1.5e3`, "1.5E+3", true},
		{`10e1`, "1.0E+2", true},
		{`1e0`, "1", true},
		{`100e-2`, "1.00", true},
		{`123.456e-2`, "1.23456", true},
		{`0.000001`, "0.000001", true},
		{`0.0000001`, "1E-7", true},
		{`1E-7`, "1E-7", true},
		{`0.05`, "0.05", true},
		{`0.00`, "0.00", true},
		{`-0.0`, "0.0", true},
		{`0e5`, "0E+5", true},
		{`12.5e-10`, "1.25E-9", true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			hdr := `{"code":10,"opaque":3,"extFields":{"topic":"T","v":` + tt.give + `}}`
			c, fast := decodeBoth(t, hdr)
			assert.Equal(t, tt.fast, fast, "fast path took it")
			v, ok := c.ExtFields["v"]
			if tt.want == "<absent>" {
				assert.False(t, ok, "null must be an absent field, got %q", v)
			} else {
				assert.True(t, ok)
				assert.Equal(t, tt.want, v)
			}
			assert.Equal(t, "T", c.ExtFields["topic"])
			assert.Equal(t, int32(10), c.Code)
			assert.Equal(t, int32(3), c.Opaque)
		})
	}
}

// TestLenientHeaderFields covers the top-level fields: ints given as
// strings, booleans, null or other numbers (fastjson's castToInt and
// BigDecimal.intValue), remark null or a number, unknown fields, order,
// repeated keys (the last wins, a repeated extFields replaces the map),
// escapes and empty strings.
func TestLenientHeaderFields(t *testing.T) {
	type want struct {
		code, opaque, flag, version int32
		remark                      string
		ext                         map[string]string
	}
	tests := []struct {
		name string
		give string
		want want
	}{
		{"ints as strings", `{"code":"10","opaque":"7","flag":"2","version":"409","extFields":{}}`,
			want{code: 10, opaque: 7, flag: 2, version: 409, ext: map[string]string{}}},
		{"signed and zero-padded strings", `{"code":"+10","opaque":"-7","flag":"007"}`,
			want{code: 10, opaque: -7, flag: 7, ext: map[string]string{}}},
		{"castToInt drops commas and a trailing .0", `{"code":"1,0","opaque":"12.00"}`,
			want{code: 10, opaque: 12, ext: map[string]string{}}},
		{"empty or null strings leave the field unset", `{"code":5,"code":"","opaque":"null","flag":"NULL"}`,
			want{code: 5, ext: map[string]string{}}},
		{"floats truncate toward zero", `{"code":10.9,"opaque":-10.9,"flag":1e1,"version":2.5E2}`,
			want{code: 10, opaque: -10, flag: 10, version: 250, ext: map[string]string{}}},
		{"booleans", `{"code":true,"opaque":false,"flag":true}`,
			want{code: 1, flag: 1, ext: map[string]string{}}},
		{"null ints stay unset", `{"code":3,"code":null,"opaque":null}`,
			want{code: 3, ext: map[string]string{}}},
		{"remark null", `{"code":1,"remark":null}`, want{code: 1, ext: map[string]string{}}},
		{"remark a number or boolean", `{"remark":1.50,"extFields":{"r":true}}`,
			want{remark: "1.50", ext: map[string]string{"r": "true"}}},
		{"unknown fields ignored", `{"zzz":{"a":[1,{"b":null}]},"code":2,"serializeTypeCurrentRPC":"JSON","x":-1.5e3}`,
			want{code: 2, ext: map[string]string{}}},
		{"any order", `{"extFields":{"b":"2","a":1},"version":3,"flag":1,"remark":"r","opaque":9,"language":"GO","code":4}`,
			want{code: 4, opaque: 9, flag: 1, version: 3, remark: "r", ext: map[string]string{"a": "1", "b": "2"}}},
		{"repeated keys: the last wins", `{"code":1,"code":2,"opaque":1,"opaque":"3","extFields":{"a":"1","a":2,"b":null,"b":"x","c":"y","c":null}}`,
			want{code: 2, opaque: 3, ext: map[string]string{"a": "2", "b": "x"}}},
		{"a repeated extFields replaces the map", `{"extFields":{"a":"1"},"extFields":{"b":"2"}}`,
			want{ext: map[string]string{"b": "2"}}},
		{"extFields null", `{"extFields":{"a":"1"},"extFields":null}`, want{ext: map[string]string{}}},
		{"unicode escapes", `{"remark":"\u00e9\ud83d\ude00","extFields":{"k\u00e9":"\u0041\n","\u0074opic":"T"}}`,
			want{remark: "é😀", ext: map[string]string{"ké": "A\n", "topic": "T"}}},
		{"empty strings", `{"remark":"","extFields":{"":"","a":""}}`,
			want{ext: map[string]string{"": "", "a": ""}}},
		{"case-insensitive keys", `{"Code":7,"OPAQUE":"8","extfields":{"a":1}}`,
			want{code: 7, opaque: 8, ext: map[string]string{"a": "1"}}},
		{"whitespace everywhere", " { \"code\" : \"1\" , \"extFields\" : { \"a\" : 1.0 , \"b\" : true } } ",
			want{code: 1, ext: map[string]string{"a": "1.0", "b": "true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := decodeBoth(t, tt.give)
			got := want{code: c.Code, opaque: c.Opaque, flag: c.Flag, version: c.Version, remark: c.Remark, ext: c.ExtFields}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestFastPathTakesCommonLenientHeaders: the shapes other clients really
// send (numbers and booleans in extFields, ints as strings) do not fall
// back to encoding/json.
func TestFastPathTakesCommonLenientHeaders(t *testing.T) {
	for _, s := range []string{
		`{"code":310,"opaque":"5","flag":0,"extFields":{"a":"PG","b":"T","e":0,"f":true,"i":1.5,"n":null}}`,
		`{"code":"11","extFields":{"queueId":3,"queueOffset":-1,"maxMsgNums":32,"sysFlag":2,"commitOffset":0}}`,
	} {
		_, ok := decodeJSONHeaderFast([]byte(s), false)
		assert.True(t, ok, s)
	}
}

// TestHeaderShapeErrors: well-formed JSON whose fields have the wrong shape
// gives a *HeaderShapeError naming the field, with the opaque, code and
// flag read, so the request can be answered; malformed JSON, or a header
// whose opaque cannot be read, gives a plain ErrBadHeader.
func TestHeaderShapeErrors(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		field   string
		problem string
		code    int32
		opaque  int32
		flag    int32
	}{
		{"extFields an array", `{"code":10,"opaque":5,"extFields":[1,2]}`, "extFields", "an array where an object belongs", 10, 5, 0},
		{"extFields a string", `{"opaque":6,"extFields":"a=b"}`, "extFields", "a string where an object belongs", 0, 6, 0},
		{"extFields a number", `{"opaque":6,"extFields":5}`, "extFields", "a number where an object belongs", 0, 6, 0},
		{"code an object", `{"code":{"x":1},"opaque":7,"flag":2}`, "code", "an object where an integer belongs", 0, 7, 2},
		{"code an array", `{"opaque":7,"code":[10]}`, "code", "an array where an integer belongs", 0, 7, 0},
		{"code out of range", `{"opaque":8,"code":2147483648}`, "code", "an integer outside int32", 0, 8, 0},
		{"float code out of range", `{"opaque":8,"code":1e10}`, "code", "an integer outside int32", 0, 8, 0},
		{"code not an integer string", `{"opaque":8,"code":"ten"}`, "code", "a string that is not an integer", 0, 8, 0},
		{"flag out of range string", `{"opaque":8,"flag":"99999999999"}`, "flag", "an integer outside int32", 0, 8, 0},
		{"an object value", `{"code":11,"opaque":9,"extFields":{"topic":"T","queueId":{"v":1}}}`, "extFields.queueId", "an object where a string belongs", 11, 9, 0},
		{"an array value", `{"opaque":9,"extFields":{"tags":["a"]}}`, "extFields.tags", "an array where a string belongs", 0, 9, 0},
		{"remark an object", `{"opaque":9,"remark":{}}`, "remark", "an object where a string belongs", 0, 9, 0},
		{"exponent out of range", `{"opaque":9,"extFields":{"v":1e99999999999}}`, "extFields.v", "a number out of range", 0, 9, 0},
		{"opaque after the bad field", `{"extFields":[],"code":12,"flag":1,"opaque":13}`, "extFields", "an array where an object belongs", 12, 13, 1},
		{"a long key is cut", `{"opaque":1,"extFields":{"` + strings.Repeat("k", 1000) + `":[]}}`, "extFields." + strings.Repeat("k", maxFieldName) + "...", "an array where a string belongs", 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok := decodeJSONHeaderFast([]byte(tt.give), false)
			require.False(t, ok, "the fast path took a wrong-shaped header")
			_, err := Decode(jsonTestFrame(tt.give))
			var he *HeaderShapeError
			require.ErrorAs(t, err, &he)
			assert.ErrorIs(t, err, ErrBadHeader)
			assert.Equal(t, tt.field, he.Field)
			assert.Equal(t, tt.problem, he.Problem)
			assert.Equal(t, [3]int32{tt.code, tt.opaque, tt.flag}, [3]int32{he.Code, he.Opaque, he.Flag})
			assert.Equal(t, SerializeJSON, he.SerializeType)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
	for _, s := range []string{
		`{"code":1,}`,                   // malformed JSON
		`{"code":1`,                     // truncated
		`{"opaque":{},"code":1}`,        // the opaque is unreadable
		`{"opaque":"x","extFields":[]}`, // likewise
		`[1]`,                           // not an object
		`"header"`,
		`not json`,
	} {
		t.Run(s, func(t *testing.T) {
			_, err := Decode(jsonTestFrame(s))
			require.ErrorIs(t, err, ErrBadHeader)
			var he *HeaderShapeError
			assert.False(t, errors.As(err, &he), "answerable: %v", err)
		})
	}
}

func jsonTestFrame(hdr string) []byte {
	b := []byte{0, 0, 0, 0}
	n := len(hdr)
	b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n)
	return append(b, hdr...)
}
