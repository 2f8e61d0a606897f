//go:build race

package remoting

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting/codec"
)

type recycled struct{ frames int }

func (r *recycled) RecycleFrame([]byte) { r.frames++ }

// TestKeepsNothingZeroesKeptBody: in a race-detector build the frame of a
// released request is zeroed before the transport gets it back, so a
// KeepsNothing handler that kept its body reads zeros (and a goroutine
// reading it races with the zeroing).
func TestKeepsNothingZeroesKeptBody(t *testing.T) {
	r := NewRouter()
	var kept []byte
	r.Register(SendMessageV2, func(_ context.Context, _ *Peer, req *Command) *Command {
		kept = req.Body // breaks the promise
		return NewResponse(req, Success, "")
	}, Mode{KeepsNothing: true})
	rec := &recycled{}
	req, err := codec.DecodeWith(jsonFrame(`{"code":310,"extFields":{"a":"g"}}`, []byte("body")), codec.Options{Recycler: rec})
	require.NoError(t, err)
	r.Handle(context.Background(), nil, req)
	assert.Equal(t, 1, rec.frames)
	assert.Equal(t, []byte{0, 0, 0, 0}, kept)
}
