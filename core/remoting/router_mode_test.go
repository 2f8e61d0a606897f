package remoting

import (
	"context"
	"encoding/binary"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting/codec"
)

func jsonFrame(hdr string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	return append(append(b, hdr...), body...)
}

// decodeFor decodes frame as a Peer serving r does.
func decodeFor(t *testing.T, r *Router, frame []byte) *Command {
	c, err := codec.DecodeWith(frame, codec.Options{RawSends: r.rawSends.Load()})
	require.NoError(t, err)
	return c
}

// TestNoExtMapLeavesExtFieldsNil: the sends of a router whose send
// handlers and interceptors all promise NoExtMap are decoded without their
// map, so a handler that read the field ExtFields would find it nil; an
// interceptor added without the promise (ACL) gets the map back.
func TestNoExtMapLeavesExtFieldsNil(t *testing.T) {
	frame := jsonFrame(`{"code":310,"opaque":1,"extFields":{"a":"g","b":"T"}}`, nil)
	r := NewRouter()
	var field map[string]string
	var viaExt string
	r.Register(SendMessageV2, func(_ context.Context, _ *Peer, req *Command) *Command {
		field, viaExt = maps.Clone(req.ExtFields), req.Ext("b")
		return NewResponse(req, Success, "")
	}, Mode{NoExtMap: true, KeepsNothing: true})
	r.Use(func(context.Context, *Peer, *Command) *Command { return nil }, Mode{NoExtMap: true})

	c := decodeFor(t, r, frame)
	_, raw := c.RawExtFields()
	require.True(t, raw)
	assert.Nil(t, c.ExtFields)
	r.Handle(context.Background(), nil, c)
	assert.Nil(t, field, "a NoExtMap handler finds no map")
	assert.Equal(t, "T", viaExt)

	// Decoded before Use: the router builds the map for the interceptor.
	early := decodeFor(t, r, frame)
	var seen map[string]string
	r.Use(func(_ context.Context, _ *Peer, req *Command) *Command {
		seen = maps.Clone(req.ExtFields)
		return nil
	})
	r.Handle(context.Background(), nil, early)
	assert.Equal(t, map[string]string{"a": "g", "b": "T"}, seen)

	c = decodeFor(t, r, frame)
	_, raw = c.RawExtFields()
	assert.False(t, raw, "an interceptor added without NoExtMap reads the map")
	assert.Equal(t, map[string]string{"a": "g", "b": "T"}, c.ExtFields)
}

// TestNoExtMapNeedsEverySend: one send handler without the promise keeps
// every send's map.
func TestNoExtMapNeedsEverySend(t *testing.T) {
	ok := func(_ context.Context, _ *Peer, req *Command) *Command { return NewResponse(req, Success, "") }
	r := NewRouter()
	r.Register(SendMessageV2, ok, Mode{NoExtMap: true})
	assert.True(t, r.rawSends.Load())
	r.Register(SendBatchMessage, ok)
	assert.False(t, r.rawSends.Load())
}

func TestNoExtMapOnlyForSends(t *testing.T) {
	r := NewRouter()
	assert.PanicsWithValue(t, "remoting: request code 11 (PULL_MESSAGE) registered with NoExtMap: only sends are decoded without their map", func() {
		r.Register(PullMessage, func(context.Context, *Peer, *Command) *Command { return nil }, Mode{NoExtMap: true})
	})
}
