package e2e

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// labMTUPayload is the largest UDP payload through the lossy-link lab's TUN
// devices (bench/lossy/linkemu: MTU 1400, less 20 bytes of IPv4 header and
// 8 of UDP header).
const labMTUPayload = 1400 - 28

// mtuRelay forwards UDP datagrams between one client and a server on
// 127.0.0.1 and drops those larger than max, as a path with a smaller MTU
// does to packets with DF set: QUIC's path MTU discovery then settles where
// it settles on the lab's link. It counts what it forwarded and dropped.
type mtuRelay struct {
	front *net.UDPConn // the client talks to this
	back  *net.UDPConn // connected to the server
	max   int

	mu     sync.Mutex
	client *net.UDPAddr

	toServer, toClient, tooBig atomic.Int64
	wg                         sync.WaitGroup
}

// startMTURelay relays to server (host:port) until the test ends.
func startMTURelay(t *testing.T, server string, max int) *mtuRelay {
	t.Helper()
	saddr, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	back, err := net.DialUDP("udp", nil, saddr)
	if err != nil {
		front.Close()
		t.Fatalf("relay: %v", err)
	}
	r := &mtuRelay{front: front, back: back, max: max}
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

// Addr is the address the client dials.
func (r *mtuRelay) Addr() string { return r.front.LocalAddr().String() }

func (r *mtuRelay) up() {
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
		r.mu.Unlock()
		if n > r.max {
			r.tooBig.Add(1)
			continue
		}
		r.toServer.Add(1)
		r.back.Write(buf[:n]) //nolint:errcheck // a datagram relay: a failed write is a lost packet, which QUIC recovers
	}
}

func (r *mtuRelay) down() {
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
		if to == nil {
			continue
		}
		if n > r.max {
			r.tooBig.Add(1)
			continue
		}
		r.toClient.Add(1)
		r.front.WriteToUDP(buf[:n], to) //nolint:errcheck // a datagram relay: a failed write is a lost packet
	}
}
