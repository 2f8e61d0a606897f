// Package transporttest is the conformance suite every transport plugin
// runs (TCP now, QUIC and NATS later):
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
//			ln, err := tcp.Listen(ctx, "127.0.0.1:0", cfg, transporttest.MaxFrameSize)
//			...
//			return ln, func(ctx context.Context) (transport.Conn, error) { return tcp.Dial(ctx, ln.Addr(), cfg, transporttest.MaxFrameSize) }
//		})
//	}
//
// The factory must configure both ends with MaxFrameSize as their frame
// limit. The suite closes what the factory returns (the Listener through
// t.Cleanup), joins every goroutine it starts before a subtest ends, and
// bounds every loop in count and time, so callers can check for leaks with
// goleak.VerifyTestMain.
//
// Besides the contract written on transport.Conn, the suite checks what
// core/remoting relies on:
//   - WriteFrame does not keep the parts after it returns (remoting reuses
//     its header buffers);
//   - a refused oversized write leaves the connection usable;
//   - a ReadFrame cancelled while no frame is in flight leaves the
//     connection usable;
//   - frames written before Close are delivered to the peer before it sees
//     the end of the connection;
//   - where a Conn has the optional transport.FrameBatcher, a batch arrives
//     whole and in order, its parts are not kept, and a batch with a frame
//     above the limit is refused whole;
//   - where a Conn has transport.FrameRecycler, recycling frames leaves
//     later frames, and frames the reader still holds, intact.
//
// Frames from concurrent writers carry no order. By default the suite also
// checks that frames written one after the other arrive in that order, as
// over TCP; a transport that delivers frames as they complete instead (QUIC
// with a stream per frame, so that a lost packet delays only its own
// frame) runs it with Unordered, and then every frame must arrive exactly
// once and intact, in any order.
package transporttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
)

// MaxFrameSize is the frame limit the factory passed to Run must give both
// ends of its connections.
const MaxFrameSize = 1 << 20

// MinFrameSize is the smallest remoting frame: the header-length word alone.
const MinFrameSize = 4

// waitFor bounds every blocking step of the suite.
const waitFor = 10 * time.Second

// MakeFunc opens a listener on a fresh address and returns a function that
// dials it. Each call must give an independent listener.
type MakeFunc func(t *testing.T) (ln transport.Listener, dial func(ctx context.Context) (transport.Conn, error))

// Option changes what Run checks.
type Option func(*options)

type options struct{ unordered bool }

// Unordered is for transports that may deliver frames in another order
// than they were written in (see the package comment).
func Unordered() Option { return func(o *options) { o.unordered = true } }

// Run runs the conformance suite against the transport mk builds.
func Run(t *testing.T, mk MakeFunc, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, mk MakeFunc)
	}{
		{"Addr", testAddr},
		{"ConnAddrs", testConnAddrs},
		{"FrameIntegrityClientToServer", func(t *testing.T, mk MakeFunc) { testFrameIntegrity(t, mk, false, o.unordered) }},
		{"FrameIntegrityServerToClient", func(t *testing.T, mk MakeFunc) { testFrameIntegrity(t, mk, true, o.unordered) }},
		{"MultiPartWrite", testMultiPart},
		{"WriteDoesNotRetainParts", func(t *testing.T, mk MakeFunc) { testNoRetain(t, mk, o.unordered) }},
		{"ConcurrentWriters", func(t *testing.T, mk MakeFunc) { testConcurrentWriters(t, mk, o.unordered) }},
		{"FullDuplex", func(t *testing.T, mk MakeFunc) { testFullDuplex(t, mk, o.unordered) }},
		{"FrameTooLarge", testTooLarge},
		{"ServerWritesFirst", testServerWritesFirst},
		{"ManyConns", testManyConns},
		{"CloseUnblocksRead", testCloseUnblocksRead},
		{"OpsAfterClose", testOpsAfterClose},
		{"PeerClose", testPeerClose},
		{"PeerCloseDeliversPending", func(t *testing.T, mk MakeFunc) { testPeerCloseDeliversPending(t, mk, o.unordered) }},
		{"WriteToClosedPeerFails", testWriteToClosedPeer},
		{"ReadContextCancel", testReadCancel},
		{"ReadContextDeadline", testReadDeadline},
		{"WriteContextCancelled", testWriteCancelled},
		{"AcceptAfterClose", testAcceptAfterClose},
		{"CloseUnblocksAccept", testCloseUnblocksAccept},
		{"AcceptContextCancel", testAcceptCancel},
		{"FrameBatcher", func(t *testing.T, mk MakeFunc) { testFrameBatcher(t, mk, o.unordered) }},
		{"FrameRecycler", func(t *testing.T, mk MakeFunc) { testFrameRecycler(t, mk, o.unordered) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, mk) })
	}
}

