package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/quivermq/quiver/core/transport"
)

// FuzzReadFrame reads an arbitrary byte stream as frames: no panic, every
// frame is within the limits, the frames re-framed are exactly the bytes
// consumed, and the stream ends with a clean io.EOF only at a frame
// boundary.
func FuzzReadFrame(f *testing.F) {
	const limit = 1 << 12
	f.Add([]byte{})
	f.Add(append(be32(4), 0, 0, 0, 0))
	f.Add(append(append(be32(6), "\x00\x00\x00\x02{}"...), append(be32(5), "abcde"...)...))
	f.Add(be32(0x7FFFFFFF))
	f.Add(be32(0xFFFFFFFF))
	f.Add(append(be32(100), "short"...))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := NewConn(newFake(stream), testConfig(), limit)
		var reframed []byte
		for range len(stream) + 1 {
			fr, err := c.ReadFrame(context.Background())
			if err != nil {
				switch {
				case errors.Is(err, io.EOF):
					if !bytes.Equal(reframed, stream) {
						t.Fatalf("clean EOF after %d of %d bytes", len(reframed), len(stream))
					}
				case errors.Is(err, io.ErrUnexpectedEOF):
					if len(reframed) >= len(stream) {
						t.Fatal("truncation reported with nothing left")
					}
				case errors.Is(err, transport.ErrBadFrame), errors.Is(err, transport.ErrFrameTooLarge):
					n := int32(binary.BigEndian.Uint32(stream[len(reframed):]))
					if n >= 4 && n <= limit {
						t.Fatalf("length %d refused: %v", n, err)
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				if !bytes.HasPrefix(stream, reframed) {
					t.Fatal("frames do not match the stream")
				}
				return
			}
			if len(fr) < 4 || len(fr) > limit {
				t.Fatalf("frame of %d bytes outside [4, %d]", len(fr), limit)
			}
			reframed = append(append(reframed, be32(uint32(len(fr)))...), fr...)
		}
		t.Fatal("more frames than bytes")
	})
}
