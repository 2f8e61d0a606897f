package codec

import (
	"encoding/binary"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rawJSONFrame(hdr string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, body...)
}

// rawBinaryFrame is a ROCKETMQ-serialized request of code with pairs (a
// key repeated on purpose).
func rawBinaryFrame(code int16, pairs ...string) []byte {
	be := binary.BigEndian
	h := be.AppendUint16(nil, uint16(code))
	h = append(h, 9)
	h = be.AppendUint16(h, 317)
	h = be.AppendUint32(h, 7)
	h = be.AppendUint32(h, 0)
	h = be.AppendUint32(h, 0)
	var ext []byte
	for i := 0; i+1 < len(pairs); i += 2 {
		ext = appendBinaryPair(ext, pairs[i], pairs[i+1])
	}
	h = be.AppendUint32(h, uint32(len(ext)))
	h = append(h, ext...)
	f := be.AppendUint32(nil, uint32(SerializeRocketMQ)<<24|uint32(len(h)))
	return append(f, h...)
}

// rawFieldsMap is what RawExtFields' entries mean: the last entry of a
// key wins and a nil value removes it.
func rawFieldsMap(fields []RawField) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		if f.Value == nil {
			delete(m, string(f.Key))
			continue
		}
		m[string(f.Key)] = string(f.Value)
	}
	return m
}

func TestRawSendsKeepsRawFields(t *testing.T) {
	tests := []struct {
		name  string
		give  []byte
		want  map[string]string
		isRaw bool
	}{
		{
			name:  "json send v2",
			give:  rawJSONFrame(`{"code":310,"language":"GO","opaque":3,"extFields":{"a":"g","b":"T","e":"-1","g":1700000000000,"m":false,"c":null,"b":"T2","x\u00e9":"\u00e9"}}`, []byte("body")),
			want:  map[string]string{"a": "g", "b": "T2", "e": "-1", "g": "1700000000000", "m": "false", "xé": "é"},
			isRaw: true,
		},
		{
			name:  "json lenient numbers",
			give:  rawJSONFrame(`{"code":10,"extFields":{"queueId":1.50,"sysFlag":1e3,"topic":"t"}}`, nil),
			want:  map[string]string{"queueId": "1.50", "sysFlag": "1E+3", "topic": "t"},
			isRaw: true,
		},
		{
			name: "code after extFields: map",
			give: rawJSONFrame(`{"extFields":{"a":"g"},"code":310}`, nil),
			want: map[string]string{"a": "g"},
		},
		{
			name: "code changed after extFields: map",
			give: rawJSONFrame(`{"code":310,"extFields":{"a":"g"},"code":105}`, nil),
			want: map[string]string{"a": "g"},
		},
		{
			name: "a response: map",
			give: rawJSONFrame(`{"code":310,"extFields":{"a":"g"},"flag":1}`, nil),
			want: map[string]string{"a": "g"},
		},
		{
			name: "not a send: map",
			give: rawJSONFrame(`{"code":11,"extFields":{"topic":"t"}}`, nil),
			want: map[string]string{"topic": "t"},
		},
		{
			name: "null extFields",
			give: rawJSONFrame(`{"code":310,"extFields":null}`, nil),
			want: map[string]string{},
		},
		{
			name:  "binary send",
			give:  rawBinaryFrame(320, "a", "g", "b", "T", "b", "T2", "m", ""),
			want:  map[string]string{"a": "g", "b": "T2", "m": ""},
			isRaw: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := Decode(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ref.ExtFields)

			c, err := DecodeWith(tt.give, Options{RawSends: true})
			require.NoError(t, err)
			fields, isRaw := c.RawExtFields()
			assert.Equal(t, tt.isRaw, isRaw)
			if isRaw {
				assert.Nil(t, c.ExtFields)
				assert.Equal(t, tt.want, rawFieldsMap(fields))
			}
			assert.Equal(t, tt.want[" none"], c.Ext(" none")) // builds the map
			_, isRaw = c.RawExtFields()
			assert.False(t, isRaw)
			assert.Equal(t, tt.want, c.ExtFields)
			c.Release()
		})
	}
}

