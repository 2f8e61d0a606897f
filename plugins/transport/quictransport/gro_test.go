package quictransport

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFramesWithAndWithoutGRO: frames of every size cross a connection
// whose sockets read with UDP GRO (the default where the kernel offers it:
// on loopback quic-go's GSO batches then arrive coalesced and the patched
// stack splits them, internal/quic TestGROSplitsCoalescedDatagrams) and
// one whose sockets do not (QUIC_GO_DISABLE_GRO=true, as on a kernel
// without it).
func TestFramesWithAndWithoutGRO(t *testing.T) {
	for _, disable := range []string{"false", "true"} {
		t.Run("QUIC_GO_DISABLE_GRO="+disable, func(t *testing.T) {
			t.Setenv("QUIC_GO_DISABLE_GRO", disable)
			ln := listen(t, testConfig(), 0)
			client, server := pair(t, ln, testConfig(), 0)
			ctx := ctxFor(t, 30*time.Second)
			for i, n := range []int{4, 100, 1250, 1500, 16 << 10, 33 << 10, 200 << 10, 1 << 20} {
				f := bytes.Repeat([]byte{byte(i + 1)}, n)
				require.NoError(t, server.WriteFrame(ctx, f))
				got, err := client.ReadFrame(ctx)
				require.NoError(t, err)
				require.True(t, bytes.Equal(f, got), "frame of %d bytes from the server", n)
				require.NoError(t, client.WriteFrame(ctx, f))
				got, err = server.ReadFrame(ctx)
				require.NoError(t, err)
				require.True(t, bytes.Equal(f, got), "frame of %d bytes from the client", n)
			}
		})
	}
}
