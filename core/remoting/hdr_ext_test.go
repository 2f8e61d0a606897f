package remoting_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

func TestResponseExtWithoutMap(t *testing.T) {
	req := &remoting.Command{Code: remoting.SendMessage, Opaque: 5, SerializeType: codec.SerializeRocketMQ}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExt("msgId", "ID")
	resp.SetExt("queueId", "1")
	resp.SetExtInt("queueOffset", 42)
	resp.SetExt("queueId", "2") // replaced in place
	assert.Nil(t, resp.ExtFields, "a response records fields without a map")
	assert.Equal(t, "2", resp.Ext("queueId"))
	assert.Equal(t, "42", resp.Ext("queueOffset"))
	assert.Equal(t, "", resp.Ext("absent"))
	e := remoting.ReadExt(resp)
	assert.Equal(t, int64(42), e.Int64("queueOffset"))
	assert.Equal(t, "ID", e.String("msgId"))
	require.NoError(t, e.Err)

	for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
		resp.SerializeType = st
		got, err := codec.Decode(codec.Encode(resp))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"msgId": "ID", "queueId": "2", "queueOffset": "42"}, got.ExtFields, "serialize type %d", st)
	}
	// JSON writes the fields in the order set, no sorting.
	resp.SerializeType = codec.SerializeJSON
	assert.Contains(t, string(codec.Encode(resp)), `"extFields":{"msgId":"ID","queueId":"2","queueOffset":"42"}`)

	assert.Equal(t, map[string]string{"msgId": "ID", "queueId": "2", "queueOffset": "42"}, resp.ExtMap())
	resp.SetExt("after", "x") // the map now holds everything
	assert.Equal(t, "x", resp.ExtFields["after"])
}

func TestExtMapEntryShadowsField(t *testing.T) {
	resp := remoting.NewResponse(&remoting.Command{}, remoting.Success, "")
	resp.SetExt("k", "from list")
	resp.SetExt("only", "list")
	resp.ExtFields = map[string]string{"k": "from map"} // code assigning a map afterwards
	assert.Equal(t, "from map", resp.Ext("k"))
	assert.Equal(t, "list", resp.Ext("only"))
	for _, st := range []byte{codec.SerializeJSON, codec.SerializeRocketMQ} {
		resp.SerializeType = st
		frame := codec.Encode(resp)
		got, err := codec.Decode(frame)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"k": "from map", "only": "list"}, got.ExtFields)
		if st == codec.SerializeJSON {
			assert.Equal(t, 1, countSubstr(string(frame), `"k":`), "a key is written once")
		}
	}
}

func countSubstr(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}

func TestKeepsNothingReleasesHeaderMap(t *testing.T) {
	r := remoting.NewRouter()
	var seen string
	r.Register(remoting.SendMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		seen = req.Ext("topic")
		return remoting.NewResponse(req, remoting.Success, "")
	}, remoting.Mode{KeepsNothing: true})
	r.Register(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	})
	var icSaw string
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		icSaw = req.ExtFields["topic"] // interceptors still get the map
		return nil
	})
	decode := func(code int32) *remoting.Command {
		c, err := codec.Decode(codec.Encode(&remoting.Command{Code: code, ExtFields: map[string]string{"topic": "T"}}))
		require.NoError(t, err)
		return c
	}

	req := decode(remoting.SendMessage)
	resp := r.Handle(context.Background(), nil, req)
	require.NotNil(t, resp)
	assert.Equal(t, "T", seen)
	assert.Equal(t, "T", icSaw)
	assert.Nil(t, req.ExtFields, "the map went back to the pool")

	req = decode(remoting.PullMessage) // registered without KeepsNothing: keeps its map
	r.Handle(context.Background(), nil, req)
	assert.Equal(t, "T", req.ExtFields["topic"])

	// A hand-built request's map is the caller's: never pooled.
	own := map[string]string{"topic": "T"}
	r.Handle(context.Background(), nil, &remoting.Command{Code: remoting.SendMessage, ExtFields: own})
	assert.Equal(t, map[string]string{"topic": "T"}, own)
}

func TestKeepsNothingReleasesOnInterceptorAnswer(t *testing.T) {
	r := remoting.NewRouter()
	r.Register(remoting.SendMessage, func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		t.Fatal("the interceptor answers first")
		return nil
	}, remoting.Mode{KeepsNothing: true})
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.NoPermission, "no")
	})
	req, err := codec.Decode(codec.Encode(&remoting.Command{Code: remoting.SendMessage, ExtFields: map[string]string{"topic": "T"}}))
	require.NoError(t, err)
	resp := r.Handle(context.Background(), nil, req)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Nil(t, req.ExtFields)
}

// A recycled map must come back empty.
func TestPooledMapComesBackEmpty(t *testing.T) {
	r := remoting.NewRouter()
	r.Register(remoting.SendMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return nil
	}, remoting.Mode{KeepsNothing: true})
	for i := 0; i < 100; i++ {
		ext := map[string]string{"k" + string(rune('a'+i%26)): "v"}
		req, err := codec.Decode(codec.Encode(&remoting.Command{Code: remoting.SendMessage, ExtFields: ext}))
		require.NoError(t, err)
		require.Equal(t, ext, req.ExtFields, "iteration %d", i)
		r.Handle(context.Background(), nil, req)
	}
}
