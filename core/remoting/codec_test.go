package remoting_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// jsonFrame builds a frame (without total length) by hand, per spec §1.2:
// int32 of serialize type 0 and header length, header, body.
func jsonFrame(hdr string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, body...)
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

const capturedGoHeader = `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicA"}}`

func TestDecodeCapturedGoHeader(t *testing.T) {
	frame := jsonFrame(capturedGoHeader, nil)
	// The word in front is the header length with serialize type 0.
	require.Equal(t, []byte{0, 0, 0, byte(len(capturedGoHeader))}, frame[:4])

	c, err := remoting.Decode(frame)
	require.NoError(t, err)
	assert.Equal(t, int32(105), c.Code)
	assert.Equal(t, "GO", c.Language)
	assert.Equal(t, int32(317), c.Version)
	assert.Equal(t, int32(1), c.Opaque)
	assert.Equal(t, int32(0), c.Flag)
	assert.Equal(t, "", c.Remark)
	assert.Equal(t, map[string]string{"topic": "TopicA"}, c.ExtFields)
	assert.Nil(t, c.Body)
	assert.Equal(t, remoting.SerializeJSON, c.SerializeType)
	assert.False(t, c.IsResponse())
	assert.False(t, c.IsOneway())

	// With a body and the stream's total-length prefix stripped.
	stream := binary.BigEndian.AppendUint32(nil, uint32(4+len(capturedGoHeader)+3))
	stream = append(stream, jsonFrame(capturedGoHeader, []byte("abc"))...)
	c, err = remoting.Decode(stream[4:])
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), c.Body)
}

