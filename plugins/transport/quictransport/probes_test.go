package quictransport

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProbePacketsSent checks Stats().ProbePacketsSent: sync round trips
// through a relay count few probe packets, or none (only a late ACK on a
// loaded machine makes the probe timeout fire), and a request whose
// datagram the relay drops is found lost only by the probe timeout (no
// later packet is acknowledged), so its retransmission is counted.
func TestProbePacketsSent(t *testing.T) {
	ln := listen(t, testConfig(), 0)
	rl := startDropRelay(t, ln.Addr())
	client, server := pairVia(t, ln, rl.Addr(), testConfig())
	// 600-byte requests travel in datagrams of about 640 bytes: ACK-only
	// packets are far smaller, path MTU probes 1,280 bytes and more.
	const reqSize, minDrop, maxDrop = 600, 600, 800
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
	rl.dropNext(minDrop, maxDrop)
	roundTrips(t, client, server, 1, 1, reqSize, 200)
	after = client.Stats()
	require.Equal(t, int64(1), rl.dropped.Load(), "requests dropped by the relay")
	probes = after.ProbePacketsSent - before.ProbePacketsSent
	t.Logf("a dropped request: %d packets sent, %d probes", after.PacketsSent-before.PacketsSent, probes)
	assert.GreaterOrEqual(t, probes, uint64(1), "probe packets after a dropped request")
}

// dropRelay forwards UDP datagrams between one client and a server on
// 127.0.0.1 at once, and drops the first datagram from the client whose
// size is in a range once armed with dropNext.
type dropRelay struct {
	front, back *net.UDPConn
	mu          sync.Mutex
	client      *net.UDPAddr
	// dropMin and dropMax are the sizes of the datagram to drop; zero
	// when disarmed.
	dropMin, dropMax int
	dropped          atomic.Int64
	wg               sync.WaitGroup
}

func startDropRelay(t *testing.T, server string) *dropRelay {
	t.Helper()
	saddr, err := net.ResolveUDPAddr("udp", server)
	require.NoError(t, err)
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	back, err := net.DialUDP("udp", nil, saddr)
	require.NoError(t, err)
	r := &dropRelay{front: front, back: back}
	r.wg.Add(2)
	go r.up()
	go r.down()
	t.Cleanup(func() {
		front.Close()
		back.Close()
		r.wg.Wait()
	})
	return r
}

func (r *dropRelay) Addr() string { return r.front.LocalAddr().String() }

// dropNext arms the relay: the next datagram from the client of min to max
// bytes is dropped.
func (r *dropRelay) dropNext(minSize, maxSize int) {
	r.mu.Lock()
	r.dropMin, r.dropMax = minSize, maxSize
	r.mu.Unlock()
}

func (r *dropRelay) up() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.front.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.mu.Lock()
		r.client = from
		drop := r.dropMax > 0 && n >= r.dropMin && n <= r.dropMax
		if drop {
			r.dropMin, r.dropMax = 0, 0
		}
		r.mu.Unlock()
		if drop {
			r.dropped.Add(1)
			continue
		}
		r.back.Write(buf[:n]) //nolint:errcheck // a lost datagram, which QUIC recovers
	}
}

func (r *dropRelay) down() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.back.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ICMP port unreachable while the server starts, say
		}
		r.mu.Lock()
		to := r.client
		r.mu.Unlock()
		if to != nil {
			r.front.WriteToUDP(buf[:n], to) //nolint:errcheck // a lost datagram, which QUIC recovers
		}
	}
}
