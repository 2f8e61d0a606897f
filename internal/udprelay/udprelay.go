// Package udprelay is a UDP relay for tests: it forwards datagrams between
// one client and a server on 127.0.0.1 and drops the ones a predicate
// names, as a lossy path or one with a smaller MTU does, counting what it
// forwarded and dropped each way; with a Link it also delays datagrams and
// spaces them at a rate. QUIC tests dial a listener through it to see how
// a connection sizes its packets, recovers from a loss and acknowledges.
package udprelay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Direction is the way a datagram travels through the relay.
type Direction int

const (
	// ToServer is a datagram from the client to the server.
	ToServer Direction = iota
	// ToClient is a datagram from the server to the client.
	ToClient
)

func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to server"
	case ToClient:
		return "to client"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Drop reports whether the relay drops pkt, travelling in dir. The relay
// calls it from two goroutines at once, one a direction, so a Drop that
// keeps state (armed once, say) guards it; pkt is the relay's buffer,
// reused once Drop returns.
type Drop func(dir Direction, pkt []byte) bool

// Larger drops datagrams of more than maxPayload bytes both ways, as a path
// whose MTU leaves maxPayload bytes of UDP payload does to packets with DF
// set: QUIC's path MTU discovery then settles where it would on that path.
func Larger(maxPayload int) Drop {
	return func(_ Direction, pkt []byte) bool { return len(pkt) > maxPayload }
}

// Link is how a relay delivers what it does not drop: each datagram Delay
// after the link has sent those before it, at BytesPerSec (0: no rate),
// one at a time, as a link delivers them — spaced, not in the batches
// loopback hands a reader. Up to linkQueue datagrams wait each way; a full
// queue drops (counted as dropped), as a link's buffer does.
type Link struct {
	Delay       time.Duration
	BytesPerSec int
}

const linkQueue = 4096

// delayed is a datagram waiting on the link until at.
type delayed struct {
	b  []byte
	at time.Time
}

// Relay forwards datagrams from its address to a server and the server's
// answers to the client that sent to it last.
type Relay struct {
	front *net.UDPConn // the client sends to this
	back  *net.UDPConn // connected to the server
	drop  Drop
	link  Link

	mu     sync.Mutex
	client *net.UDPAddr

	forwarded, dropped [2]atomic.Int64
	closed             chan struct{} // closed by Close: the link's queues are dropped
	wg                 sync.WaitGroup
	closeOnce          sync.Once
	closeErr           error
}

// Start relays between a new address on 127.0.0.1 and server (host:port),
// dropping what drop names (nil drops nothing), until Close or the end of
// the test.
func Start(t testing.TB, server string, drop Drop) *Relay {
	t.Helper()
	return StartLink(t, server, Link{}, drop)
}

// StartLink is Start with what is not dropped delivered over link.
func StartLink(t testing.TB, server string, link Link, drop Drop) *Relay {
	t.Helper()
	saddr, err := net.ResolveUDPAddr("udp", server)
	require.NoError(t, err, "udprelay: server address")
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err, "udprelay: listen")
	back, err := net.DialUDP("udp", nil, saddr)
	if err != nil {
		_ = front.Close()
		require.NoError(t, err, "udprelay: dial %s", server)
	}
	r := &Relay{front: front, back: back, drop: drop, link: link, closed: make(chan struct{})}
	r.wg.Add(2)
	go r.pump(ToServer, r.fromClient, r.toServer)
	go r.pump(ToClient, back.Read, r.toClient)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Addr is the address the client dials.
func (r *Relay) Addr() string { return r.front.LocalAddr().String() }

// Forwarded counts the datagrams sent on in dir (a failed send is a lost
// datagram, as on a link).
func (r *Relay) Forwarded(dir Direction) int64 { return r.forwarded[dir].Load() }

// Dropped counts the datagrams in dir that Drop dropped.
func (r *Relay) Dropped(dir Direction) int64 { return r.dropped[dir].Load() }

// Close closes both sockets and waits for the relay's goroutines to end.
// Later calls return what the first did.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.closeErr = errors.Join(r.front.Close(), r.back.Close())
		r.wg.Wait()
		if r.closeErr != nil {
			r.closeErr = fmt.Errorf("udprelay: close: %w", r.closeErr)
		}
	})
	return r.closeErr
}

// pump relays one direction until its socket is closed.
func (r *Relay) pump(dir Direction, read func([]byte) (int, error), write func([]byte)) {
	defer r.wg.Done()
	write, stop := r.onLink(dir, write)
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		n, err := read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ICMP port unreachable while the server starts, say
		}
		if r.drop != nil && r.drop(dir, buf[:n]) {
			r.dropped[dir].Add(1)
			continue
		}
		write(buf[:n])
	}
}

// onLink returns write itself without a link, else a write that queues
// each datagram for a goroutine sending it at its time, and stop, which
// ends that goroutine once the queue is sent (at once after Close).
func (r *Relay) onLink(dir Direction, write func([]byte)) (queue func([]byte), stop func()) {
	if r.link == (Link{}) {
		return write, func() {}
	}
	var perByte time.Duration
	if r.link.BytesPerSec > 0 {
		perByte = time.Second / time.Duration(r.link.BytesPerSec)
	}
	q := make(chan delayed, linkQueue)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tm := time.NewTimer(0)
		defer tm.Stop()
		for d := range q {
			if w := time.Until(d.at); w > 0 {
				tm.Reset(w)
				select {
				case <-tm.C:
				case <-r.closed:
					return // what is queued is lost with the link
				}
			}
			write(d.b)
		}
	}()
	var free time.Time // when the link has sent what came before
	queue = func(b []byte) {
		now := time.Now()
		if free.Before(now) {
			free = now
		}
		free = free.Add(time.Duration(len(b)) * perByte)
		select {
		case q <- delayed{b: bytes.Clone(b), at: free.Add(r.link.Delay)}:
		default:
			r.dropped[dir].Add(1)
		}
	}
	return queue, func() { close(q) }
}

func (r *Relay) fromClient(b []byte) (int, error) {
	n, from, err := r.front.ReadFromUDP(b)
	if err == nil {
		r.mu.Lock()
		r.client = from
		r.mu.Unlock()
	}
	return n, err
}

func (r *Relay) toServer(b []byte) {
	// Counted before the send: a test that has the answer sees the count.
	r.forwarded[ToServer].Add(1)
	_, _ = r.back.Write(b) // a failed send is a lost datagram
}

func (r *Relay) toClient(b []byte) {
	r.mu.Lock()
	to := r.client
	r.mu.Unlock()
	if to == nil {
		return // no client yet
	}
	r.forwarded[ToClient].Add(1)
	_, _ = r.front.WriteToUDP(b, to) // a failed send is a lost datagram
}
