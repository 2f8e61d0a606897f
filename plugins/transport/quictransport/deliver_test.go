package quictransport

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
)

// frameKey is what frameOf wrote in a frame's first 8 bytes.
func frameKey(f []byte) [2]uint32 {
	return [2]uint32{binary.BigEndian.Uint32(f), binary.BigEndian.Uint32(f[4:])}
}

func queued(c *Conn) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received
}

// TestDeliverFrames: frames queued before DeliverFrames and frames that
// come while it runs (from 8 writers at once) all reach deliver once and
// intact; after the peer's Close it returns io.EOF, with every frame the
// peer wrote delivered.
func TestDeliverFrames(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 60*time.Second)
	const early, writers, perWriter = 5, 8, 100
	for seq := range early {
		require.NoError(t, client.WriteFrame(ctx, frameOf(99, seq, 200)))
	}
	require.Eventually(t, func() bool { return queued(server) == early }, 10*time.Second, time.Millisecond)

	var mu sync.Mutex
	got := map[[2]uint32][]byte{}
	dup := 0
	done := make(chan error, 1)
	go func() {
		done <- server.DeliverFrames(ctx, func(f []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := got[frameKey(f)]; ok {
				dup++
			}
			got[frameKey(f)] = f
			return nil
		})
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for seq := range perWriter {
				assert.NoError(t, client.WriteFrame(ctx, frameOf(w, seq, 100+seq*50)))
			}
		})
	}
	wg.Wait()
	require.NoError(t, client.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, io.EOF)
	case <-ctx.Done():
		t.Fatal("DeliverFrames did not return after the peer closed")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, dup, "frames delivered twice")
	require.Len(t, got, early+writers*perWriter)
	for seq := range early {
		assert.Equal(t, frameOf(99, seq, 200), got[[2]uint32{99, uint32(seq)}])
	}
	for w := range writers {
		for seq := range perWriter {
			assert.Equal(t, frameOf(w, seq, 100+seq*50), got[[2]uint32{uint32(w), uint32(seq)}])
		}
	}
}

// TestDeliverFramesSlowDelivery: while deliver holds one frame (a slow
// request handler), the server writes frames of its own and the client
// writes as many back at once, on every stream it got a frame on; each of
// them is delivered meanwhile. The held frame's stream is not handed back
// to the client while the delivery runs, so no frame can queue behind it.
func TestDeliverFramesSlowDelivery(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 60*time.Second)
	const slowWriter, pushes = 7, 6
	held := make(chan struct{})
	release := make(chan struct{})
	fastSeen := make(chan struct{}, pushes)
	done := make(chan error, 1)
	go func() {
		done <- server.DeliverFrames(ctx, func(f []byte) error {
			if frameKey(f)[0] == slowWriter {
				close(held)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return server.WriteFrame(ctx, f)
			}
			fastSeen <- struct{}{}
			return nil
		})
	}()
	got := make(chan []byte, pushes+1)
	go func() {
		for {
			f, err := client.ReadFrame(ctx)
			if err != nil {
				return
			}
			got <- f
		}
	}()
	require.NoError(t, client.WriteFrame(ctx, frameOf(slowWriter, 0, 300)))
	<-held
	// The server writes while the delivery is held: on the streams it owns,
	// never on the held one.
	for seq := range pushes {
		require.NoError(t, server.WriteFrame(ctx, frameOf(2, seq, 300)))
	}
	for range pushes {
		select {
		case f := <-got:
			assert.Equal(t, uint32(2), frameKey(f)[0])
		case <-time.After(10 * time.Second):
			t.Fatal("server frame missing")
		}
	}
	// The client now owns a stream per frame it got and writes on them all.
	var wg sync.WaitGroup
	for seq := range pushes {
		wg.Go(func() { assert.NoError(t, client.WriteFrame(ctx, frameOf(1, seq, 300))) })
	}
	wg.Wait()
	for i := range pushes {
		select {
		case <-fastSeen:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d frames delivered while another delivery is held", i, pushes)
		}
	}
	close(release)
	select {
	case f := <-got:
		assert.Equal(t, frameOf(slowWriter, 0, 300), f)
	case <-time.After(10 * time.Second):
		t.Fatal("the held frame's answer is missing")
	}
	require.NoError(t, client.Close())
	assert.ErrorIs(t, <-done, io.EOF)
}

// TestDeliverFramesRefused: an error from deliver closes the connection,
// DeliverFrames returns that error, and the peer learns the frame was
// refused.
func TestDeliverFramesRefused(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 30*time.Second)
	bad := errors.New("undecodable")
	done := make(chan error, 1)
	go func() {
		done <- server.DeliverFrames(ctx, func(f []byte) error {
			if frameKey(f)[0] == 2 {
				return bad
			}
			return nil
		})
	}()
	require.NoError(t, client.WriteFrame(ctx, frameOf(1, 0, 64)))
	require.NoError(t, client.WriteFrame(ctx, frameOf(2, 0, 64)))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, bad)
	case <-ctx.Done():
		t.Fatal("DeliverFrames did not return after deliver failed")
	}
	_, err := client.ReadFrame(ctx)
	assert.ErrorIs(t, err, transport.ErrBadFrame)
}

// TestDeliverFramesCloseFromDelivery: deliver may close the connection
// itself (a handler whose answer failed does); Close does not wait for the
// delivery that called it, and DeliverFrames returns.
func TestDeliverFramesCloseFromDelivery(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 30*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- server.DeliverFrames(ctx, func([]byte) error { return server.Close() })
	}()
	require.NoError(t, client.WriteFrame(ctx, frameOf(1, 0, 64)))
	select {
	case err := <-done:
		assert.ErrorIs(t, err, transport.ErrClosed)
	case <-ctx.Done():
		t.Fatal("Close inside deliver deadlocked")
	}
	_, err := client.ReadFrame(ctx)
	assert.Error(t, err)
}
