package remoting_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/quivermq/quiver/core/remoting"
)

var knownLanguages = map[string]bool{
	"JAVA": true, "CPP": true, "DOTNET": true, "PYTHON": true, "DELPHI": true, "ERLANG": true,
	"RUBY": true, "OTHER": true, "HTTP": true, "GO": true, "PHP": true, "OMS": true, "RUST": true,
}

// FuzzDecode feeds arbitrary frames to Decode. It must never panic, every
// error must wrap ErrBadHeader, and a decoded command must survive
// Encode + Decode unchanged (up to the documented normalisations: an empty
// language is written as ServerLanguage by both headers, and the binary
// header writes an unknown language as OTHER).
func FuzzDecode(f *testing.F) {
	f.Add(jsonFrame(capturedGoHeader, nil))
	f.Add(jsonFrame(capturedGoHeader, []byte("body")))
	f.Add(jsonFrame(`{"code":0,"language":9,"extFields":{"a":null,"b":"\u0001\u0002"}}`, nil))
	f.Add(jsonFrame(`{"code":11,"extFields":{"offset":5}}`, nil))
	f.Add(jsonFrame(`null`, nil))
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{7, 0, 0, 2, '{', '}'})
	for _, c := range sampleCommands() {
		for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
			c.SerializeType = st
			f.Add(remoting.Encode(c))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := remoting.Decode(frame)
		if err != nil {
			if !errors.Is(err, remoting.ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if c.ExtFields == nil {
			t.Fatal("decoded command has nil ExtFields")
		}
		enc := remoting.Encode(c)
		if int(binary.BigEndian.Uint32(enc)&0xFFFFFF) > remoting.MaxHeaderSize {
			return // escaping grew the header past what Decode accepts
		}
		c2, err := remoting.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v\nframe %q\nre-encoded %q", err, frame, enc)
		}
		want := *c
		switch {
		case want.Language == "":
			want.Language = remoting.ServerLanguage
		case want.SerializeType == remoting.SerializeRocketMQ && !knownLanguages[want.Language]:
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
		if enc2 := remoting.Encode(c2); !bytes.Equal(remoting.Encode(&want), enc2) {
			t.Fatalf("encoding not stable:\n%q\n%q", remoting.Encode(&want), enc2)
		}
	})
}
