package udprelay

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startEcho runs a UDP server on 127.0.0.1 that answers every datagram
// with the datagram twice over, so an answer is larger than its request.
func startEcho(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				_, _ = c.WriteToUDP(bytes.Repeat(buf[:n], 2), from)
			}
		}
	}()
	t.Cleanup(func() {
		_ = c.Close()
		wg.Wait()
	})
	return c.LocalAddr().String()
}

// exchange sends each of give through r in order and returns the answers
// that come back. The relay keeps each direction's order, so the answer to
// the last datagram (which must pass) comes last, after every drop.
func exchange(t *testing.T, r *Relay, give ...string) []string {
	t.Helper()
	c, err := net.Dial("udp", r.Addr())
	require.NoError(t, err)
	defer c.Close()
	for _, g := range give {
		_, err := c.Write([]byte(g))
		require.NoError(t, err)
	}
	last := give[len(give)-1]
	var got []string
	buf := make([]byte, 64<<10)
	for len(got) == 0 || got[len(got)-1] != last+last {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := c.Read(buf)
		require.NoError(t, err, "answers so far: %q", got)
		got = append(got, string(buf[:n]))
	}
	return got
}

func TestRelay(t *testing.T) {
	tests := []struct {
		name          string
		drop          Drop
		give          []string
		want          []string
		wantForwarded [2]int64 // to server, to client
		wantDropped   [2]int64
	}{
		{
			name:          "nil drops nothing",
			give:          []string{"a", "bcd"},
			want:          []string{"aa", "bcdbcd"},
			wantForwarded: [2]int64{2, 2},
		},
		{
			name: "Larger drops both ways",
			drop: Larger(5),
			// "abc" passes, its answer of 6 bytes does not; "abcdef"
			// does not pass.
			give:          []string{"ab", "abc", "abcdef", "xy"},
			want:          []string{"abab", "xyxy"},
			wantForwarded: [2]int64{3, 2},
			wantDropped:   [2]int64{1, 1},
		},
		{
			name:          "a direction",
			drop:          func(dir Direction, pkt []byte) bool { return dir == ToClient && pkt[0] == 'x' },
			give:          []string{"x", "y", "x", "z"},
			want:          []string{"yy", "zz"},
			wantForwarded: [2]int64{4, 2},
			wantDropped:   [2]int64{0, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Start(t, startEcho(t), tt.drop)
			assert.Equal(t, tt.want, exchange(t, r, tt.give...))
			for _, dir := range []Direction{ToServer, ToClient} {
				assert.Equal(t, tt.wantForwarded[dir], r.Forwarded(dir), "forwarded %v", dir)
				assert.Equal(t, tt.wantDropped[dir], r.Dropped(dir), "dropped %v", dir)
			}
		})
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	server := startEcho(t)
	for name, link := range map[string]Link{"no link": {}, "a link": {Delay: time.Millisecond, BytesPerSec: 1 << 20}} {
		t.Run(name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			r := StartLink(t, server, link, nil)
			assert.Equal(t, []string{"pp"}, exchange(t, r, "p"))
			require.NoError(t, r.Close())
			goleak.VerifyNone(t, before)
			assert.NoError(t, r.Close(), "a second Close")
		})
	}
}

// TestLinkDelays: over a link a datagram arrives no sooner than its delay
// (an answer: two delays), datagrams are spaced at the link's rate, and
// each direction keeps its order. Only lower bounds are checked: a loaded
// machine can deliver later, never sooner.
func TestLinkDelays(t *testing.T) {
	const delay = 40 * time.Millisecond
	r := StartLink(t, startEcho(t), Link{Delay: delay}, nil)
	start := time.Now()
	assert.Equal(t, []string{"pp"}, exchange(t, r, "p"))
	assert.GreaterOrEqual(t, time.Since(start), 2*delay, "a round trip takes two delays")

	// 10 requests of 1,000 bytes at 100,000 B/s, answered with 2,000
	// bytes each: the answers take 200 ms on the way back.
	r = StartLink(t, startEcho(t), Link{BytesPerSec: 100_000}, nil)
	var give, want []string
	for i := range 10 {
		p := strings.Repeat(string(rune('a'+i)), 1000)
		give, want = append(give, p), append(want, p+p)
	}
	start = time.Now()
	assert.Equal(t, want, exchange(t, r, give...), "in order")
	assert.GreaterOrEqual(t, time.Since(start), 180*time.Millisecond, "spaced at the link's rate")
}

// TestLinkQueueDrops: a link whose queue is full drops, counted.
func TestLinkQueueDrops(t *testing.T) {
	r := StartLink(t, startEcho(t), Link{BytesPerSec: 1000}, nil)
	c, err := net.Dial("udp", r.Addr())
	require.NoError(t, err)
	defer c.Close()
	const n = 3 * linkQueue
	for range n {
		_, err := c.Write([]byte{'q'})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return r.Dropped(ToServer) > 0 }, 10*time.Second, 10*time.Millisecond,
		"the queue holds %d; %d sent", linkQueue, n)
	assert.LessOrEqual(t, r.Forwarded(ToServer)+r.Dropped(ToServer), int64(n))
	require.NoError(t, r.Close(), "Close does not wait for the queue to drain")
}
