package remoting_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

func TestResponseExtWithoutMap(t *testing.T) {
	req := &remoting.Command{Code: remoting.SendMessage, Opaque: 5, SerializeType: remoting.SerializeRocketMQ}
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

	for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		resp.SerializeType = st
		got, err := remoting.Decode(remoting.Encode(resp))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"msgId": "ID", "queueId": "2", "queueOffset": "42"}, got.ExtFields, "serialize type %d", st)
	}
	// JSON writes the fields in the order set, no sorting.
	resp.SerializeType = remoting.SerializeJSON
	assert.Contains(t, string(remoting.Encode(resp)), `"extFields":{"msgId":"ID","queueId":"2","queueOffset":"42"}`)

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
	for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		resp.SerializeType = st
		frame := remoting.Encode(resp)
		got, err := remoting.Decode(frame)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"k": "from map", "only": "list"}, got.ExtFields)
		if st == remoting.SerializeJSON {
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

func TestDecodePoolsSendAndPullRequestAndResponseMaps(t *testing.T) {
	tests := []struct {
		name string
		give *remoting.Command
		want bool
	}{
		{"send", &remoting.Command{Code: remoting.SendMessage}, true},
		{"send v2", &remoting.Command{Code: remoting.SendMessageV2}, true},
		{"batch", &remoting.Command{Code: remoting.SendBatchMessage}, true},
		{"pull", &remoting.Command{Code: remoting.PullMessage}, true},
		{"other request", &remoting.Command{Code: remoting.HeartBeat}, false},
		{"response with code 10", &remoting.Command{Code: 10, Flag: remoting.FlagResponse}, true},
		{"response with code 0", &remoting.Command{Code: 0, Flag: remoting.FlagResponse}, true},
	}
	for _, tt := range tests {
		for _, st := range []byte{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
			tt.give.SerializeType = st
			tt.give.ExtFields = map[string]string{"topic": "T"}
			got, err := remoting.Decode(remoting.Encode(tt.give))
			require.NoError(t, err)
			assert.Equal(t, tt.want, remoting.PooledExt(got), "%s, serialize type %d", tt.name, st)
			assert.Equal(t, "T", got.Ext("topic"))
		}
	}
}

func TestRouterScopedHandlerReleasesHeaderMap(t *testing.T) {
	r := remoting.NewRouter()
	var seen string
	r.RegisterScoped(remoting.SendMessage, remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		seen = req.Ext("topic")
		return remoting.NewResponse(req, remoting.Success, "")
	}))
	r.RegisterFunc(remoting.PullMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	})
	var icSaw string
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		icSaw = req.ExtFields["topic"] // interceptors still get the map
		return nil
	})
	decode := func(code int32) *remoting.Command {
		c, err := remoting.Decode(remoting.Encode(&remoting.Command{Code: code, ExtFields: map[string]string{"topic": "T"}}))
		require.NoError(t, err)
		require.True(t, remoting.PooledExt(c))
		return c
	}

	req := decode(remoting.SendMessage)
	resp := r.Handle(context.Background(), nil, req)
	require.NotNil(t, resp)
	assert.Equal(t, "T", seen)
	assert.Equal(t, "T", icSaw)
	assert.Nil(t, req.ExtFields, "the map went back to the pool")
	assert.False(t, remoting.PooledExt(req))

	req = decode(remoting.PullMessage) // registered with RegisterFunc: keeps its map
	r.Handle(context.Background(), nil, req)
	assert.Equal(t, "T", req.ExtFields["topic"])

	// A hand-built request's map is the caller's: never pooled.
	own := map[string]string{"topic": "T"}
	r.Handle(context.Background(), nil, &remoting.Command{Code: remoting.SendMessage, ExtFields: own})
	assert.Equal(t, map[string]string{"topic": "T"}, own)
}

func TestRouterScopedReleasesOnInterceptorAnswer(t *testing.T) {
	r := remoting.NewRouter()
	r.RegisterScoped(remoting.SendMessage, remoting.HandlerFunc(func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		t.Fatal("the interceptor answers first")
		return nil
	}))
	r.Use(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.NoPermission, "no")
	})
	req, err := remoting.Decode(remoting.Encode(&remoting.Command{Code: remoting.SendMessage, ExtFields: map[string]string{"topic": "T"}}))
	require.NoError(t, err)
	resp := r.Handle(context.Background(), nil, req)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Nil(t, req.ExtFields)
}

// A recycled map must come back empty.
func TestPooledMapComesBackEmpty(t *testing.T) {
	r := remoting.NewRouter()
	r.RegisterScoped(remoting.SendMessage, remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return nil
	}))
	for i := 0; i < 100; i++ {
		ext := map[string]string{"k" + string(rune('a'+i%26)): "v"}
		req, err := remoting.Decode(remoting.Encode(&remoting.Command{Code: remoting.SendMessage, ExtFields: ext}))
		require.NoError(t, err)
		require.Equal(t, ext, req.ExtFields, "iteration %d", i)
		r.Handle(context.Background(), nil, req)
	}
}
