package codec_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

var knownLanguages = map[string]bool{
	"JAVA": true, "CPP": true, "DOTNET": true, "PYTHON": true, "DELPHI": true, "ERLANG": true,
	"RUBY": true, "OTHER": true, "HTTP": true, "GO": true, "PHP": true, "OMS": true, "RUST": true,
}

// FuzzDecode feeds arbitrary frames to Decode. It must never panic, every
// error must wrap ErrBadHeader (a *HeaderShapeError too), and a decoded command must survive
// Encode + Decode unchanged (up to the documented normalisations: an empty
// language is written as ServerLanguage by both headers, and the binary
// header writes an unknown language as OTHER).
func FuzzDecode(f *testing.F) {
	f.Add(jsonFrame(capturedGoHeader, nil))
	f.Add(jsonFrame(capturedGoHeader, []byte("body")))
	f.Add(jsonFrame(`{"code":0,"language":9,"extFields":{"a":null,"b":"\u0001\u0002"}}`, nil))
	f.Add(jsonFrame(`{"code":11,"extFields":{"offset":5}}`, nil))
	f.Add(jsonFrame(`{"code":"10","opaque":1.5,"flag":true,"remark":null,"extFields":{"a":1e3,"b":-0.50,"c":null,"d":false}}`, nil))
	f.Add(jsonFrame(`{"code":{},"opaque":3,"extFields":[1]}`, nil))
	f.Add(jsonFrame(`null`, nil))
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{7, 0, 0, 2, '{', '}'})
	for _, c := range sampleCommands() {
		for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
			c.SerializeType = st
			f.Add(codec.Encode(c))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := codec.Decode(frame)
		if err != nil {
			if !errors.Is(err, codec.ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if c.ExtFields == nil {
			t.Fatal("decoded command has nil ExtFields")
		}
		enc := codec.Encode(c)
		if int(binary.BigEndian.Uint32(enc)&0xFFFFFF) > codec.MaxHeaderSize {
			return // escaping grew the header past what Decode accepts
		}
		c2, err := codec.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v\nframe %q\nre-encoded %q", err, frame, enc)
		}
		want := *c
		switch {
		case want.Language == "":
			want.Language = codec.ServerLanguage
		case want.SerializeType == codec.SerializeRocketMQ && !knownLanguages[want.Language]:
			want.Language = "OTHER"
		}
		if !bytes.Equal(want.Body, c2.Body) {
			t.Fatalf("body changed: %q then %q", want.Body, c2.Body)
		}
		want.Body, c2.Body = nil, nil
		if want.Code != c2.Code || want.Language != c2.Language || want.Version != c2.Version ||
			want.Opaque != c2.Opaque || want.Flag != c2.Flag || want.Remark != c2.Remark ||
			want.SerializeType != c2.SerializeType || len(want.ExtFields) != len(c2.ExtFields) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", want, *c2)
		}
		for k, v := range want.ExtFields {
			if v2, ok := c2.ExtFields[k]; !ok || v2 != v {
				t.Fatalf("extFields[%q] = %q, then %q (present %v)", k, v, v2, ok)
			}
		}
		// Encoding is deterministic and stable from here on.
		if enc2 := codec.Encode(c2); !bytes.Equal(codec.Encode(&want), enc2) {
			t.Fatalf("encoding not stable:\n%q\n%q", codec.Encode(&want), enc2)
		}
	})
}

// FuzzResponseExt sets fields on a response (no map: SetExt's ordered
// list), sometimes with a map assigned on top, and checks that both
// headers carry exactly what Ext reads, each key once.
func FuzzResponseExt(f *testing.F) {
	f.Add([]byte("msgId\x00ID\x00queueId\x001\x00queueId\x002"), false, "")
	f.Add([]byte("a\x00\x00\x00b"), true, "a")
	f.Add([]byte("\"\\\x01\x00\xff\xfe\x00k\x00\u2028"), false, "k")
	f.Fuzz(func(t *testing.T, pairs []byte, withMap bool, mapKey string) {
		resp := codec.NewResponse(&codec.Command{Opaque: 1}, remoting.Success, "")
		want := map[string]string{}
		parts := bytes.Split(pairs, []byte{0})
		for i := 0; i+1 < len(parts); i += 2 {
			k, v := string(parts[i]), string(parts[i+1])
			resp.SetExt(k, v)
			want[k] = v
		}
		if withMap {
			resp.ExtFields = map[string]string{mapKey: "m"}
			want[mapKey] = "m"
		}
		for k, v := range want {
			if got := resp.Ext(k); got != v {
				t.Fatalf("Ext(%q) = %q, want %q", k, got, v)
			}
		}
		for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
			resp.SerializeType = st
			c, err := codec.Decode(codec.Encode(resp))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if st == codec.SerializeJSON {
				// JSON carries valid UTF-8 only: compare after the encoder's
				// replacement of invalid bytes.
				for k, v := range want {
					if !utf8.ValidString(k) || !utf8.ValidString(v) {
						return
					}
				}
			}
			if len(c.ExtFields) != len(want) {
				t.Fatalf("serialize type %d: %d fields decoded, want %d: %q vs %q", st, len(c.ExtFields), len(want), c.ExtFields, want)
			}
			for k, v := range want {
				if c.ExtFields[k] != v {
					t.Fatalf("serialize type %d: [%q] = %q, want %q", st, k, c.ExtFields[k], v)
				}
			}
		}
	})
}
