package broker

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// officialSendHeader is the JSON header rocketmq-client-go/v2 sends for a
// SEND_MESSAGE (encoding/json of its RemotingCommand: the extFields map's
// keys sorted).
const officialSendHeader = `{"code":10,"language":"GO","version":317,"opaque":42,"flag":0,"remark":"","extFields":{"batch":"false","bname":"broker-a","bornTimestamp":"1764950000123","defaultTopic":"TBW102","defaultTopicQueueNums":"4","flag":"0","maxReconsumeTimes":"0","producerGroup":"bench-official-producer","properties":"UNIQ_KEY\u0001C0A8000100002A9F0000000000000001\u0002WAIT\u0001true\u0002TAGS\u0001TagA","queueId":"3","reconsumeTimes":"0","sysFlag":"0","topic":"BenchOfficial","unitMode":"false"}}`

func sendFrame(hdr string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, body...)
}

// rawSends decodes sends without their header map, as the broker's
// connections do when no interceptor needs it.
var rawSends = codec.Options{RawSends: true}

// decodeBoth decodes frame with its map and without (RawExtFields), as a
// broker's connection does; ok is false when Decode refuses it.
func decodeBoth(t testing.TB, frame []byte) (withMap, raw *remoting.Command, ok bool) {
	m, errMap := codec.Decode(frame)
	c, errRaw := codec.DecodeWith(frame, rawSends)
	if (errMap == nil) != (errRaw == nil) {
		t.Fatalf("frame %q: Decode: %v; without the map: %v", frame, errMap, errRaw)
	}
	return m, c, errMap == nil
}

func TestSendHeaderTyped(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    sendHeader
		wantErr string
	}{
		{
			name: "official client",
			give: officialSendHeader,
			want: sendHeader{producerGroup: "bench-official-producer", topic: "BenchOfficial", defaultTopic: "TBW102", defaultTopicQueueNums: 4, queueID: 3,
				bornTimestamp: 1764950000123, properties: "UNIQ_KEY\x01C0A8000100002A9F0000000000000001\x02WAIT\x01true\x02TAGS\x01TagA"},
		},
		{
			name: "v2 lenient: numbers, spaces, null, repeats",
			give: `{"code":310,"extFields":{"a":"g","b":"T","b":"T2","d":8,"e":" 2 ","f":null,"g":-5,"h":"+7","j":"","l":"\u0033","m":" TRUE","c":null}}`,
			want: sendHeader{producerGroup: "g", topic: "T2", defaultTopicQueueNums: 8, queueID: 2, bornTimestamp: -5, flag: 7, maxReconsumeTimes: 3, batch: true},
		},
		{
			name:    "missing topic",
			give:    `{"code":310,"extFields":{"a":"g","e":"1"}}`,
			wantErr: "the custom field <b> is null",
		},
		{
			name:    "null removes the topic",
			give:    `{"code":10,"extFields":{"producerGroup":"g","topic":"T","topic":null,"queueId":1}}`,
			wantErr: "the custom field <topic> is null",
		},
		{
			name:    "queue id out of int32",
			give:    `{"code":320,"extFields":{"a":"g","b":"T","e":2147483648}}`,
			wantErr: `the custom field <e> has bad value "2147483648": not a 32-bit integer`,
		},
		{
			name:    "first error wins",
			give:    `{"code":310,"extFields":{"a":"g","b":"T","e":"1","g":"x","f":"1.5"}}`,
			wantErr: `the custom field <f> has bad value "1.5": not a 32-bit integer`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withMap, raw, ok := decodeBoth(t, sendFrame(tt.give, nil))
			require.True(t, ok)
			_, isRaw := raw.RawExtFields()
			require.True(t, isRaw, "decoded without the map")
			for _, c := range []struct {
				name  string
				parse func(*remoting.Command, *sendHeader) error
				req   *remoting.Command
			}{{"typed", parseSendHeader, raw}, {"map", parseSendHeaderMap, withMap}} {
				var h sendHeader
				err := c.parse(c.req, &h)
				if tt.wantErr != "" {
					assert.EqualError(t, err, tt.wantErr, c.name)
					continue
				}
				require.NoError(t, err, c.name)
				assert.Equal(t, tt.want, h, c.name)
			}
			_, isRaw = raw.RawExtFields()
			assert.True(t, isRaw, "the typed path built no map")
		})
	}
}