// listen calls mk and closes the listener at the end of the test.
func listen(t *testing.T, mk MakeFunc) (transport.Listener, func(ctx context.Context) (transport.Conn, error)) {
	t.Helper()
	ln, dial := mk(t)
	require.NotNil(t, ln, "factory returned no listener")
	require.NotNil(t, dial, "factory returned no dial function")
	t.Cleanup(func() { ln.Close() })
	return ln, dial
}

// Pair dials ln and returns the client end and the accepted server end;
// both are closed when the test ends.
func Pair(t *testing.T, ln transport.Listener, dial func(ctx context.Context) (transport.Conn, error)) (client, server transport.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	type res struct {
		c   transport.Conn
		err error
	}
	accepted := make(chan res, 1)
	go func() {
		c, err := ln.Accept(ctx)
		accepted <- res{c, err}
	}()
	client, err := dial(ctx)
	if err != nil {
		cancel()
		if r := <-accepted; r.c != nil {
			r.c.Close()
		}
		require.NoError(t, err, "dial")
	}
	r := <-accepted
	if r.err != nil {
		client.Close()
		require.NoError(t, r.err, "accept")
	}
	t.Cleanup(func() {
		client.Close()
		r.c.Close()
	})
	return client, r.c
}

// frame returns a frame of n bytes whose content is determined by seed, so
// a reader can check it with checkFrame.
func frame(seed uint64, n int) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

func fill(b []byte, seed uint64) {
	r := rand.NewChaCha8(seedBytes(seed))
	r.Read(b) //nolint:errcheck // drains what is left; the assertion is on what came before
}

func seedBytes(seed uint64) [32]byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return s
}

// readFrames reads len(want) frames from c and checks them against want:
// in order, or, when unordered, each exactly once in any order.
func readFrames(ctx context.Context, c transport.Conn, want [][]byte, unordered bool) error {
	pending := map[[32]byte][]int{}
	for i, w := range want {
		h := sha256.Sum256(w)
		pending[h] = append(pending[h], i)
	}
	for i := range want {
		got, err := c.ReadFrame(ctx)
		if err != nil {
			return fmt.Errorf("read frame %d (%d bytes): %w", i, len(want[i]), err)
		}
		if !unordered {
			if !bytes.Equal(want[i], got) {
				return fmt.Errorf("frame %d (%d bytes) corrupted or out of order: got %d bytes", i, len(want[i]), len(got))
			}
			continue
		}
		h := sha256.Sum256(got)
		if len(pending[h]) == 0 {
			return fmt.Errorf("read %d: a frame of %d bytes that is corrupted or came twice", i, len(got))
		}
		pending[h] = pending[h][1:]
	}
	return nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// async runs fn in a goroutine and returns a function that waits for its
// error, failing the test when it takes longer than waitFor.
func async(t *testing.T, fn func() error) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	var once sync.Once
	var err error
	return func() error {
		t.Helper()
		once.Do(func() {
			select {
			case err = <-done:
			case <-time.After(waitFor):
				t.Fatalf("operation did not finish within %v", waitFor)
			}
		})
		return err
	}
}

func testAddr(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	host, port, err := net.SplitHostPort(ln.Addr())
	require.NoError(t, err, "Addr %q is not host:port", ln.Addr())
	assert.NotEmpty(t, host, "Addr %q has no host", ln.Addr())
	p, err := strconv.Atoi(port)
	require.NoError(t, err, "Addr %q has a non-numeric port", ln.Addr())
	assert.True(t, p > 0 && p < 65536, "Addr %q must carry the real port", ln.Addr())
	client, server := Pair(t, ln, dial)
	assert.NotNil(t, client)
	assert.NotNil(t, server)
}

