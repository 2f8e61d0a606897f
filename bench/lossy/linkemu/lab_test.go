//go:build linux

package linkemu

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLabAppliesDelayAndLoss pings from namespace A to an echo in B through
// the emulated link (A→B: 20 ms, 20% loss; B→A: 5 ms, no loss) and checks
// that every answer took at least 25 ms and that about 80% came back.
func TestLabAppliesDelayAndLoss(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("lossy-link lab unavailable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Profile{Name: "test",
		AtoB: Dir{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.2},
		BtoA: Dir{Delay: 5 * time.Millisecond}}
	lab, err := Start(ctx, fmt.Sprintf("qt%d", os.Getpid()%100000), p, 42, nil)
	require.NoError(t, err)
	defer lab.Close()

	var echo, ping *net.UDPConn
	require.NoError(t, lab.InB(func() (err error) {
		echo, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(lab.AddrB), Port: 9000})
		return err
	}))
	defer echo.Close()
	require.NoError(t, lab.InA(func() (err error) {
		ping, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(lab.AddrA)})
		return err
	}))
	defer ping.Close()
	// The echo stops when its socket closes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	defer func() { echo.Close(); <-done }()

	const n = 400
	start := time.Now()
	to := &net.UDPAddr{IP: net.ParseIP(lab.AddrB), Port: 9000}
	got := make(chan time.Duration, n)
	go func() {
		buf := make([]byte, 2048)
		for {
			ping.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, _, err := ping.ReadFromUDP(buf)
			if err != nil || k < 8 {
				close(got)
				return
			}
			sent := time.Duration(binary.BigEndian.Uint64(buf[:8]))
			got <- time.Since(start) - sent
		}
	}()
	msg := make([]byte, 200)
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(msg, uint64(time.Since(start)))
		_, err := ping.WriteToUDP(msg, to)
		require.NoError(t, err)
		if i%20 == 19 {
			time.Sleep(time.Millisecond) // pace the pings over ~20 ms
		}
	}
	var rtts []time.Duration
	for d := range got {
		rtts = append(rtts, d)
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	atob, btoa := lab.Stats()
	t.Logf("answers %d of %d; rtt min %v median %v; A→B %+v B→A %+v", len(rtts), n, rtts[0], rtts[len(rtts)/2], atob, btoa)
	require.NotEmpty(t, rtts)
	assert.GreaterOrEqual(t, rtts[0], 24*time.Millisecond, "A→B 20±1 ms plus B→A 5 ms")
	assert.Less(t, rtts[len(rtts)/2], 200*time.Millisecond)
	// 400 pings at 20% loss: 80 ± 2% (σ), so 70–90% is 5σ.
	frac := float64(len(rtts)) / n
	assert.InDelta(t, 0.8, frac, 0.1)
	assert.GreaterOrEqual(t, atob.Packets, int64(n), "the pings (and any packet the kernel sends on its own, e.g. IPv6 solicitations)")
	assert.InDelta(t, 0.2, float64(atob.Dropped)/float64(atob.Packets), 0.1)
	assert.Equal(t, int64(0), btoa.Dropped)
}
