package quictransport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/udprelay"
)

// roundTrips runs n request/response round trips over client and server,
// at most inFlight at once: the server answers every request frame with a
// frame of respSize bytes, as a broker answers sends (small answers) or
// pulls (large ones).
func roundTrips(t *testing.T, client, server *Conn, n, inFlight, reqSize, respSize int) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp := bytes.Repeat([]byte{'r'}, respSize)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the server: answer every request
		defer wg.Done()
		for range n {
			if _, err := server.ReadFrame(ctx); err != nil {
				t.Errorf("server read: %v", err)
				return
			}
			if err := server.WriteFrame(ctx, resp); err != nil {
				t.Errorf("server write: %v", err)
				return
			}
		}
	}()
	slots := make(chan struct{}, inFlight)
	wg.Add(1)
	go func() { // the client's reader: an answer frees a slot
		defer wg.Done()
		for range n {
			f, err := client.ReadFrame(ctx)
			if err != nil {
				t.Errorf("client read: %v", err)
				return
			}
			if len(f) != respSize {
				t.Errorf("answer of %d bytes, want %d", len(f), respSize)
			}
			<-slots
		}
	}()
	req := bytes.Repeat([]byte{'q'}, reqSize)
	for range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("round trips did not finish")
		}
		require.NoError(t, client.WriteFrame(ctx, req))
	}
	wg.Wait()
}

// pairVia dials ln through addr (a relay) and returns both ends, closed at
// the end of the test.
func pairVia(t *testing.T, ln *Listener, addr string, cfg *Config) (client, server *Conn) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	c, err := Dial(ctx, addr, cfg, deps(t, 0))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return c, s.(*Conn)
}

// TestAckOnlyPacketsPerRoundTrip counts the ACK-only packets each end
// sends per request/response round trip (1,250-byte requests, the size of
// a 1 KiB send; 260-byte answers, or 33 KiB ones for the pull shape)
// through a relay that delivers the packets spaced, as a 25 MB/s link with
// 0.1 ms of delay each way: ACKs should ride on the answers and the next
// requests, not go out in packets of their own. With QUIC's ACK every
// second packet (ack_threshold 0) three runs gave: sync32 0.08-0.12
// ACK-only packets per round trip from the client and 0.11-0.17 from the
// server, pull 3.7-4.7 from the client (per 24-packet answer) and
// 0.28-0.32 from the server; with the default 10: 0.01, 0.01-0.02, 1.3-1.5
// and 0.03-0.04.
func TestAckOnlyPacketsPerRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name               string
		inFlight, respSize int
		// the most ACK-only packets per round trip, client and server
		maxClient, maxServer float64
	}{
		// One at a time the count never decides (one packet each way);
		// an answer slower than max_ack_delay (a loaded machine) does.
		{"sync1", 1, 260, 0.5, 0.5},
		{"sync32", 32, 260, 0.06, 0.08},
		// The server's ACK of a pull request rides on the answer unless
		// the answer takes longer than max_ack_delay (timing, not count).
		{"pull", 4, 33 << 10, 2.5, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln := listen(t, testConfig(), 0)
			// The lossy-link lab's lan profile (0.1 ms each way): datagrams
			// arrive spaced, not in the batches loopback hands a reader.
			rl := udprelay.StartLink(t, ln.Addr(), udprelay.Link{Delay: 100 * time.Microsecond, BytesPerSec: 25 << 20}, nil)
			client, server := pairVia(t, ln, rl.Addr(), testConfig())
			const warm, n = 200, 2000
			roundTrips(t, client, server, warm, tt.inFlight, 1250, tt.respSize)
			cb, sb := client.Stats(), server.Stats()
			roundTrips(t, client, server, n, tt.inFlight, 1250, tt.respSize)
			ca, sa := client.Stats(), server.Stats()
			per := func(a, b uint64) float64 { return float64(a-b) / n }
			cAck, sAck := per(ca.AckOnlyPacketsSent, cb.AckOnlyPacketsSent), per(sa.AckOnlyPacketsSent, sb.AckOnlyPacketsSent)
			t.Logf("per round trip: client %.2f packets (%.2f ACK-only), server %.2f packets (%.2f ACK-only); lost %d / %d",
				per(ca.PacketsSent, cb.PacketsSent), cAck, per(sa.PacketsSent, sb.PacketsSent), sAck,
				ca.PacketsLost-cb.PacketsLost, sa.PacketsLost-sb.PacketsLost)
			assert.LessOrEqual(t, cAck, tt.maxClient, "client's ACK-only packets per round trip")
			assert.LessOrEqual(t, sAck, tt.maxServer, "server's ACK-only packets per round trip")
		})
	}
}
