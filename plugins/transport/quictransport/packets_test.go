package quictransport

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPullAnswerPackets writes pull-answer-shaped frames (a header and 32
// message parts of 1 KiB, as remoting writes BodyParts) and checks that
// they travel in full packets: a frame above smallFrame is copied into one
// Write, not written part by part (each of which quic-go would pack as it
// comes, into packets of its own).
func TestPullAnswerPackets(t *testing.T) {
	ln := listen(t, testConfig(), 0)
	client, server := pair(t, ln, testConfig(), 0)
	ctx := ctxFor(t, 20*time.Second)
	hdr := bytes.Repeat([]byte{'h'}, 200)
	parts := [][]byte{hdr}
	n := len(hdr)
	for i := range 32 {
		p := bytes.Repeat([]byte{byte(i)}, 1024+i)
		parts = append(parts, p)
		n += len(p)
	}
	want := bytes.Join(parts, nil)
	// Warm up (handshake, path MTU discovery), then count.
	require.NoError(t, server.WriteFrame(ctx, parts...))
	got, err := client.ReadFrame(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	before := server.qc.ConnectionStats().PacketsSent
	const frames = 20
	for range frames {
		require.NoError(t, server.WriteFrame(ctx, parts...))
		got, err := client.ReadFrame(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	sent := server.qc.ConnectionStats().PacketsSent - before
	// quic-go's smallest packets carry 1,280 bytes (about 1,230 of stream
	// data); part by part the frames took about 1.3× the packets.
	full := float64(n+4) / 1200
	t.Logf("%d-byte frames: %.1f packets each (%.1f at 1,200 bytes of data a packet)", n, float64(sent)/frames, full)
	assert.LessOrEqual(t, float64(sent)/frames, full+3, "packets per frame")
}
