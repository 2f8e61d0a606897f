package quictransport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/transport"
)

// rawDial connects a bare quic-go client to ln and returns it with the
// server end of the connection.
func rawDial(t *testing.T, ln *Listener) (*quic.Conn, *Conn) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	qc, err := quic.DialAddr(ctx, ln.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}}, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	require.NoError(t, err)
	c, err := ln.Accept(ctx)
	require.NoError(t, err)
	// Cleanups run last first: the bare peer, which does not answer
	// Close's goodbye, goes first so Close does not linger.
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc, c.(*Conn)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// TestWireFormat checks the framing against a bare quic-go peer: a length
// and the frame on a bidirectional stream; an end writes on a stream on
// which it read the peer's last frame or pass, or on one it opens; Close
// announces the number of frames written after a zero length.
func TestWireFormat(t *testing.T) {
	ln := listen(t, testConfig(), 1<<20)
	qc, c := rawDial(t, ln)
	ctx := ctxFor(t, 10*time.Second)
	readN := func(str *quic.Stream, n int) []byte {
		t.Helper()
		b := make([]byte, n)
		_, err := io.ReadFull(str, b)
		require.NoError(t, err)
		return b
	}

	// Peer to us.
	str, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = str.Write(append(be32(9), "\x00\x00\x00\x02{}abc"...))
	require.NoError(t, err)
	f, err := c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "\x00\x00\x00\x02{}abc", string(f))

	// Us to the peer: first on the stream the peer's frame came on, which
	// is then the peer's again.
	require.NoError(t, c.WriteFrame(ctx, []byte{0, 0, 0, 0}, []byte("body")))
	assert.Equal(t, append(be32(8), "\x00\x00\x00\x00body"...), readN(str, 12))
	// With no stream of ours idle, on a new one.
	require.NoError(t, c.WriteFrame(ctx, []byte{0, 0, 0, 0}, []byte("two!")))
	in, err := qc.AcceptStream(ctx)
	require.NoError(t, err)
	assert.Equal(t, append(be32(8), "\x00\x00\x00\x00two!"...), readN(in, 12))
	// A pass (length 0xFFFFFFFF) gives that one back without a frame.
	_, err = in.Write(be32(0xFFFFFFFF))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c.poolMu.Lock()
		defer c.poolMu.Unlock()
		return len(c.idle) == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, c.WriteFrame(ctx, []byte{0, 0, 0, 0}, []byte("3rd!")))
	assert.Equal(t, append(be32(8), "\x00\x00\x00\x003rd!"...), readN(in, 12))

	// Close says goodbye with the count and waits for us to end it.
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	bye, err := qc.AcceptStream(ctx)
	require.NoError(t, err)
	assert.Equal(t, append(be32(0), 0, 0, 0, 0, 0, 0, 0, 3), readN(bye, 12))
	select {
	case err := <-done:
		t.Fatalf("Close returned %v before the peer ended the connection", err)
	case <-time.After(50 * time.Millisecond):
	}
	qc.CloseWithError(0, "")
	require.NoError(t, <-done)
}

// TestPeerGoodbye: a peer announcing n frames ends the connection once
// they all arrived, however they are ordered against the goodbye.
func TestPeerGoodbye(t *testing.T) {
	ln := listen(t, testConfig(), 1<<20)
	qc, c := rawDial(t, ln)
	ctx := ctxFor(t, 10*time.Second)
	send := func(b []byte) {
		str, err := qc.OpenStreamSync(ctx)
		require.NoError(t, err)
		_, err = str.Write(b)
		require.NoError(t, err)
		require.NoError(t, str.Close())
	}
	send(append(be32(4), "one!"...))
	send(append(be32(0), 0, 0, 0, 0, 0, 0, 0, 2)) // two frames before Close
	f, err := c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "one!", string(f))
	select {
	case <-qc.Context().Done():
		t.Fatal("ended before the second frame")
	case <-time.After(50 * time.Millisecond):
	}
	send(append(be32(4), "two!"...))
	f, err = c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "two!", string(f))
	_, err = c.ReadFrame(ctx)
	assert.ErrorIs(t, err, io.EOF)
	select {
	case <-qc.Context().Done():
	case <-ctx.Done():
		t.Fatal("not ended after the last frame")
	}
}

// TestPeerResetsFrame: a writer that resets its stream half-way loses that
// frame only; the connection goes on.
func TestPeerResetsFrame(t *testing.T) {
	ln := listen(t, testConfig(), 1<<20)
	qc, c := rawDial(t, ln)
	ctx := ctxFor(t, 10*time.Second)
	str, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = str.Write(append(be32(100), "partial"...))
	require.NoError(t, err)
	str.CancelWrite(7)
	str2, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = str2.Write(append(be32(4), "next"...))
	require.NoError(t, err)
	require.NoError(t, str2.Close())
	f, err := c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "next", string(f))
}

