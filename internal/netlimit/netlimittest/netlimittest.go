// Package netlimittest checks a server's connection bounds from tests.
package netlimittest

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Kept opens n connections to addr at once (from the default local
// address), waits for the server to refuse those over its bounds (closed
// at accept), and counts the ones still open; it closes them all before
// it returns. Each is read only briefly, well within any server's time
// for a request's first bytes.
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
	time.Sleep(500 * time.Millisecond) // the refusals land
	kept := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			kept++
		}
	}
	return kept
}
