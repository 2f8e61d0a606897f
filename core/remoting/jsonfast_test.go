package remoting

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var jsonHeaderSamples = []string{
	`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicA"}}`,
	`{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"0","queueOffset":"5"},"flag":1,"language":"JAVA","opaque":2,"serializeTypeCurrentRPC":"JSON","version":409}`,
	`{"code":10,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"properties":"TAGS\u0001TagA\u0002KEYS\u0001a b\u0002","x":"\u003c\u003e\u0026 \"q\" \\ \/ \n\t\u00e9\ud83d\ude00"}}`,
	` { "code" : -3 , "extFields" : { } , "remark" : null , "unknown" : [1, {"a": [true, false, null, -1.5e3]}, "s"] } `,
	`{"code":1,"extFields":null,"language":9}`,
	`{"code":1,"extFields":{"a":null,"b":"x","a":"y"}}`,
	`{}`,
}

// TestFastJSONHeaderMatchesEncodingJSON checks the fast decoder against
// encoding/json on inputs it accepts.
func TestFastJSONHeaderMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonHeaderSamples {
		t.Run(s, func(t *testing.T) {
			fast, ok := decodeJSONHeaderFast([]byte(s))
			require.True(t, ok, "fast path refused a plain header")
			std, err := decodeJSONHeaderStd([]byte(s))
			require.NoError(t, err)
			assert.Equal(t, std, ForgetPool(fast))
		})
	}
}

func TestFastJSONHeaderDefersOddInput(t *testing.T) {
	tests := []string{
		`{"Code":105}`,          // case-insensitive key: encoding/json's call
		`{"code":1.0}`,          // not an int
		`{"code":99999999999}`,  // overflow
		`{"code":01}`,           // leading zero
		`{"remark":"\ud800"}`,   // lone surrogate
		"{\"remark\":\"\xff\"}", // invalid UTF-8
		"{\"remark\":\"a\nb\"}", // raw control character
		`{"code":1} trailing`,   // trailing garbage
		`{"code":1,}`,           // trailing comma
		`{"extFields":{"a":1}}`, // non-string value
		`[1]`,
		``,
	}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			_, ok := decodeJSONHeaderFast([]byte(s))
			assert.False(t, ok)
		})
	}
}

// FuzzFastJSONHeader: whenever the fast path accepts input, encoding/json
// accepts it too and decodes the same command.
func FuzzFastJSONHeader(f *testing.F) {
	for _, s := range jsonHeaderSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeJSONHeaderFast(b)
		if !ok {
			return
		}
		std, err := decodeJSONHeaderStd(b)
		if err != nil {
			t.Fatalf("fast path accepted %q which encoding/json rejects: %v", b, err)
		}
		fast.pooledExt = false
		if !assert.ObjectsAreEqual(std, fast) {
			t.Fatalf("decoders differ on %q:\nfast %+v\nstd  %+v", b, fast, std)
		}
	})
}