// TestPeerBadFrames: a peer declaring more than the limit or too little,
// or ending a stream inside a frame or its length (the bytes after a
// frame start the next one), is refused and dropped, with the reason on
// both ends, while the listener keeps serving others.
func TestPeerBadFrames(t *testing.T) {
	tests := []struct {
		name     string
		give     []byte
		wantCode quic.ApplicationErrorCode
		wantErr  error
	}{
		{"above limit", be32(1<<20 + 1), codeFrameTooLarge, transport.ErrFrameTooLarge},
		{"2 GiB", be32(0x7FFFFFFF), codeFrameTooLarge, transport.ErrFrameTooLarge},
		{"negative", be32(0xFFFFFFFE), codeBadFrame, transport.ErrBadFrame},
		{"below header word", be32(3), codeBadFrame, transport.ErrBadFrame},
		{"trailing bytes", append(be32(4), "12345"...), codeBadFrame, transport.ErrBadFrame},
		{"short body", append(be32(8), "1234"...), codeBadFrame, transport.ErrBadFrame},
	}
	ln := listen(t, testConfig(), 1<<20)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qc, c := rawDial(t, ln)
			ctx := ctxFor(t, 10*time.Second)
			str, err := qc.OpenStreamSync(ctx)
			require.NoError(t, err)
			_, err = str.Write(tt.give)
			require.NoError(t, err)
			str.Close()

			_, err = c.ReadFrame(ctx)
			if tt.name == "trailing bytes" {
				// The frame itself was fine.
				require.NoError(t, err)
				_, err = c.ReadFrame(ctx)
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorIs(t, err, transport.ErrClosed)
			_, err = c.ReadFrame(ctx)
			assert.ErrorIs(t, err, tt.wantErr, "the reason sticks")
			assert.ErrorIs(t, c.WriteFrame(ctx, []byte("late")), tt.wantErr)

			// The peer learns why.
			select {
			case <-qc.Context().Done():
			case <-ctx.Done():
				t.Fatal("peer not closed")
			}
			var aerr *quic.ApplicationError
			require.True(t, errors.As(context.Cause(qc.Context()), &aerr), "got %v", context.Cause(qc.Context()))
			assert.Equal(t, tt.wantCode, aerr.ErrorCode)
			assert.True(t, aerr.Remote)
			assert.NotEmpty(t, aerr.ErrorMessage)

			// Others are still served.
			client, server := pair(t, ln, testConfig(), 1<<20)
			require.NoError(t, client.WriteFrame(ctx, []byte("fine")))
			f, err := server.ReadFrame(ctx)
			require.NoError(t, err)
			assert.Equal(t, "fine", string(f))
		})
	}
}

// TestPeerRefusesOurFrame: when the peer's limit is below ours, it drops
// the connection and our next operation says ErrFrameTooLarge.
func TestPeerRefusesOurFrame(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 1000)
	client, server := pair(t, ln, cfg, 1<<20)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, client.WriteFrame(ctx, make([]byte, 2000)), "the write itself does not wait for the peer")
	_, err := server.ReadFrame(ctx)
	assert.ErrorIs(t, err, transport.ErrFrameTooLarge)
	_, err = client.ReadFrame(ctx)
	assert.ErrorIs(t, err, transport.ErrFrameTooLarge)
	assert.ErrorIs(t, client.WriteFrame(ctx, make([]byte, 20)), transport.ErrFrameTooLarge)
}

// TestUniStreamsRefused: the transport uses bidirectional streams only.
func TestUniStreamsRefused(t *testing.T) {
	ln := listen(t, testConfig(), 1<<20)
	qc, _ := rawDial(t, ln)
	_, err := qc.OpenUniStream()
	assert.ErrorIs(t, err, &quic.StreamLimitReachedError{})
}

// stall fills a peer that does not read until a write blocks, and returns
// the error of that write once it ends.
func stall(ctx context.Context, c *Conn) error {
	big := make([]byte, 256<<10)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = c.WriteFrame(ctx, big)
	}
	return err
}

func TestCloseUnblocksWrite(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 0
	ln := listen(t, cfg, 1<<20)
	client, _ := pair(t, ln, cfg, 1<<20)
	done := make(chan error, 1)
	go func() { done <- stall(context.Background(), client) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, client.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, transport.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock WriteFrame")
	}
}

func TestWriteCancelledWhileBlocked(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 0
	ln := listen(t, cfg, 1<<20)
	client, server := pair(t, ln, cfg, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := stall(ctx, client)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 10*time.Second)
	// Unlike TCP a cancelled write tears nothing: once the reader catches
	// up the connection works.
	ctx2 := ctxFor(t, 10*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			f, err := server.ReadFrame(ctx2)
			if err != nil || string(f) == "last" {
				return
			}
		}
	})
	require.NoError(t, client.WriteFrame(ctx2, []byte("last")))
	wg.Wait()
}

