// Package netlimittest checks a server's connection bounds from tests.
package netlimittest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Kept opens n connections to addr at once (from the default local
// address) and counts those the server keeps: each is read for up to a
// second, all at once; one refused over the server's bounds (closed at
// accept) ends its read early, a kept one times out — well within any
// server's time for a request's first bytes. It closes them all before
// it returns.
func Kept(t testing.TB, addr string, n int) int {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	var kept atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				kept.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(kept.Load())
}
