package quictransport

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/udprelay"
)

// TestProbePacketsSent checks Stats().ProbePacketsSent: sync round trips
// through a relay count few probe packets, or none (only a late ACK on a
// loaded machine makes the probe timeout fire), and a request whose
// datagram the relay drops is found lost only by the probe timeout (no
// later packet is acknowledged), so its retransmission is counted.
func TestProbePacketsSent(t *testing.T) {
	// 600-byte requests travel in datagrams of about 640 bytes: ACK-only
	// packets are far smaller, path MTU probes 1,280 bytes and more.
	const reqSize, minDrop, maxDrop = 600, 600, 800
	// armed drops the next request the client sends, once.
	var armed atomic.Bool
	ln := listen(t, testConfig(), 0)
	rl := udprelay.Start(t, ln.Addr(), func(dir udprelay.Direction, pkt []byte) bool {
		return dir == udprelay.ToServer && len(pkt) >= minDrop && len(pkt) <= maxDrop && armed.CompareAndSwap(true, false)
	})
	client, server := pairVia(t, ln, rl.Addr(), testConfig())
	roundTrips(t, client, server, 50, 1, reqSize, 200) // warm up

	const n = 200
	before := client.Stats()
	roundTrips(t, client, server, n, 1, reqSize, 200)
	after := client.Stats()
	eliciting := (after.PacketsSent - after.AckOnlyPacketsSent) - (before.PacketsSent - before.AckOnlyPacketsSent)
	probes := after.ProbePacketsSent - before.ProbePacketsSent
	t.Logf("%d round trips: %d ack-eliciting packets from the client, %d of them probes, %d lost",
		n, eliciting, probes, int64(after.PacketsLost)-int64(before.PacketsLost))
	require.GreaterOrEqual(t, eliciting, uint64(n), "ack-eliciting packets of %d requests", n)
	// Every spurious probe is a packet besides a request's own: the probes
	// stay under half of the packets unless they are counted with them.
	assert.Less(t, probes, eliciting/2, "probe packets among the ack-eliciting ones")

	before = client.Stats()
	armed.Store(true)
	roundTrips(t, client, server, 1, 1, reqSize, 200)
	after = client.Stats()
	require.Equal(t, int64(1), rl.Dropped(udprelay.ToServer), "requests dropped by the relay")
	probes = after.ProbePacketsSent - before.ProbePacketsSent
	t.Logf("a dropped request: %d packets sent, %d probes", after.PacketsSent-before.PacketsSent, probes)
	assert.GreaterOrEqual(t, probes, uint64(1), "probe packets after a dropped request")
}
