package grpc_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/grpcapi"
)

// BenchmarkSendMessage is SendMessage of one message through the
// endpoint to the store, for the transport buffers' cost on large bodies
// (issue 37: grpc.ReadBufferSize and the pooled write buffer).
func BenchmarkSendMessage(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			n := startNode(b)
			n.topic("BenchT", 1)
			body := strings.Repeat("b", size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("BenchT", "id-"+strconv.Itoa(i), body, nil)}})
				require.NoError(b, err)
				require.Equal(b, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
			}
		})
	}
}
