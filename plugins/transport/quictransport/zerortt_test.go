package quictransport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/racebuild"
)

// TestSessionResumption: a second connection to the same server resumes
// the TLS session; with zero_rtt on both ends it also sends its first
// frame as 0-RTT data, and the frame arrives.
func TestSessionResumption(t *testing.T) {
	for _, zero := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "0-RTT"}[zero], func(t *testing.T) {
			if zero && racebuild.Enabled {
				// quic-go v0.65 installs the server's transport parameters
				// while a 0-RTT stream may be opening (quic-go issue 4303,
				// open): the race detector reports it inside quic-go.
				// zero_rtt stays off by default and its documentation says so.
				t.Skip("0-RTT races inside quic-go (quic-go/quic-go#4303); run without -race")
			}
			cfg := testConfig()
			cfg.ZeroRTT = zero
			ln := listen(t, cfg, 0)
			ctx := ctxFor(t, 20*time.Second)
			for round := range 2 {
				client, server := pair(t, ln, cfg, 0)
				require.NoError(t, client.WriteFrame(ctx, frameOf(1, round, 300)))
				f, err := server.ReadFrame(ctx)
				require.NoError(t, err)
				assert.Len(t, f, 300)
				// An answer, so that the client has had the session ticket.
				require.NoError(t, server.WriteFrame(ctx, frameOf(2, round, 300)))
				_, err = client.ReadFrame(ctx)
				require.NoError(t, err)
				st := client.qc.ConnectionState()
				assert.Equal(t, round == 1, st.TLS.DidResume, "round %d resumed", round)
				assert.Equal(t, zero && round == 1, st.Used0RTT, "round %d used 0-RTT", round)
				require.NoError(t, client.Close())
			}
		})
	}
}