func TestRawSendsRefusesAsDecode(t *testing.T) {
	for _, hdr := range []string{
		`{"code":310,"extFields":{"a":[1]}}`,
		`{"code":310,"extFields":{"a":{}}}`,
		`{"code":310,"extFields":{"a":"\x"}}`,
		`{"code":310,"extFields":{"a":1e99999999999}}`,
		`{"code":310,"extFields":{"a":"x"}`,
		`{"code":310,"extFields":{"a":"x"},"opaque":{}}`,
	} {
		_, want := Decode(rawJSONFrame(hdr, nil))
		require.Error(t, want, hdr)
		_, got := DecodeWith(rawJSONFrame(hdr, nil), Options{RawSends: true})
		require.Error(t, got, hdr)
		assert.Equal(t, want.Error(), got.Error(), hdr)
	}
	bad := rawBinaryFrame(310, "a", "g")
	bad = bad[:len(bad)-1] // the value cut short
	binary.BigEndian.PutUint32(bad, uint32(SerializeRocketMQ)<<24|uint32(len(bad)-4))
	_, want := Decode(bad)
	_, got := DecodeWith(bad, Options{RawSends: true})
	require.Error(t, got)
	assert.Equal(t, want.Error(), got.Error())
}

// FuzzDeferredExt: decoding a frame without its map (Options.RawSends) accepts
// and refuses exactly what Decode does, with the same error, the same
// command and entries whose meaning (RawExtFields: the last entry wins,
// null removes) is Decode's map; the map built later is that map too.
// Each input is tried as a frame, as a JSON header of a SEND_MESSAGE_V2
// and, read as genLenientHeader's recipe, as a lenient header given a send
// code.
func FuzzDeferredExt(f *testing.F) {
	for _, s := range jsonHeaderSamples {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"code":310,"extFields":{"a":"g","b":"T","d":4,"e":" 1","g":1.5,"m":true,"b":null}}`))
	f.Add([]byte(`{"code":10,"extFields":{"producerGroup":"g","topic":"T","queueId":"2147483648","x":"\u0000"}}`))
	f.Add(rawBinaryFrame(320, "a", "g", "b", "T", "e", "1"))
	f.Add(rawJSONFrame(`{"code":320,"flag":0,"extFields":{"a":"g"}}`, []byte("body")))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDeferredMatches(t, b)
		checkDeferredMatches(t, rawJSONFrame(string(b), nil))
		hdr, _ := genLenientHeader(b)
		codes := [...]string{`{"code":10,`, `{"code":310,`, `{"code":320,`}
		pick := 0
		if len(b) > 0 {
			pick = int(b[0]) % len(codes)
		}
		checkDeferredMatches(t, rawJSONFrame(codes[pick]+string(hdr[1:]), nil))
	})
}

func checkDeferredMatches(t *testing.T, frame []byte) {
	ref, refErr := Decode(frame)
	got, err := DecodeWith(frame, Options{RawSends: true})
	if refErr != nil || err != nil {
		if refErr == nil || err == nil || refErr.Error() != err.Error() {
			t.Fatalf("frame %q: Decode: %v; without the map: %v", frame, refErr, err)
		}
		return
	}
	if fields, ok := got.RawExtFields(); ok {
		if got.ExtFields != nil {
			t.Fatalf("frame %q: both a map and raw entries", frame)
		}
		if m := rawFieldsMap(fields); !maps.Equal(m, ref.ExtFields) {
			t.Fatalf("frame %q: raw entries mean %q, Decode's map %q", frame, m, ref.ExtFields)
		}
		if !rawExtCode(got.Code) || got.IsResponse() {
			t.Fatalf("frame %q: code %d flag %d kept raw", frame, got.Code, got.Flag)
		}
	}
	got.ensureExtMap()
	got.pooledExt, ref.pooledExt = false, false
	if !assert.ObjectsAreEqual(ref, got) {
		t.Fatalf("frame %q:\nDecode     %+v\nwithout map %+v", frame, ref, got)
	}
}
