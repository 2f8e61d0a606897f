package codec_test

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
	"github.com/quivermq/quiver/core/remoting/codec"
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

	c, err := codec.Decode(frame)
	require.NoError(t, err)
	assert.Equal(t, int32(105), c.Code)
	assert.Equal(t, "GO", c.Language)
	assert.Equal(t, int32(317), c.Version)
	assert.Equal(t, int32(1), c.Opaque)
	assert.Equal(t, int32(0), c.Flag)
	assert.Equal(t, "", c.Remark)
	assert.Equal(t, map[string]string{"topic": "TopicA"}, c.ExtFields)
	assert.Nil(t, c.Body)
	assert.Equal(t, codec.SerializeJSON, c.SerializeType)
	assert.False(t, c.IsResponse())
	assert.False(t, c.IsOneway())

	// With a body and the stream's total-length prefix stripped.
	stream := binary.BigEndian.AppendUint32(nil, uint32(4+len(capturedGoHeader)+3))
	stream = append(stream, jsonFrame(capturedGoHeader, []byte("abc"))...)
	c, err = codec.Decode(stream[4:])
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), c.Body)
}

func TestDecodeJSONVariants(t *testing.T) {
	tests := []struct {
		name string
		give string
		want codec.Command
	}{
		{
			name: "numeric language",
			give: `{"code":0,"language":9,"opaque":3,"flag":1}`,
			want: codec.Command{Language: "GO", Opaque: 3, Flag: 1, ExtFields: map[string]string{}},
		},
		{
			name: "null extFields values are dropped",
			give: `{"code":10,"extFields":{"a":null,"b":"x"}}`,
			want: codec.Command{Code: 10, ExtFields: map[string]string{"b": "x"}},
		},
		{
			name: "unknown fields and null remark",
			give: `{"code":34,"remark":null,"serializeTypeCurrentRPC":"JSON","future":[1,{"x":2}]}`,
			want: codec.Command{Code: 34, ExtFields: map[string]string{}},
		},
		{
			name: "escapes as jsoniter writes them",
			give: `{"code":10,"extFields":{"properties":"TAGS\u0001a\u0002KEYS\u0001k\u003c\u003e\u0026\u0002"}}`,
			want: codec.Command{Code: 10, ExtFields: map[string]string{"properties": "TAGS\x01a\x02KEYS\x01k<>&\x02"}},
		},
		{
			name: "negative opaque and java language",
			give: `{"code":1,"language":"JAVA","version":409,"opaque":-2147483648,"flag":3,"remark":"boom"}`,
			want: codec.Command{Code: 1, Language: "JAVA", Version: 409, Opaque: -2147483648, Flag: 3, Remark: "boom", ExtFields: map[string]string{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := codec.Decode(jsonFrame(tt.give, nil))
			require.NoError(t, err)
			assert.Equal(t, &tt.want, codec.ForgetPool(c))
		})
	}
}

// sampleCommands cover both header types' corners for the round trips.
func sampleCommands() []*codec.Command {
	return []*codec.Command{
		{Code: 105, Language: "GO", Version: 317, Opaque: 1, ExtFields: map[string]string{"topic": "TopicA"}},
		{Code: 0, Language: "JAVA", Version: 409, Opaque: 2, Flag: codec.FlagResponse, Remark: "done",
			ExtFields: map[string]string{"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "5"}},
		{Code: 10, Language: "GO", Version: 317, Opaque: -7, Flag: codec.FlagOneway,
			ExtFields: map[string]string{"properties": "TAGS\x01a\x02KEYS\x01k1 k2\x02", "e": `quo"te\back/slash`, "": "empty key", "ctl": "\x00\x1f\n\r\t\x7f"},
			Body:      []byte("hello body")},
		{Code: 1, Language: "JAVA", Version: 409, Opaque: 9, Flag: 1, Remark: "ünïcödé ✓ 😀 \u2028\u2029 <>&",
			ExtFields: map[string]string{"ключ": "значение"}, Body: bytes.Repeat([]byte{0, 1, 2}, 1000)},
		{Code: 11, Language: "RUST", Version: 0, ExtFields: map[string]string{}},
		{Code: -1, Language: "OTHER", Version: -1, Opaque: 2147483647, Flag: -1, ExtFields: map[string]string{"v": ""}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
		for i, give := range sampleCommands() {
			give.SerializeType = st
			frame := codec.Encode(give)
			got, err := codec.Decode(frame)
			require.NoError(t, err, "type %d command %d", st, i)
			assert.Equal(t, give, codec.ForgetPool(got), "type %d command %d", st, i)
			// EncodeWithLength is the same frame behind its total length.
			wl := codec.EncodeWithLength(give)
			assert.Equal(t, uint32(len(frame)), binary.BigEndian.Uint32(wl))
			assert.Equal(t, frame, wl[4:])
			// AppendHeader appends: the prefix survives.
			h := codec.AppendHeader([]byte("prefix"), give)
			assert.Equal(t, "prefix", string(h[:6]))
			assert.Equal(t, frame[:len(frame)-len(give.Body)], h[6:])
		}
	}
}

func TestJSONHeaderDefaultLanguage(t *testing.T) {
	c := &codec.Command{Code: 3}
	got, err := codec.Decode(codec.Encode(c))
	require.NoError(t, err)
	assert.Equal(t, codec.ServerLanguage, got.Language)
	assert.Equal(t, map[string]string{}, got.ExtFields)
}

func TestBinaryLanguage(t *testing.T) {
	tests := []struct{ give, want string }{
		{"COBOL", "OTHER"},
		{"", codec.ServerLanguage}, // as in the JSON header
		{"GO", "GO"},
	}
	for _, tt := range tests {
		c := &codec.Command{Code: 3, Language: tt.give, SerializeType: codec.SerializeRocketMQ}
		got, err := codec.Decode(codec.Encode(c))
		require.NoError(t, err)
		assert.Equal(t, tt.want, got.Language, "language %q", tt.give)
	}
}

func TestEncodeBodyParts(t *testing.T) {
	for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
		c := &codec.Command{Code: 0, Flag: 1, Body: []byte("ignored"), SerializeType: st,
			BodyParts: [][]byte{[]byte("rec1"), nil, []byte("rec2")}}
		got, err := codec.Decode(codec.Encode(c))
		require.NoError(t, err)
		assert.Equal(t, "rec1rec2", string(got.Body))
		wl := codec.EncodeWithLength(c)
		assert.Equal(t, codec.Encode(c), wl[4:])
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
	c := &codec.Command{Code: 10, Language: "JAVA", Version: 409, Opaque: 42, Flag: 1, Remark: "r\x01\"", ExtFields: ext, Body: []byte("B")}
	frame := codec.Encode(c)
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
	empty := codec.Encode(&codec.Command{Code: 34})
	assert.Contains(t, string(empty[4:]), `"extFields":{}`)
	assert.NotContains(t, string(empty[4:]), `"remark"`, "empty remark is omitted, as Java omits null")
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	// appendJSONString must agree with encoding/json on valid strings.
	for _, s := range []string{"", "plain", "\x00\x01\x1f", `"\`, "tab\there", "é😀", "\u2028\u2029", "\x7f", "<>&"} {
		c := &codec.Command{ExtFields: map[string]string{"k": s}}
		frame := codec.Encode(c)
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
	c := &codec.Command{Code: 105, Language: "GO", Version: 317, Opaque: 1,
		ExtFields: map[string]string{"topic": "TopicA"}, Body: []byte("body"), SerializeType: codec.SerializeRocketMQ}
	assert.Equal(t, want, codec.Encode(c))
	got, err := codec.Decode(want)
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
	c = &codec.Command{Code: 17, Language: "JAVA", Version: 409, Opaque: -1, Flag: 1, Remark: "no",
		ExtFields: map[string]string{"b": "", "a": "1"}, SerializeType: codec.SerializeRocketMQ}
	assert.Equal(t, want, codec.Encode(c))
	got, err = codec.Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, codec.ForgetPool(got))
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
		{"header above MaxHeaderSize", append(u32(codec.MaxHeaderSize+1), make([]byte, codec.MaxHeaderSize+1)...)},
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
			require.NotPanics(t, func() { _, err = codec.Decode(tt.give) })
			assert.ErrorIs(t, err, codec.ErrBadHeader)
		})
	}
}

// TestDecodeEveryPrefix cuts valid frames at every byte: no panic, and any
// cut inside the header is an error.
func TestDecodeEveryPrefix(t *testing.T) {
	for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
		for _, c := range sampleCommands() {
			c.SerializeType = st
			frame := codec.Encode(c)
			hl := int(binary.BigEndian.Uint32(frame) & 0xFFFFFF)
			for n := range len(frame) {
				var err error
				require.NotPanics(t, func() { _, err = codec.Decode(frame[:n]) }, "type %d cut at %d", st, n)
				if n < 4+hl {
					require.ErrorIs(t, err, codec.ErrBadHeader, "type %d cut at %d", st, n)
				}
			}
		}
	}
}

func TestDecodeBodyAliasesFrame(t *testing.T) {
	frame := codec.Encode(&codec.Command{Code: 1, Body: []byte("xyz")})
	c, err := codec.Decode(frame)
	require.NoError(t, err)
	frame[len(frame)-1] = 'Q'
	assert.Equal(t, "xyQ", string(c.Body), "Decode documents that the body aliases the frame")
}

func TestCommandHelpers(t *testing.T) {
	a := codec.NewRequest(remoting.PullMessage, nil, []byte("b"))
	b := codec.NewRequest(remoting.PullMessage, map[string]string{"x": "1"}, nil)
	assert.Greater(t, b.Opaque, a.Opaque, "opaques increase")
	assert.NotNil(t, a.ExtFields)
	assert.Equal(t, codec.ServerLanguage, a.Language)
	assert.Equal(t, int32(codec.ServerVersion), a.Version)
	assert.False(t, a.IsResponse())

	a.SerializeType = codec.SerializeRocketMQ
	r := codec.NewResponse(a, remoting.SystemError, "bad")
	assert.True(t, r.IsResponse())
	assert.Equal(t, a.Opaque, r.Opaque)
	assert.Equal(t, codec.SerializeRocketMQ, r.SerializeType, "answers in the request's serialize type")
	assert.Equal(t, r, codec.NewResponse(a, remoting.SystemError, "bad"))

	var c codec.Command
	c.SetExt("k", "v")
	c.SetExtInt("n", -42)
	assert.Equal(t, "v", c.Ext("k"))
	assert.Equal(t, "-42", c.Ext("n"))
	c.Flag = codec.FlagOneway
	assert.True(t, c.IsOneway())
}

func BenchmarkEncodeHeader(b *testing.B) {
	c := &codec.Command{Code: 0, Language: "JAVA", Version: 409, Opaque: 12345, Flag: 1,
		ExtFields: map[string]string{"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "98765",
			"transactionId": "C0A8000100002A9F0000000000001234", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}}
	for _, st := range []struct {
		name string
		t    byte
	}{{"json", codec.SerializeJSON}, {"rocketmq", codec.SerializeRocketMQ}} {
		b.Run(st.name, func(b *testing.B) {
			c.SerializeType = st.t
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				buf = codec.AppendHeader(buf[:0], c)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	send := &codec.Command{Code: remoting.SendMessage, Language: "GO", Version: 317, Opaque: 77,
		ExtFields: map[string]string{"producerGroup": "pg", "topic": "TopicA", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "UNIQ_KEY\x01C0A80001\x02TAGS\x01TagA\x02",
			"reconsumeTimes": "0", "unitMode": "false", "batch": "false"},
		Body: bytes.Repeat([]byte("x"), 1024)}
	for _, st := range []struct {
		name string
		t    byte
	}{{"json", codec.SerializeJSON}, {"rocketmq", codec.SerializeRocketMQ}} {
		b.Run(st.name, func(b *testing.B) {
			send.SerializeType = st.t
			frame := codec.Encode(send)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				c, err := codec.Decode(frame)
				if err != nil {
					b.Fatal(err)
				}
				codec.Release(c) // as the router does after a scoped handler
			}
		})
	}
}

// TestCodecCodes: the codes the codec treats apart are remoting's.
func TestCodecCodes(t *testing.T) {
	assert.Equal(t, []int32{remoting.SendMessage, remoting.PullMessage, remoting.SendMessageV2, remoting.SendBatchMessage}, codec.CodecCodes)
}

func TestDecodePoolsSendAndPullRequestAndResponseMaps(t *testing.T) {
	tests := []struct {
		name string
		give *codec.Command
		want bool
	}{
		{"send", &codec.Command{Code: remoting.SendMessage}, true},
		{"send v2", &codec.Command{Code: remoting.SendMessageV2}, true},
		{"batch", &codec.Command{Code: remoting.SendBatchMessage}, true},
		{"pull", &codec.Command{Code: remoting.PullMessage}, true},
		{"other request", &codec.Command{Code: remoting.HeartBeat}, false},
		{"response with code 10", &codec.Command{Code: 10, Flag: codec.FlagResponse}, true},
		{"response with code 0", &codec.Command{Code: 0, Flag: codec.FlagResponse}, true},
	}
	for _, tt := range tests {
		for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
			tt.give.SerializeType = st
			tt.give.ExtFields = map[string]string{"topic": "T"}
			got, err := codec.Decode(codec.Encode(tt.give))
			require.NoError(t, err)
			assert.Equal(t, tt.want, codec.PooledExt(got), "%s, serialize type %d", tt.name, st)
			assert.Equal(t, "T", got.Ext("topic"))
		}
	}
}
