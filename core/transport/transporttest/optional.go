package transporttest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
)

// testFrameBatcher checks transport.FrameBatcher where the client end has
// it: a batch arrives whole and in order (once each, unordered), its parts
// may be scribbled over once WriteFrames returned, a batch holding a frame
// above the limit is refused whole, and the connection stays usable.
func testFrameBatcher(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	fb, ok := client.(transport.FrameBatcher)
	if !ok {
		t.Skip("the Conn does not implement transport.FrameBatcher")
	}
	assert.Equal(t, MaxFrameSize, fb.MaxFrameSize(), "MaxFrameSize is the limit the factory configured")
	ctx := ctxFor(t)
	const n = 40
	var (
		want  [][]byte
		batch [][][]byte
		bufs  [][]byte
	)
	for i := range n {
		hdr, body := frame(uint64(i), 8+i), frame(uint64(i+5000), 100*i)
		want = append(want, append(bytes.Clone(hdr), body...))
		batch = append(batch, [][]byte{hdr, nil, body})
		bufs = append(bufs, hdr, body)
	}
	wait := async(t, func() error {
		err := fb.WriteFrames(ctx, batch)
		for _, b := range bufs {
			for j := range b {
				b[j] = 0xEE
			}
		}
		return err
	})
	require.NoError(t, readFrames(ctx, server, want, unordered), "a frame of WriteFrames changed or lost")
	require.NoError(t, wait())

	tooBig := [][][]byte{{frame(1, 16)}, {make([]byte, MaxFrameSize+1)}}
	err := fb.WriteFrames(ctx, tooBig)
	require.Error(t, err, "a batch with a frame above the limit")
	assert.True(t, errors.Is(err, transport.ErrFrameTooLarge), "error %v wraps transport.ErrFrameTooLarge", err)

	after := frame(99, 64)
	wait = async(t, func() error { return fb.WriteFrames(ctx, [][][]byte{{after}}) })
	got, err := server.ReadFrame(ctx)
	require.NoError(t, err)
	require.NoError(t, wait())
	assert.True(t, bytes.Equal(after, got), "the frame after a refused batch (nothing of the refused batch may be sent)")
}

// testFrameRecycler checks transport.FrameRecycler where the server end
// has it: frames read after a recycled one are intact, and recycling one
// frame does not change another frame the reader still holds.
func testFrameRecycler(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	fr, ok := server.(transport.FrameRecycler)
	if !ok {
		t.Skip("the Conn does not implement transport.FrameRecycler")
	}
	ctx := ctxFor(t)
	const n = 60
	want := make([][]byte, n)
	for i := range want {
		want[i] = frame(uint64(i+7000), 16+(i%7)*700)
	}
	wait := async(t, func() error {
		for _, w := range want {
			if err := client.WriteFrame(ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
	pending := map[string]int{}
	for _, w := range want {
		pending[string(w)]++
	}
	var held [][]byte // every third frame is kept, the others recycled
	var copies []string
	for i := range n {
		got, err := server.ReadFrame(ctx)
		require.NoError(t, err, "read frame %d", i)
		if !unordered {
			require.True(t, bytes.Equal(want[i], got), "frame %d corrupted after frames were recycled", i)
		}
		require.Positive(t, pending[string(got)], "frame %d (%d bytes) corrupted or came twice", i, len(got))
		pending[string(got)]--
		if i%3 == 0 {
			held, copies = append(held, got), append(copies, string(got))
			continue
		}
		fr.RecycleFrame(got)
	}
	require.NoError(t, wait())
	for i, h := range held {
		assert.Equal(t, copies[i], string(h), "a frame the reader kept changed when others were recycled")
	}
	fr.RecycleFrame(nil) // a frame it does not know is left alone
	fr.RecycleFrame(make([]byte, 3))
}