func testConnAddrs(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	for name, a := range map[string]string{
		"client local": client.LocalAddr(), "client remote": client.RemoteAddr(),
		"server local": server.LocalAddr(), "server remote": server.RemoteAddr(),
	} {
		assert.NotEmpty(t, a, name)
		_, _, err := net.SplitHostPort(a)
		assert.NoError(t, err, "%s address %q is not host:port", name, a)
	}
}

// sizes are the frame sizes of the integrity tests: the minimal frame,
// sizes around buffer boundaries, random sizes and the limit itself.
func sizes(r *rand.Rand) []int {
	out := []int{MinFrameSize, MinFrameSize + 1, 7, 8, 100, 511, 512, 513, 4095, 4096, 4097,
		65535, 65536, 65537, MaxFrameSize/2 + 3, MaxFrameSize - 1, MaxFrameSize, MinFrameSize}
	for range 40 {
		out = append(out, MinFrameSize+r.IntN(64<<10))
	}
	return out
}

func testFrameIntegrity(t *testing.T, mk MakeFunc, serverToClient, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	w, rd := client, server
	if serverToClient {
		w, rd = server, client
	}
	ctx := ctxFor(t)
	sz := sizes(rand.New(rand.NewPCG(1, 2)))
	wait := async(t, func() error {
		for i, n := range sz {
			if err := w.WriteFrame(ctx, frame(uint64(i), n)); err != nil {
				return fmt.Errorf("write frame %d (%d bytes): %w", i, n, err)
			}
		}
		return nil
	})
	want := make([][]byte, len(sz))
	for i, n := range sz {
		want[i] = frame(uint64(i), n)
	}
	require.NoError(t, readFrames(ctx, rd, want, unordered))
	require.NoError(t, wait())
}

