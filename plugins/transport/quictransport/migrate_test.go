package quictransport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMigrate moves a client connection to a new UDP socket while it
// writes frames: the server sees the new address, every frame written
// before, during and after arrives once, and the server's answers reach
// the client on the new path.
func TestMigrate(t *testing.T) {
	ln := listen(t, testConfig(), 0)
	client, server := pair(t, ln, testConfig(), 0)
	ctx := ctxFor(t, 20*time.Second)
	before := server.qc.RemoteAddr().String()
	require.Equal(t, client.qc.LocalAddr().String(), before)

	const frames = 300
	errc := make(chan error, 1)
	go func() {
		for i := range frames {
			if err := client.WriteFrame(ctx, frameOf(1, i, 2000)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	migrated := make(chan error, 1)
	go func() { migrated <- client.Migrate(ctx) }()
	seen := map[int]bool{}
	for len(seen) < frames {
		f, err := server.ReadFrame(ctx)
		require.NoError(t, err)
		seq := int(frameKey(f)[1])
		require.False(t, seen[seq], "frame %d twice", seq)
		seen[seq] = true
	}
	require.NoError(t, <-errc)
	require.NoError(t, <-migrated)

	// Traffic after the switch comes from the new socket.
	require.NoError(t, client.WriteFrame(ctx, frameOf(1, frames, 100)))
	_, err := server.ReadFrame(ctx)
	require.NoError(t, err)
	after := server.qc.RemoteAddr().String()
	assert.NotEqual(t, before, after, "the server sees the client's new address")
	require.NoError(t, server.WriteFrame(ctx, frameOf(2, 0, 5000)))
	f, err := client.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Len(t, f, 5000)

	// Accepted connections do not migrate.
	assert.ErrorContains(t, server.Migrate(ctx), "only a dialled connection migrates")
}