// FuzzSendHeaderTyped: the typed header decoder (raw entries, no map)
// and the map decoder (remoting.ReadExt) agree, header and error, on every
// frame Decode accepts. Each input is tried as a frame, and as the
// extFields of a SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
// written from a recipe (genSendExt) that mixes the header's keys with
// the values fastjson is lenient about.
func FuzzSendHeaderTyped(f *testing.F) {
	f.Add([]byte(officialSendHeader))
	f.Add([]byte(`{"code":310,"extFields":{"a":"g","b":"T","e":" 1","g":1.5e3,"d":null,"m":true}}`))
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte{0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 9, 12, 0, 200, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSendHeaders(t, sendFrame(string(b), nil))
		checkSendHeaders(t, b)
		for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage} {
			checkSendHeaders(t, sendFrame(genSendExt(code, b), nil))
		}
	})
}

func checkSendHeaders(t *testing.T, frame []byte) {
	withMap, raw, ok := decodeBoth(t, frame)
	if !ok {
		return
	}
	var hm, hr sendHeader
	errMap := parseSendHeaderMap(withMap, &hm)
	errRaw := parseSendHeader(raw, &hr)
	if (errMap == nil) != (errRaw == nil) || (errMap != nil && errMap.Error() != errRaw.Error()) {
		t.Fatalf("frame %q: map: %v; typed: %v", frame, errMap, errRaw)
	}
	if errMap == nil && hm != hr {
		t.Fatalf("frame %q:\nmap   %+v\ntyped %+v", frame, hm, hr)
	}
}

// genSendExt writes a send header of code from recipe bytes.
func genSendExt(code int32, b []byte) string {
	keys := longKeys[:]
	if shortSendKeys(code) {
		keys = shortKeys[:]
	}
	values := [...]string{`"1"`, `"-1"`, `" 7 "`, `"+3"`, `""`, `null`, `true`, `false`, `"TRUE"`, `2147483647`, `2147483648`, `-2147483649`,
		`1.5`, `1e3`, `"0x10"`, `"9223372036854775807"`, `"9223372036854775808"`, `"007"`, `"\u00a05"`, `"T\u00e9"`, `"a\"b"`, `12345678901234567890`, `"1_000"`, `"--1"`}
	var sb strings.Builder
	sb.WriteString(`{"code":`)
	sb.WriteString(strconv.Itoa(int(code)))
	sb.WriteString(`,"extFields":{`)
	for i := 0; i+1 < len(b); i += 2 {
		if i > 0 {
			sb.WriteByte(',')
		}
		k := keys[int(b[i])%len(keys)]
		if b[i] >= 240 {
			k = "zz" // unknown key
		}
		sb.WriteString(`"` + k + `":`)
		v := int(b[i+1])
		if v < len(values) {
			sb.WriteString(values[v])
		} else {
			sb.WriteString(`"` + strconv.Itoa(v-len(values)) + `"`)
		}
	}
	sb.WriteString("}}")
	return sb.String()
}

// BenchmarkSendHeader decodes the official client's SEND_MESSAGE header
// and reads the send header from it: through the map (as before) and
// without it (typed).
func BenchmarkSendHeader(b *testing.B) {
	frame := sendFrame(officialSendHeader, make([]byte, 1024))
	for _, bc := range []struct {
		name string
		o    codec.Options
	}{{"map", codec.Options{}}, {"typed", rawSends}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := codec.DecodeWith(frame, bc.o)
				if err != nil {
					b.Fatal(err)
				}
				var h sendHeader
				if err := parseSendHeader(req, &h); err != nil {
					b.Fatal(err)
				}
				req.Release()
			}
		})
	}
}