func TestDecodeJSONVariants(t *testing.T) {
	tests := []struct {
		name string
		give string
		want remoting.Command
	}{
		{
			name: "numeric language",
			give: `{"code":0,"language":9,"opaque":3,"flag":1}`,
			want: remoting.Command{Language: "GO", Opaque: 3, Flag: 1, ExtFields: map[string]string{}},
		},
		{
			name: "null extFields values are dropped",
			give: `{"code":10,"extFields":{"a":null,"b":"x"}}`,
			want: remoting.Command{Code: 10, ExtFields: map[string]string{"b": "x"}},
		},
		{
			name: "unknown fields and null remark",
			give: `{"code":34,"remark":null,"serializeTypeCurrentRPC":"JSON","future":[1,{"x":2}]}`,
			want: remoting.Command{Code: 34, ExtFields: map[string]string{}},
		},
		{
			name: "escapes as jsoniter writes them",
			give: `{"code":10,"extFields":{"properties":"TAGS\u0001a\u0002KEYS\u0001k\u003c\u003e\u0026\u0002"}}`,
			want: remoting.Command{Code: 10, ExtFields: map[string]string{"properties": "TAGS\x01a\x02KEYS\x01k<>&\x02"}},
		},
		{
			name: "negative opaque and java language",
			give: `{"code":1,"language":"JAVA","version":409,"opaque":-2147483648,"flag":3,"remark":"boom"}`,
			want: remoting.Command{Code: 1, Language: "JAVA", Version: 409, Opaque: -2147483648, Flag: 3, Remark: "boom", ExtFields: map[string]string{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := remoting.Decode(jsonFrame(tt.give, nil))
			require.NoError(t, err)
			assert.Equal(t, &tt.want, remoting.ForgetPool(c))
		})
	}
}

// sampleCommands cover both header types' corners for the round trips.
func sampleCommands() []*remoting.Command {
	return []*remoting.Command{
		{Code: 105, Language: "GO", Version: 317, Opaque: 1, ExtFields: map[string]string{"topic": "TopicA"}},
		{Code: 0, Language: "JAVA", Version: 409, Opaque: 2, Flag: remoting.FlagResponse, Remark: "done",
			ExtFields: map[string]string{"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "5"}},
		{Code: 10, Language: "GO", Version: 317, Opaque: -7, Flag: remoting.FlagOneway,
			ExtFields: map[string]string{"properties": "TAGS\x01a\x02KEYS\x01k1 k2\x02", "e": `quo"te\back/slash`, "": "empty key", "ctl": "\x00\x1f\n\r\t\x7f"},
			Body:      []byte("hello body")},
		{Code: 1, Language: "JAVA", Version: 409, Opaque: 9, Flag: 1, Remark: "ünïcödé ✓ 😀 \u2028\u2029 <>&",
			ExtFields: map[string]string{"ключ": "значение"}, Body: bytes.Repeat([]byte{0, 1, 2}, 1000)},
		{Code: 11, Language: "RUST", Version: 0, ExtFields: map[string]string{}},
		{Code: -1, Language: "OTHER", Version: -1, Opaque: 2147483647, Flag: -1, ExtFields: map[string]string{"v": ""}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		for i, give := range sampleCommands() {
			give.SerializeType = st
			frame := remoting.Encode(give)
			got, err := remoting.Decode(frame)
			require.NoError(t, err, "type %d command %d", st, i)
			assert.Equal(t, give, remoting.ForgetPool(got), "type %d command %d", st, i)
			// EncodeWithLength is the same frame behind its total length.
			wl := remoting.EncodeWithLength(give)
			assert.Equal(t, uint32(len(frame)), binary.BigEndian.Uint32(wl))
			assert.Equal(t, frame, wl[4:])
			// AppendHeader appends: the prefix survives.
			h := remoting.AppendHeader([]byte("prefix"), give)
			assert.Equal(t, "prefix", string(h[:6]))
			assert.Equal(t, frame[:len(frame)-len(give.Body)], h[6:])
		}
	}
}

func TestJSONHeaderDefaultLanguage(t *testing.T) {
	c := &remoting.Command{Code: 3}
	got, err := remoting.Decode(remoting.Encode(c))
	require.NoError(t, err)
	assert.Equal(t, remoting.ServerLanguage, got.Language)
	assert.Equal(t, map[string]string{}, got.ExtFields)
}

func TestBinaryLanguage(t *testing.T) {
	tests := []struct{ give, want string }{
		{"COBOL", "OTHER"},
		{"", remoting.ServerLanguage}, // as in the JSON header
		{"GO", "GO"},
	}
	for _, tt := range tests {
		c := &remoting.Command{Code: 3, Language: tt.give, SerializeType: remoting.SerializeRocketMQ}
		got, err := remoting.Decode(remoting.Encode(c))
		require.NoError(t, err)
		assert.Equal(t, tt.want, got.Language, "language %q", tt.give)
	}
}

func TestEncodeBodyParts(t *testing.T) {
	for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		c := &remoting.Command{Code: 0, Flag: 1, Body: []byte("ignored"), SerializeType: st,
			BodyParts: [][]byte{[]byte("rec1"), nil, []byte("rec2")}}
		got, err := remoting.Decode(remoting.Encode(c))
		require.NoError(t, err)
		assert.Equal(t, "rec1rec2", string(got.Body))
		wl := remoting.EncodeWithLength(c)
		assert.Equal(t, remoting.Encode(c), wl[4:])
		assert.Equal(t, uint32(len(wl)-4), binary.BigEndian.Uint32(wl))
	}
}

// TestJSONHeaderShape checks what the Go client's decoder depends on: every
// extFields value is a JSON string, separators and quotes are escaped, and
// encoding/json reads the header into map[string]string.
func TestJSONHeaderShape(t *testing.T) {
	ext := map[string]string{
		"properties":  "UNIQ_KEY\x01C0A8\x02TAGS\x01TagA\x02",
		"queueId":     "5",
		"bornTime":    "1700000000000",
		"flag":        "true",
		"quotes":      `a "quoted" \ value`,
		"html":        "<a>&</a>",
		"newline":     "a\nb",
		"badUTF8":     "a\xffb",
		"lineSep":     "x\u2028y",
		"nul":         "\x00",
		"empty":       "",
		"uni":         "日本語",
		`key"quoted"`: "v",
	}
	c := &remoting.Command{Code: 10, Language: "JAVA", Version: 409, Opaque: 42, Flag: 1, Remark: "r\x01\"", ExtFields: ext, Body: []byte("B")}
	frame := remoting.Encode(c)
	word := binary.BigEndian.Uint32(frame)
	require.Equal(t, byte(0), byte(word>>24), "serialize type")
	hl := int(word & 0xFFFFFF)
	hdr := frame[4 : 4+hl]
	assert.Equal(t, "B", string(frame[4+hl:]))

	assert.True(t, json.Valid(hdr), "header is not valid JSON: %s", hdr)
	assert.NotContains(t, string(hdr), "\x01", "raw 0x01 in header")
	assert.NotContains(t, string(hdr), "\x02", "raw 0x02 in header")
	assert.NotContains(t, string(hdr), "\n", "raw newline in header")
	assert.Contains(t, string(hdr), `\u0001`)
	assert.Contains(t, string(hdr), `\u0002`)
	assert.Contains(t, string(hdr), `a \"quoted\" \\ value`)
	assert.Contains(t, string(hdr), `"key\"quoted\"":"v"`)
	assert.Contains(t, string(hdr), `\u2028`)

	// All values are strings: numbers and booleans are quoted.
	var raw struct {
		ExtFields map[string]json.RawMessage `json:"extFields"`
	}
	require.NoError(t, json.Unmarshal(hdr, &raw))
	require.Len(t, raw.ExtFields, len(ext))
	for k, v := range raw.ExtFields {
		assert.Equal(t, byte('"'), v[0], "extFields[%q] = %s is not a JSON string", k, v)
	}

	// What the Go client does: decode into typed fields and map[string]string.
	var goClient struct {
		Code      int32             `json:"code"`
		Language  string            `json:"language"`
		Version   int32             `json:"version"`
		Opaque    int32             `json:"opaque"`
		Flag      int32             `json:"flag"`
		Remark    string            `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	}
	require.NoError(t, json.Unmarshal(hdr, &goClient))
	assert.Equal(t, int32(10), goClient.Code)
	assert.Equal(t, "JAVA", goClient.Language)
	assert.Equal(t, int32(409), goClient.Version)
	assert.Equal(t, int32(42), goClient.Opaque)
	assert.Equal(t, int32(1), goClient.Flag)
	assert.Equal(t, "r\x01\"", goClient.Remark)
	want := make(map[string]string, len(ext))
	for k, v := range ext {
		want[k] = v
	}
	want["badUTF8"] = "a\uFFFDb" // invalid UTF-8 is replaced, as encoding/json does
	assert.Equal(t, want, goClient.ExtFields)

	// An empty custom header still carries "extFields":{}.
	empty := remoting.Encode(&remoting.Command{Code: 34})
	assert.Contains(t, string(empty[4:]), `"extFields":{}`)
	assert.NotContains(t, string(empty[4:]), `"remark"`, "empty remark is omitted, as Java omits null")
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	// appendJSONString must agree with encoding/json on valid strings.
	for _, s := range []string{"", "plain", "\x00\x01\x1f", `"\`, "tab\there", "é😀", "\u2028\u2029", "\x7f", "<>&"} {
		c := &remoting.Command{ExtFields: map[string]string{"k": s}}
		frame := remoting.Encode(c)
		var h struct {
			ExtFields map[string]string `json:"extFields"`
		}
		require.NoError(t, json.Unmarshal(frame[4:], &h), "%q", s)
		assert.Equal(t, s, h.ExtFields["k"])
	}
}

// TestBinaryKnownVector is the Go client's captured request in the ROCKETMQ
// header, laid out by hand per spec §1.5.
func TestBinaryKnownVector(t *testing.T) {
	want := unhex(t, ""+
		"01000026"+ // serialize type 1, header length 38
		"0069"+ // code 105
		"09"+ // language GO
		"013d"+ // version 317
		"00000001"+ // opaque
		"00000000"+ // flag
		"00000000"+ // remark length
		"00000011"+ // extFields length 17
		"0005"+hex.EncodeToString([]byte("topic"))+
		"00000006"+hex.EncodeToString([]byte("TopicA"))+
		hex.EncodeToString([]byte("body")))
	c := &remoting.Command{Code: 105, Language: "GO", Version: 317, Opaque: 1,
		ExtFields: map[string]string{"topic": "TopicA"}, Body: []byte("body"), SerializeType: remoting.SerializeRocketMQ}
	assert.Equal(t, want, remoting.Encode(c))
	got, err := remoting.Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	// A response with a remark and two fields (sorted on encode).
	want = unhex(t, ""+
		"01000026"+ // header length 38
		"0011"+ // code 17
		"00"+ // JAVA
		"0199"+ // 409
		"ffffffff"+ // opaque -1
		"00000001"+ // response
		"00000002"+hex.EncodeToString([]byte("no"))+
		"0000000f"+ // 15
		"0001"+hex.EncodeToString([]byte("a"))+"00000001"+hex.EncodeToString([]byte("1"))+
		"0001"+hex.EncodeToString([]byte("b"))+"00000000")
	c = &remoting.Command{Code: 17, Language: "JAVA", Version: 409, Opaque: -1, Flag: 1, Remark: "no",
		ExtFields: map[string]string{"b": "", "a": "1"}, SerializeType: remoting.SerializeRocketMQ}
	assert.Equal(t, want, remoting.Encode(c))
	got, err = remoting.Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, remoting.ForgetPool(got))
}

// binHeader builds a ROCKETMQ frame from a header whose lengths may lie.
func binFrame(fixed []byte, rest ...[]byte) []byte {
	h := append([]byte(nil), fixed...)
	for _, r := range rest {
		h = append(h, r...)
	}
	b := binary.BigEndian.AppendUint32(nil, 1<<24|uint32(len(h)))
	return append(b, h...)
}

func TestDecodeErrors(t *testing.T) {
	be := binary.BigEndian
	fixed := unhex(t, "0069 09 013d 00000001 00000000") // 13 bytes up to the remark length
	u32 := func(v uint32) []byte { return be.AppendUint32(nil, v) }
	u16 := func(v uint16) []byte { return be.AppendUint16(nil, v) }
	tests := []struct {
		name string
		give []byte
	}{
		{"empty", nil},
		{"three bytes", []byte{0, 0, 0}},
		{"header length beyond frame", append(u32(16), "{}"...)},
		{"header length 16M-1", append(u32(0xFFFFFF), "{}"...)},
		{"header above MaxHeaderSize", append(u32(remoting.MaxHeaderSize+1), make([]byte, remoting.MaxHeaderSize+1)...)},
		{"serialize type 7", append(u32(7<<24|2), "{}"...)},
		{"serialize type 255", append(u32(0xFF<<24|2), "{}"...)},
		{"garbage JSON", jsonFrame("{oops", nil)},
		{"empty JSON", jsonFrame("", nil)},
		{"JSON array", jsonFrame("[1,2]", nil)},
		{"JSON string", jsonFrame(`"x"`, nil)},
		{"truncated JSON", jsonFrame(capturedGoHeader[:40], nil)},
		// Numbers and strings where Java's fastjson accepts them are no
		// error (lenient_test.go); these shapes are.
		{"array extFields value", jsonFrame(`{"code":11,"extFields":{"offset":[5]}}`, nil)},
		{"code overflows int32", jsonFrame(`{"code":3000000000}`, nil)},
		{"code as an object", jsonFrame(`{"code":{"v":105}}`, nil)},
		{"binary shorter than 21", binFrame(fixed, u32(0))},
		{"binary remark length beyond", binFrame(fixed, u32(100), u32(0))},
		{"binary remark length negative", binFrame(fixed, u32(0xFFFFFFFF), u32(0))},
		{"binary remark eats extFields length", binFrame(fixed, u32(4), u32(0))},
		{"binary extFields length beyond", binFrame(fixed, u32(0), u32(50))},
		{"binary extFields length negative", binFrame(fixed, u32(0), u32(0x80000000))},
		{"binary key length beyond", binFrame(fixed, u32(0), u32(4), u16(9), []byte("ab"))},
		{"binary truncated key length", binFrame(fixed, u32(0), u32(1), []byte{0})},
		{"binary truncated value length", binFrame(fixed, u32(0), u32(4), u16(1), []byte("k"), []byte{0})},
		{"binary value length beyond", binFrame(fixed, u32(0), u32(9), u16(1), []byte("k"), u32(10), []byte("vv"))},
		{"binary value length negative", binFrame(fixed, u32(0), u32(7), u16(1), []byte("k"), u32(0xFFFFFFFE))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = remoting.Decode(tt.give) })
			assert.ErrorIs(t, err, remoting.ErrBadHeader)
		})
	}
}