func TestWriteTimeoutDropsStalledPeer(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 300 * time.Millisecond
	ln := listen(t, cfg, 1<<20)
	client, server := pair(t, ln, cfg, 1<<20)
	start := time.Now()
	err := stall(context.Background(), client)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "write timeout"), "got %v", err)
	assert.Less(t, time.Since(start), 10*time.Second)
	// The connection is dropped on both ends.
	assert.Error(t, client.WriteFrame(context.Background(), []byte("more")))
	ctx := ctxFor(t, 10*time.Second)
	for {
		_, err := server.ReadFrame(ctx)
		if err != nil {
			assert.NoError(t, ctx.Err(), "server end not closed")
			break
		}
	}
}

// TestPeerCloseEndsWrite: a write to a peer that closed fails rather than
// hangs, and says io.EOF.
func TestPeerCloseEndsWrite(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 1<<20)
	client, server := pair(t, ln, cfg, 1<<20)
	require.NoError(t, server.Close())
	ctx := ctxFor(t, 10*time.Second)
	<-client.gone()
	err := client.WriteFrame(ctx, []byte("late"))
	assert.ErrorIs(t, err, io.EOF)
	_, err = client.ReadFrame(ctx)
	assert.ErrorIs(t, err, io.EOF)
}

func TestListenerCloseKeepsConns(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 1<<20)
	client, server := pair(t, ln, cfg, 1<<20)
	require.NoError(t, ln.Close())
	ctx := ctxFor(t, 10*time.Second)
	_, err := ln.Accept(ctx)
	assert.ErrorIs(t, err, transport.ErrClosed)
	for _, p := range [][2]*Conn{{client, server}, {server, client}} {
		done := make(chan error, 1)
		go func() { done <- p[0].WriteFrame(ctx, []byte("still here")) }()
		f, err := p[1].ReadFrame(ctx)
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.True(t, bytes.Equal([]byte("still here"), f))
	}
}

func TestIdleTimeoutAndKeepAlive(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 300 * time.Millisecond
	cfg.KeepAlive = 0
	ln := listen(t, cfg, 1<<20)
	client, server := pair(t, ln, cfg, 1<<20)
	ctx := ctxFor(t, 10*time.Second)
	start := time.Now()
	_, err := server.ReadFrame(ctx)
	require.Error(t, err)
	var idle *quic.IdleTimeoutError
	assert.ErrorAs(t, err, &idle)
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	_, err = client.ReadFrame(ctx)
	assert.ErrorAs(t, err, &idle)

	// With keep-alives a quiet connection lives on.
	cfg.KeepAlive = 50 * time.Millisecond
	client, server = pair(t, ln, cfg, 1<<20)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = server.ReadFrame(short)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	roundTrip(t, client, server)
}

func TestDialTimeout(t *testing.T) {
	// A UDP socket that never answers.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	cfg := testConfig()
	cfg.DialTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err = Dial(context.Background(), pc.LocalAddr().String(), cfg, transport.Deps{})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)

	// The caller's ctx is honoured too.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	cfg.DialTimeout = 0
	_, err = Dial(ctx, pc.LocalAddr().String(), cfg, transport.Deps{})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestBadAddresses(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:-5", "nonsense", "127.0.0.1:http-nope"} {
		_, err := Listen(context.Background(), addr, testConfig(), transport.Deps{})
		assert.Error(t, err, addr)
		_, err = Dial(context.Background(), addr, testConfig(), transport.Deps{})
		assert.Error(t, err, addr)
	}
}

func TestIPv6(t *testing.T) {
	ln, err := Listen(context.Background(), "[::1]:0", testConfig(), deps(t, 0))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln.Close()
	client, server := pair(t, ln, testConfig(), 0)
	assert.Equal(t, client.LocalAddr(), server.RemoteAddr())
	roundTrip(t, client, server)
	// The self-signed certificate verifies for ::1.
	cfg := NewConfig()
	cfg.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(cfg.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: peerCert(client).Raw}), 0o600))
	c, s, err := dialAccept(t, ln, ln.Addr(), cfg)
	require.NoError(t, err)
	roundTrip(t, c, s)
}

// TestCloseLingerBounded: against a peer that ignores the goodbye, Close
// gives up after its linger (1 s on loopback), and does not wait at all
// when nothing was written.
func TestCloseLingerBounded(t *testing.T) {
	ln := listen(t, testConfig(), 1<<20)
	_, c := rawDial(t, ln)
	start := time.Now()
	require.NoError(t, c.Close())
	assert.Less(t, time.Since(start), 500*time.Millisecond, "nothing written, nothing to wait for")

	qc, c := rawDial(t, ln)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, c.WriteFrame(ctx, []byte("data")))
	start = time.Now()
	require.NoError(t, c.Close())
	d := time.Since(start)
	assert.GreaterOrEqual(t, d, 900*time.Millisecond)
	assert.Less(t, d, 3*time.Second)
	select {
	case <-qc.Context().Done():
	case <-ctx.Done():
		t.Fatal("peer not closed")
	}
}
