package quictransport_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/remotingtest"
)

// BenchmarkPull is a backlog pull over remoting on loopback: 4 pullers,
// each answer 32 messages of 1 KiB written as BodyParts (as the broker
// writes a pull answer), QUIC against TCP. b.N counts answers; msg/s is
// reported.
func BenchmarkPull(b *testing.B) {
	b.Run("quic", func(b *testing.B) { benchPull(b, quicTransport(quicConfig(), false)) })
	b.Run("tcp", func(b *testing.B) { benchPull(b, tcpTransport()) })
}

func benchPull(b *testing.B, tr remotingtest.Transport) {
	const msgs = 32
	parts := make([][]byte, msgs)
	for i := range parts {
		parts[i] = bytes.Repeat([]byte{byte(i)}, 1024)
	}
	r := remoting.NewRouter()
	r.Register(codeEcho, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("nextBeginOffset", "12345")
		resp.BodyParts = append([][]byte(nil), parts...)
		return resp
	})
	ln := tr.Listen(b)
	srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	defer srv.Close(context.Background())
	c := remoting.NewClient(tr.Dial(b), nil, nil, remoting.PeerOptions{})
	defer c.Close()
	ext := map[string]string{"topic": "TopicA", "queueId": "1", "queueOffset": "0", "maxMsgNums": "32"}
	ctx := context.Background()
	resp, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, nil))
	require.NoError(b, err)
	require.Len(b, resp.Body, msgs*1024)
	b.SetBytes(msgs * 1024)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Invoke(ctx, ln.Addr(), remoting.NewRequest(codeEcho, ext, nil)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*msgs)/b.Elapsed().Seconds(), "msg/s")
}