// TestDecodeEveryPrefix cuts valid frames at every byte: no panic, and any
// cut inside the header is an error.
func TestDecodeEveryPrefix(t *testing.T) {
	for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		for _, c := range sampleCommands() {
			c.SerializeType = st
			frame := remoting.Encode(c)
			hl := int(binary.BigEndian.Uint32(frame) & 0xFFFFFF)
			for n := range len(frame) {
				var err error
				require.NotPanics(t, func() { _, err = remoting.Decode(frame[:n]) }, "type %d cut at %d", st, n)
				if n < 4+hl {
					require.ErrorIs(t, err, remoting.ErrBadHeader, "type %d cut at %d", st, n)
				}
			}
		}
	}
}

func TestDecodeBodyAliasesFrame(t *testing.T) {
	frame := remoting.Encode(&remoting.Command{Code: 1, Body: []byte("xyz")})
	c, err := remoting.Decode(frame)
	require.NoError(t, err)
	frame[len(frame)-1] = 'Q'
	assert.Equal(t, "xyQ", string(c.Body), "Decode documents that the body aliases the frame")
}

func TestCommandHelpers(t *testing.T) {
	a := remoting.NewRequest(remoting.PullMessage, nil, []byte("b"))
	b := remoting.NewRequest(remoting.PullMessage, map[string]string{"x": "1"}, nil)
	assert.Greater(t, b.Opaque, a.Opaque, "opaques increase")
	assert.NotNil(t, a.ExtFields)
	assert.Equal(t, remoting.ServerLanguage, a.Language)
	assert.Equal(t, int32(remoting.ServerVersion), a.Version)
	assert.False(t, a.IsResponse())

	a.SerializeType = remoting.SerializeRocketMQ
	r := remoting.NewResponse(a, remoting.SystemError, "bad")
	assert.True(t, r.IsResponse())
	assert.Equal(t, a.Opaque, r.Opaque)
	assert.Equal(t, remoting.SerializeRocketMQ, r.SerializeType, "answers in the request's serialize type")
	assert.Equal(t, r, remoting.Errorf(a, remoting.SystemError, "bad"))

	var c remoting.Command
	c.SetExt("k", "v")
	c.SetExtInt("n", -42)
	assert.Equal(t, "v", c.Ext("k"))
	assert.Equal(t, "-42", c.Ext("n"))
	c.Flag = remoting.FlagOneway
	assert.True(t, c.IsOneway())
}