func testMultiPart(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	whole := frame(7, MaxFrameSize)
	tests := []struct {
		name  string
		parts [][]byte
	}{
		{"one part", [][]byte{whole[:10]}},
		{"header and body", [][]byte{whole[:4], whole[4:300]}},
		{"empty parts", [][]byte{nil, whole[:2], {}, whole[2:6], nil}},
		{"many parts", [][]byte{whole[:1], whole[1:2], whole[2:3], whole[3:4], whole[4:5000], whole[5000:5001]}},
		{"limit in parts", [][]byte{whole[:4], whole[4 : MaxFrameSize/2], whole[MaxFrameSize/2:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := bytes.Join(tt.parts, nil)
			wait := async(t, func() error { return client.WriteFrame(ctx, tt.parts...) })
			got, err := server.ReadFrame(ctx)
			require.NoError(t, err)
			require.NoError(t, wait())
			assert.True(t, bytes.Equal(want, got), "frame of %d bytes corrupted", len(want))
		})
	}
}

func testNoRetain(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	const n = 50
	wait := async(t, func() error {
		hdr := make([]byte, 8)
		body := make([]byte, 1000)
		for i := range n {
			fill(hdr, uint64(i))
			fill(body, uint64(i+1000))
			if err := client.WriteFrame(ctx, hdr, body); err != nil {
				return err
			}
			// Scribble over the parts at once, as remoting does when it
			// returns a header buffer to its pool.
			for j := range hdr {
				hdr[j] = 0xEE
			}
			for j := range body {
				body[j] = 0xEE
			}
		}
		return nil
	})
	want := make([][]byte, n)
	for i := range n {
		want[i] = append(frame(uint64(i), 8), frame(uint64(i+1000), 1000)...)
	}
	require.NoError(t, readFrames(ctx, server, want, unordered), "a frame changed after WriteFrame returned")
	require.NoError(t, wait())
}

// testConcurrentWriters has many goroutines write multi-part frames on one
// Conn; each frame must arrive whole, and each writer's frames in order
// (once each in any order when unordered).
func testConcurrentWriters(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for seq := range perWriter {
				n := r.IntN(48 << 10)
				if seq%10 == 0 {
					n = 0
				}
				hdr := make([]byte, 12)
				binary.BigEndian.PutUint32(hdr[0:], uint32(w))
				binary.BigEndian.PutUint32(hdr[4:], uint32(seq))
				binary.BigEndian.PutUint32(hdr[8:], uint32(n))
				body := frame(uint64(w)<<32|uint64(seq), n)
				// Split the body in two so a frame takes three writes.
				cut := n / 3
				if err := client.WriteFrame(ctx, hdr, body[:cut], body[cut:]); err != nil {
					errs <- fmt.Errorf("writer %d frame %d: %w", w, seq, err)
					return
				}
			}
		})
	}
	next := make([]int, writers)
	seen := map[[2]int]bool{}
	for i := range writers * perWriter {
		got, err := server.ReadFrame(ctx)
		require.NoError(t, err, "read frame %d", i)
		require.GreaterOrEqual(t, len(got), 12, "frame %d too short", i)
		w := int(binary.BigEndian.Uint32(got[0:]))
		seq := int(binary.BigEndian.Uint32(got[4:]))
		n := int(binary.BigEndian.Uint32(got[8:]))
		require.Less(t, w, writers, "frame %d: bad writer id, frames interleaved", i)
		if unordered {
			require.Less(t, seq, perWriter, "writer %d: bad sequence number, frames interleaved", w)
			require.False(t, seen[[2]int{w, seq}], "writer %d frame %d came twice", w, seq)
			seen[[2]int{w, seq}] = true
		} else {
			require.Equal(t, next[w], seq, "writer %d: frame out of order or interleaved", w)
		}
		require.Equal(t, 12+n, len(got), "writer %d frame %d: wrong length", w, seq)
		require.True(t, bytes.Equal(frame(uint64(w)<<32|uint64(seq), n), got[12:]), "writer %d frame %d corrupted", w, seq)
		next[w]++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

// testFullDuplex writes large frames both ways at once: neither side may
// wait for the other to read before it can read itself.
func testFullDuplex(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	const n, size = 16, 256 << 10
	var waits []func() error
	for dir, c := range []transport.Conn{client, server} {
		waits = append(waits, async(t, func() error {
			for i := range n {
				if err := c.WriteFrame(ctx, frame(uint64(dir*1000+i), size)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	for dir, c := range []transport.Conn{server, client} {
		waits = append(waits, async(t, func() error {
			want := make([][]byte, n)
			for i := range n {
				want[i] = frame(uint64(dir*1000+i), size)
			}
			if err := readFrames(ctx, c, want, unordered); err != nil {
				return fmt.Errorf("direction %d: %w", dir, err)
			}
			return nil
		}))
	}
	for _, w := range waits {
		assert.NoError(t, w())
	}
}

func testTooLarge(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	big := make([]byte, MaxFrameSize+1)
	tests := []struct {
		name  string
		parts [][]byte
	}{
		{"one part", [][]byte{big}},
		{"split", [][]byte{big[:4], big[4:MaxFrameSize], big[MaxFrameSize:]}},
		{"far above", [][]byte{big, big}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []transport.Conn{client, server} {
				err := c.WriteFrame(ctx, tt.parts...)
				require.ErrorIs(t, err, transport.ErrFrameTooLarge)
			}
		})
	}
	// Nothing of the refused frames was sent and both ends still work.
	for _, pair := range [][2]transport.Conn{{client, server}, {server, client}} {
		want := frame(3, 100)
		wait := async(t, func() error { return pair[0].WriteFrame(ctx, want) })
		got, err := pair[1].ReadFrame(ctx)
		require.NoError(t, err)
		require.NoError(t, wait())
		assert.Equal(t, want, got)
	}
}

func testServerWritesFirst(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	ctx := ctxFor(t)
	want := frame(11, 64)
	srv := async(t, func() error {
		c, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.WriteFrame(ctx, want); err != nil {
			return err
		}
		got, err := c.ReadFrame(ctx)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, frame(12, 64)) {
			return errors.New("server got a corrupted answer")
		}
		return nil
	})
	client, err := dial(ctx)
	require.NoError(t, err)
	defer client.Close()
	got, err := client.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.NoError(t, client.WriteFrame(ctx, frame(12, 64)))
	require.NoError(t, srv())
}

// testManyConns serves several connections of one listener at once.
func testManyConns(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	ctx := ctxFor(t)
	const conns, frames = 6, 20
	var wg sync.WaitGroup
	servers := make(chan transport.Conn, conns)
	acc := async(t, func() error {
		for range conns {
			c, err := ln.Accept(ctx)
			if err != nil {
				return err
			}
			servers <- c
			wg.Go(func() { echo(ctx, c) })
		}
		return nil
	})
	var clients []transport.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range conns {
		c, err := dial(ctx)
		require.NoError(t, err)
		clients = append(clients, c)
	}
	require.NoError(t, acc())
	var cw sync.WaitGroup
	errs := make(chan error, conns)
	for i, c := range clients {
		cw.Go(func() {
			for j := range frames {
				want := frame(uint64(i*1000+j), 10+j*100)
				if err := c.WriteFrame(ctx, want); err != nil {
					errs <- err
					return
				}
				got, err := c.ReadFrame(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(want, got) {
					errs <- fmt.Errorf("conn %d frame %d: echo differs", i, j)
					return
				}
			}
		})
	}
	cw.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	close(servers)
	for c := range servers {
		c.Close()
	}
	wg.Wait()
}

// echo writes back every frame it reads until the connection fails.
func echo(ctx context.Context, c transport.Conn) {
	for {
		f, err := c.ReadFrame(ctx)
		if err != nil {
			return
		}
		if err := c.WriteFrame(ctx, f); err != nil {
			return
		}
	}
}

func testCloseUnblocksRead(t *testing.T, mk MakeFunc) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			ln, dial := listen(t, mk)
			client, server := Pair(t, ln, dial)
			c := client
			if side == "server" {
				c = server
			}
			started := make(chan struct{})
			wait := async(t, func() error {
				close(started)
				_, err := c.ReadFrame(context.Background())
				return err
			})
			<-started
			time.Sleep(20 * time.Millisecond) // let ReadFrame block; the test holds either way
			require.NoError(t, c.Close())
			err := wait()
			require.Error(t, err)
			assert.ErrorIs(t, err, transport.ErrClosed)
		})
	}
}

func testOpsAfterClose(t *testing.T, mk MakeFunc) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			ln, dial := listen(t, mk)
			client, server := Pair(t, ln, dial)
			c := client
			if side == "server" {
				c = server
			}
			ctx := ctxFor(t)
			require.NoError(t, c.Close())
			assert.NotPanics(t, func() { c.Close() }, "second Close")
			_, err := c.ReadFrame(ctx)
			assert.ErrorIs(t, err, transport.ErrClosed, "ReadFrame after Close")
			err = c.WriteFrame(ctx, frame(1, 10))
			assert.ErrorIs(t, err, transport.ErrClosed, "WriteFrame after Close")
			assert.NotEmpty(t, c.RemoteAddr(), "RemoteAddr after Close")
		})
	}
}

func isEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, transport.ErrClosed)
}

func testPeerClose(t *testing.T, mk MakeFunc) {
	for _, side := range []string{"client closes", "server closes"} {
		t.Run(side, func(t *testing.T) {
			ln, dial := listen(t, mk)
			client, server := Pair(t, ln, dial)
			closer, reader := client, server
			if side == "server closes" {
				closer, reader = server, client
			}
			wait := async(t, func() error {
				_, err := reader.ReadFrame(context.Background())
				return err
			})
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, closer.Close())
			err := wait()
			assert.True(t, isEnd(err), "peer close gave %v, want io.EOF or transport.ErrClosed", err)
			// Reading again keeps failing; it does not block.
			wait = async(t, func() error {
				_, err := reader.ReadFrame(context.Background())
				return err
			})
			assert.Error(t, wait())
		})
	}
}

func testPeerCloseDeliversPending(t *testing.T, mk MakeFunc, unordered bool) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx := ctxFor(t)
	const n = 5
	for i := range n {
		require.NoError(t, client.WriteFrame(ctx, frame(uint64(i), 1000*(i+1))))
	}
	require.NoError(t, client.Close())
	want := make([][]byte, n)
	for i := range n {
		want[i] = frame(uint64(i), 1000*(i+1))
	}
	require.NoError(t, readFrames(ctx, server, want, unordered), "frames written before Close")
	_, err := server.ReadFrame(ctx)
	assert.True(t, isEnd(err), "after the last frame got %v, want io.EOF or transport.ErrClosed", err)
}

