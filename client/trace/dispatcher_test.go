package trace_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/client/transports"
)

// silentNameServer accepts connections and never answers, so a route
// lookup waits for its deadline.
func silentNameServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestDispatcherDropsWhenFull: with its goroutine stuck on a send (a name
// server that never answers), Append neither blocks nor grows the
// buffer: past the buffer and the record in flight, records are dropped
// and counted. Close with an expired context abandons the send and stops
// the goroutine (goleak in TestMain).
func TestDispatcherDropsWhenFull(t *testing.T) {
	c, err := client.New(client.WithNameServers(silentNameServer(t)), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	d := trace.New(c, trace.WithBuffer(4), trace.WithBatch(1, time.Millisecond), trace.WithSendTimeout(time.Hour))

	const n = 100
	taken := 0
	for i := 0; i < n; i++ {
		if d.Append(trace.Context{Type: trace.Pub, Beans: []trace.Bean{{MsgID: "M", Topic: "T"}}}) {
			taken++
		}
	}
	// At most the buffer and the one record the goroutine took.
	assert.LessOrEqual(t, taken, 5)
	assert.Equal(t, int64(n-taken), d.Stats().Dropped)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, d.Close(ctx), context.Canceled)
	assert.False(t, d.Append(trace.Context{Type: trace.Pub}), "a closed dispatcher takes nothing")
	st := d.Stats()
	assert.Equal(t, int64(n-taken+1), st.Dropped)
	assert.Equal(t, int64(taken), st.Failed, "each record taken was its own trace message, abandoned")
	assert.Zero(t, st.Sent)
}

// TestDispatcherStopsWithClient: closing the client stops the
// dispatcher's goroutine without Close (goleak in TestMain), and later
// records are dropped.
func TestDispatcherStopsWithClient(t *testing.T) {
	c, err := client.New(client.WithNameServers(silentNameServer(t)), transports.WithDialer())
	require.NoError(t, err)
	d := trace.New(c)
	require.NoError(t, c.Close())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, d.Close(ctx))
	assert.False(t, d.Append(trace.Context{Type: trace.Pub}))
}