func TestReadExt(t *testing.T) {
	c := &remoting.Command{ExtFields: map[string]string{
		"s": "str", "i": " 42 ", "big": "9223372036854775807", "bad": "x1", "b": "TRUE", "i32": "2147483648", "empty": "",
	}}
	e := remoting.ReadExt(c)
	assert.Equal(t, "str", e.String("s"))
	assert.Equal(t, int64(42), e.Int64("i"))
	assert.Equal(t, int64(9223372036854775807), e.Int64("big"))
	assert.Equal(t, int32(42), e.Int32("i"))
	assert.Equal(t, int64(7), e.OptInt64("missing", 7))
	assert.Equal(t, int64(7), e.OptInt64("empty", 7))
	assert.Equal(t, int32(8), e.OptInt32("missing", 8))
	assert.Equal(t, "", e.OptString("missing"))
	assert.True(t, e.Bool("b"))
	assert.False(t, e.Bool("missing"))
	require.NoError(t, e.Err)

	tests := []struct {
		name string
		read func(*remoting.Ext)
		want string
	}{
		{"missing string", func(e *remoting.Ext) { e.String("nope") }, "the custom field <nope> is null"},
		{"missing int", func(e *remoting.Ext) { e.Int64("nope") }, "the custom field <nope> is null"},
		{"missing int32", func(e *remoting.Ext) { e.Int32("nope") }, "the custom field <nope> is null"},
		{"bad int", func(e *remoting.Ext) { e.Int64("bad") }, `the custom field <bad> has bad value "x1": not an integer`},
		{"bad opt int", func(e *remoting.Ext) { e.OptInt64("bad", 0) }, `the custom field <bad> has bad value "x1": not an integer`},
		{"int32 overflow", func(e *remoting.Ext) { e.Int32("i32") }, `the custom field <i32> has bad value "2147483648": not a 32-bit integer`},
		{"opt int32 overflow", func(e *remoting.Ext) { e.OptInt32("i32", 0) }, `the custom field <i32> has bad value "2147483648": not a 32-bit integer`},
		{"first error kept", func(e *remoting.Ext) { e.String("first"); e.Int64("bad") }, "the custom field <first> is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := remoting.ReadExt(c)
			tt.read(e)
			require.Error(t, e.Err)
			assert.Equal(t, tt.want, e.Err.Error())
			var he *remoting.HeaderError
			assert.ErrorAs(t, e.Err, &he)
		})
	}
}