func testWriteToClosedPeer(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	require.NoError(t, server.Close())
	ctx := ctxFor(t)
	chunk := frame(5, 64<<10)
	deadline := time.Now().Add(waitFor)
	var err error
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		if err = client.WriteFrame(ctx, chunk); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	assert.Error(t, err, "writes to a closed peer never failed")
}

func testReadCancel(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	for _, c := range []transport.Conn{client, server} {
		// Already cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wait := async(t, func() error {
			_, err := c.ReadFrame(ctx)
			return err
		})
		assert.ErrorIs(t, wait(), context.Canceled)

		// Cancelled while blocked.
		ctx, cancel = context.WithCancel(context.Background())
		wait = async(t, func() error {
			_, err := c.ReadFrame(ctx)
			return err
		})
		time.Sleep(20 * time.Millisecond)
		cancel()
		assert.ErrorIs(t, wait(), context.Canceled)
	}
	// No frame was in flight, so the connections still work.
	ctx := ctxFor(t)
	for _, pair := range [][2]transport.Conn{{client, server}, {server, client}} {
		want := frame(9, 300)
		require.NoError(t, pair[0].WriteFrame(ctx, want))
		got, err := pair[1].ReadFrame(ctx)
		require.NoError(t, err, "read after a cancelled read")
		assert.Equal(t, want, got)
	}
}

func testReadDeadline(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	wait := async(t, func() error {
		_, err := server.ReadFrame(ctx)
		return err
	})
	assert.ErrorIs(t, wait(), context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "returned before the deadline")
	// The expired deadline does not stick to the connection.
	ctx2 := ctxFor(t)
	wait = async(t, func() error {
		time.Sleep(50 * time.Millisecond)
		return client.WriteFrame(ctx2, frame(1, 10))
	})
	got, err := server.ReadFrame(ctx2)
	require.NoError(t, err)
	require.NoError(t, wait())
	assert.Equal(t, frame(1, 10), got)
}

func testWriteCancelled(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	client, server := Pair(t, ln, dial)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []transport.Conn{client, server} {
		assert.ErrorIs(t, c.WriteFrame(ctx, frame(1, 10)), context.Canceled)
	}
}

func testAcceptAfterClose(t *testing.T, mk MakeFunc) {
	ln, _ := listen(t, mk)
	require.NoError(t, ln.Close())
	wait := async(t, func() error {
		c, err := ln.Accept(ctxFor(t))
		if c != nil {
			c.Close()
		}
		return err
	})
	assert.Error(t, wait())
}

func testCloseUnblocksAccept(t *testing.T, mk MakeFunc) {
	ln, _ := listen(t, mk)
	wait := async(t, func() error {
		c, err := ln.Accept(context.Background())
		if c != nil {
			c.Close()
		}
		return err
	})
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, ln.Close())
	assert.Error(t, wait())
}

func testAcceptCancel(t *testing.T, mk MakeFunc) {
	ln, dial := listen(t, mk)
	ctx, cancel := context.WithCancel(context.Background())
	wait := async(t, func() error {
		c, err := ln.Accept(ctx)
		if c != nil {
			c.Close()
		}
		return err
	})
	time.Sleep(20 * time.Millisecond)
	cancel()
	assert.ErrorIs(t, wait(), context.Canceled)
	// The listener still accepts afterwards.
	client, server := Pair(t, ln, dial)
	ctx2 := ctxFor(t)
	require.NoError(t, client.WriteFrame(ctx2, frame(2, 20)))
	got, err := server.ReadFrame(ctx2)
	require.NoError(t, err)
	assert.Equal(t, frame(2, 20), got)
}
