package remoting_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// BenchmarkInvokeAsync: one goroutine keeping 256 InvokeAsync calls in
// flight on one connection, the shape of one async producer (bench/peers'
// workload 1): 1 KiB requests, a send-like answer. The writer goroutine
// batches queued requests into one write; the "direct" variant writes from
// the caller instead (the transport's write combining).
func BenchmarkInvokeAsync(b *testing.B) {
	for _, direct := range []bool{false, true} {
		name := "writer"
		if direct {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			defer remoting.SetDirectAsyncWrites(remoting.SetDirectAsyncWrites(direct))
			benchInvokeAsync(b)
		})
	}
}

func benchInvokeAsync(b *testing.B) {
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
	sem := make(chan struct{}, 256)
	cb := func(_ *remoting.Command, err error) {
		if err != nil {
			b.Error(err)
		}
		<-sem
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sem <- struct{}{}
		if err := c.InvokeAsync(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, body), cb); err != nil {
			b.Fatal(err)
		}
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
}
