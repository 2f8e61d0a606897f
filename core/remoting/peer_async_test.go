package remoting_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
)

// The async path: callbacks from the connection's callback goroutine,
// deadlines by its sweep, requests through its writer goroutine.

func TestInvokeAsyncDeadlineWithoutCtxDeadline(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	got := make(chan error, 1)
	start := time.Now()
	require.NoError(t, c.InvokeAsyncDeadline(context.Background(), addr, remoting.NewRequest(codeBlock, nil, nil),
		time.Now().Add(50*time.Millisecond), func(resp *remoting.Command, err error) {
			assert.Nil(t, resp)
			got <- err
		}))
	select {
	case err := <-got:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	case <-time.After(10 * time.Second):
		t.Fatal("callback not called after the deadline")
	}
	// The connection still serves, and the late answer of the expired call
	// is dropped.
	resp, err := c.Invoke(ctxFor(t, 5*time.Second), addr, remoting.NewRequest(codeEcho, nil, []byte("after")))
	require.NoError(t, err)
	assert.Equal(t, "after", string(resp.Body))
}

func TestInvokeAsyncCtxCancel(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	require.NoError(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeBlock, nil, nil), func(_ *remoting.Command, err error) { got <- err }))
	checkFor(t, 5*time.Second, func() bool { return r.blocked.Load() == 1 }, "request not received")
	cancel()
	select {
	case err := <-got:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("callback not called after cancel")
	}
	// An ended ctx fails at once, without calling cb.
	err := c.InvokeAsync(ctx, addr, remoting.NewRequest(codeEcho, nil, nil), func(*remoting.Command, error) { t.Error("cb called") })
	assert.ErrorIs(t, err, context.Canceled)
}

// A callback may issue the next call (the producer retries from there),
// sync or async, on the same connection.
func TestInvokeAsyncFromCallback(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	const chain = 100
	done := make(chan int, 1)
	var step func(i int)
	step = func(i int) {
		req := remoting.NewRequest(codeEcho, map[string]string{"i": strconv.Itoa(i)}, nil)
		require.NoError(t, c.InvokeAsync(ctx, addr, req, func(resp *remoting.Command, err error) {
			if !assert.NoError(t, err) {
				done <- -1
				return
			}
			assert.Equal(t, strconv.Itoa(i), resp.Ext("i"))
			if i%10 == 0 {
				// a sync call from the callback goroutine
				_, err := c.Invoke(ctx, addr, remoting.NewRequest(codeEcho, nil, nil))
				assert.NoError(t, err)
			}
			if i == chain {
				done <- i
				return
			}
			step(i + 1)
		}))
	}
	step(1)
	select {
	case n := <-done:
		assert.Equal(t, chain, n)
	case <-ctx.Done():
		t.Fatal("callback chain stalled")
	}
}

// Many calls in flight when the connection goes: each callback runs
// exactly once, with ErrPeerClosed, and nothing runs after Close of the
// client returned.
func TestInvokeAsyncEachCallbackOnce(t *testing.T) {
	r := newTestRouter(t)
	srv, addr := startServer(t, r, remoting.ServerOptions{})
	c := remoting.NewClient(dialTCP, nil, testLogger(t), remoting.PeerOptions{})
	ctx := ctxFor(t, 10*time.Second)
	const n = 500
	var calls [n]atomic.Int32
	var answered, failed atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		code := codeEcho
		if i%2 == 1 {
			code = codeBlock
		}
		wg.Add(1)
		err := c.InvokeAsync(ctx, addr, remoting.NewRequest(code, nil, nil), func(_ *remoting.Command, err error) {
			defer wg.Done()
			calls[i].Add(1)
			if err == nil {
				answered.Add(1)
				return
			}
			assert.ErrorIs(t, err, remoting.ErrPeerClosed)
			failed.Add(1)
		})
		require.NoError(t, err)
	}
	checkFor(t, 5*time.Second, func() bool { return r.blocked.Load() == n/2 }, "blocked requests not all received")
	// The echo answers may still be on their way when the server has all
	// the blocked requests: close only once the client has read them.
	checkFor(t, 5*time.Second, func() bool { return answered.Load() == n/2 }, "echo requests not all answered")
	for _, p := range srv.Peers() {
		p.Close()
	}
	wg.Wait()
	require.NoError(t, c.Close())
	for i := range calls {
		assert.Equal(t, int32(1), calls[i].Load(), "callback %d", i)
	}
	assert.Equal(t, int32(n/2), answered.Load())
	assert.Equal(t, int32(n/2), failed.Load())
}

func TestInvokeAsyncClosedPeer(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	p, err := c.Peer(ctx, addr)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	err = p.InvokeAsyncDeadline(ctx, remoting.NewRequest(codeEcho, nil, nil), time.Now().Add(time.Second), func(*remoting.Command, error) {
		t.Error("cb called for a refused call")
	})
	assert.ErrorIs(t, err, remoting.ErrPeerClosed)
}

// A frame over the transport's limit is refused by InvokeAsync itself (cb
// not called) and the connection stays up.
func TestInvokeAsyncFrameTooLarge(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 10*time.Second)
	big := make([]byte, transport.DefaultMaxFrameSize+1)
	err := c.InvokeAsync(ctx, addr, remoting.NewRequest(codeEcho, nil, big), func(*remoting.Command, error) {
		t.Error("cb called for a refused call")
	})
	assert.ErrorIs(t, err, transport.ErrFrameTooLarge)
	got := make(chan error, 1)
	require.NoError(t, c.InvokeAsync(ctx, addr, remoting.NewRequest(codeEcho, nil, []byte("ok")), func(_ *remoting.Command, err error) { got <- err }))
	assert.NoError(t, <-got)
}

// Requests and answers stay matched under many concurrent async callers
// and out-of-order answers.
func TestInvokeAsyncConcurrent(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	ctx := ctxFor(t, 20*time.Second)
	const callers, each = 8, 200
	var wg sync.WaitGroup
	var bad atomic.Int32
	for g := range callers {
		wg.Go(func() {
			var inner sync.WaitGroup
			for i := range each {
				key := strconv.Itoa(g*each + i)
				code := codeEcho
				ext := map[string]string{"k": key}
				if i%7 == 0 {
					code = codeSleep
					ext["sleepMicros"] = "500"
				}
				inner.Add(1)
				err := c.InvokeAsync(ctx, addr, remoting.NewRequest(code, ext, []byte(key)), func(resp *remoting.Command, err error) {
					defer inner.Done()
					if err != nil || resp.Ext("k") != key {
						bad.Add(1)
					}
				})
				if err != nil {
					inner.Done()
					bad.Add(1)
				}
			}
			inner.Wait()
		})
	}
	wg.Wait()
	assert.Zero(t, bad.Load())
}

// A sync call's own deadline is kept by the sweep, without a context.
func TestInvokeDeadline(t *testing.T) {
	r := newTestRouter(t)
	_, addr := startServer(t, r, remoting.ServerOptions{})
	c := newClient(t, nil)
	start := time.Now()
	_, err := c.InvokeDeadline(context.Background(), addr, remoting.NewRequest(codeBlock, nil, nil), time.Now().Add(50*time.Millisecond))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.Less(t, time.Since(start), 5*time.Second)
	// A ctx ending first still wins.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.InvokeDeadline(ctx, addr, remoting.NewRequest(codeBlock, nil, nil), time.Now().Add(time.Hour))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	// Answered in time, with the sweep running for other calls.
	resp, err := c.InvokeDeadline(context.Background(), addr, remoting.NewRequest(codeEcho, nil, []byte("ok")), time.Now().Add(5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "ok", string(resp.Body))
}