func BenchmarkEncodeHeader(b *testing.B) {
	c := &remoting.Command{Code: 0, Language: "JAVA", Version: 409, Opaque: 12345, Flag: 1,
		ExtFields: map[string]string{"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "98765",
			"transactionId": "C0A8000100002A9F0000000000001234", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}}
	for _, st := range []struct {
		name string
		t    byte
	}{{"json", remoting.SerializeJSON}, {"rocketmq", remoting.SerializeRocketMQ}} {
		b.Run(st.name, func(b *testing.B) {
			c.SerializeType = st.t
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				buf = remoting.AppendHeader(buf[:0], c)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	send := &remoting.Command{Code: remoting.SendMessage, Language: "GO", Version: 317, Opaque: 77,
		ExtFields: map[string]string{"producerGroup": "pg", "topic": "TopicA", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "UNIQ_KEY\x01C0A80001\x02TAGS\x01TagA\x02",
			"reconsumeTimes": "0", "unitMode": "false", "batch": "false"},
		Body: bytes.Repeat([]byte("x"), 1024)}
	for _, st := range []struct {
		name string
		t    byte
	}{{"json", remoting.SerializeJSON}, {"rocketmq", remoting.SerializeRocketMQ}} {
		b.Run(st.name, func(b *testing.B) {
			send.SerializeType = st.t
			frame := remoting.Encode(send)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				c, err := remoting.Decode(frame)
				if err != nil {
					b.Fatal(err)
				}
				remoting.Release(c) // as the router does after a scoped handler
			}
		})
	}
}
