package remoting_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// BenchmarkInvokePipelined: like BenchmarkInvoke, but with 64 callers per
// CPU sharing one connection, the shape of a pipelined (async) producer:
// many requests and responses in flight on one socket.
func BenchmarkInvokePipelined(b *testing.B) {
	r := remoting.NewRouter()
	r.Register(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("queueOffset", "12345")
		return resp
	})
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcpConfig(), 0)
	require.NoError(b, err)
	srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	defer srv.Close(context.Background())
	c := remoting.NewClient(dialTCP, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	body := bytes.Repeat([]byte("m"), 1024)
	ext := map[string]string{"topic": "TopicA", "queueId": "1", "properties": "TAGS\x01TagA\x02"}
	ctx := context.Background()
	_, err = c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body))
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
