package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/transporttest"
	"github.com/quivermq/quiver/internal/racebuild"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig() *Config {
	cfg := NewConfig()
	cfg.IdleTimeout = 0
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	return cfg
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		cfg := testConfig()
		ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, transporttest.MaxFrameSize)
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return Dial(ctx, ln.Addr(), cfg, transporttest.MaxFrameSize)
		}
	})
}

// TestConformanceProvider runs the suite through the Provider with the
// default config on the listening side and a nil config on the dialling side.
func TestConformanceProvider(t *testing.T) {
	p := NewProvider()
	deps := transport.Deps{MaxFrameSize: transporttest.MaxFrameSize}
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		ln, err := p.Listen(context.Background(), "127.0.0.1:0", p.NewConfig(), deps)
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return p.Dial(ctx, ln.Addr(), nil, deps)
		}
	})
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	assert.Equal(t, "tcp", p.ID())
	assert.Equal(t, NewConfig(), p.NewConfig())
	require.NoError(t, NewConfig().Validate())
	bad := NewConfig()
	bad.ReadBuffer = 1
	assert.Error(t, bad.Validate())
	bad = NewConfig()
	bad.IdleTimeout = -1
	assert.Error(t, bad.Validate())
}

func TestListenBadAddr(t *testing.T) {
	_, err := Listen(context.Background(), "127.0.0.1:-5", testConfig(), 0)
	assert.Error(t, err)
}

func TestDialNilConfig(t *testing.T) {
	ln, err := Listen(context.Background(), "127.0.0.1:0", nil, 0)
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, ln.Addr(), nil, 0)
	require.NoError(t, err)
	defer c.Close()
	s, err := ln.Accept(ctx)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, c.WriteFrame(ctx, []byte{0, 0, 0, 0}))
	got, err := s.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 0}, got)
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Dial(ctx, addr, testConfig(), 0)
	assert.Error(t, err)
}

// rawPair returns a raw net.Conn client and the framed server end.
func rawPair(t *testing.T, cfg *Config, maxFrame int) (net.Conn, *Conn) {
	t.Helper()
	ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, maxFrame)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	raw, err := net.DialTimeout("tcp", ln.Addr(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return raw, c.(*Conn)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func TestWireFormat(t *testing.T) {
	raw, c := rawPair(t, testConfig(), 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Our writes: big-endian length, then the parts back to back.
	require.NoError(t, c.WriteFrame(ctx, []byte{0, 0, 0, 2}, []byte("{}"), []byte("body")))
	got := make([]byte, 4+10)
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadFull(raw, got)
	require.NoError(t, err)
	assert.Equal(t, append(be32(10), "\x00\x00\x00\x02{}body"...), got)

	// Frames written raw, two in one write and one byte at a time.
	_, err = raw.Write(append(append(be32(5), "hello"...), append(be32(4), "1234"...)...))
	require.NoError(t, err)
	for _, b := range append(be32(6), "slowly"...) {
		_, err = raw.Write([]byte{b})
		require.NoError(t, err)
	}
	for _, want := range []string{"hello", "1234", "slowly"} {
		f, err := c.ReadFrame(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, string(f))
	}
}

// fakeConn is a net.Conn reading from a fixed byte string.
type fakeConn struct {
	net.Conn // nil: methods not listed here are not used
	r        io.Reader
}

func newFake(b []byte) *fakeConn                     { return &fakeConn{r: bytes.NewReader(b)} }
func (f *fakeConn) Read(b []byte) (int, error)       { return f.r.Read(b) }
func (f *fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (f *fakeConn) Close() error                     { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }
func (f *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (f *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }

func TestBadDeclaredLength(t *testing.T) {
	tests := []struct {
		name string
		give uint32
		want error
	}{
		{"2 GiB", 0x7FFFFFFF, transport.ErrFrameTooLarge},
		{"limit plus one", 1<<20 + 1, transport.ErrFrameTooLarge},
		{"16 MiB", 16 << 20, transport.ErrFrameTooLarge},
		{"minus one", 0xFFFFFFFF, transport.ErrBadFrame},
		{"min int32", 0x80000000, transport.ErrBadFrame},
		{"zero", 0, transport.ErrBadFrame},
		{"three", 3, transport.ErrBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A fake conn whose stream declares the length and then ends,
			// so only the refusal can stop ReadFrame.
			c := NewConn(newFake(be32(tt.give)), testConfig(), 1<<20)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := c.ReadFrame(context.Background())
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, tt.want)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "ReadFrame allocated for a refused length")
			// The stream has lost its framing: the error sticks.
			_, err = c.ReadFrame(context.Background())
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestBadDeclaredLengthOverTCP(t *testing.T) {
	for _, tt := range []struct {
		give uint32
		want error
	}{{0x7FFFFFFF, transport.ErrFrameTooLarge}, {0xFFFFFFF0, transport.ErrBadFrame}} {
		raw, c := rawPair(t, testConfig(), 1<<20)
		_, err := raw.Write(be32(tt.give))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.ReadFrame(ctx)
		cancel()
		assert.ErrorIs(t, err, tt.want)
	}
}

func TestTruncatedFrameThenClose(t *testing.T) {
	tests := []struct {
		name string
		give []byte
	}{
		{"half a length", []byte{0, 0}},
		{"short body", append(be32(100), make([]byte, 10)...)},
		{"length only", be32(100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, c := rawPair(t, testConfig(), 1<<20)
			_, err := raw.Write(tt.give)
			require.NoError(t, err)
			require.NoError(t, raw.Close())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = c.ReadFrame(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.NoError(t, ctx.Err(), "ReadFrame hung until the test deadline")
			_, err = c.ReadFrame(ctx)
			assert.Error(t, err)
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 100 * time.Millisecond
	raw, c := rawPair(t, cfg, 1<<20)

	// Traffic within the timeout keeps the connection.
	for i := range 3 {
		time.Sleep(30 * time.Millisecond)
		_, err := raw.Write(append(be32(4), 0, 0, 0, byte(i)))
		require.NoError(t, err)
		f, err := c.ReadFrame(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []byte{0, 0, 0, byte(i)}, f)
	}

	start := time.Now()
	_, err := c.ReadFrame(context.Background())
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.GreaterOrEqual(t, elapsed, 90*time.Millisecond)
	assert.Less(t, elapsed, 5*time.Second)
}

func TestIdleTimeoutMidFrameCloses(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 100 * time.Millisecond
	raw, c := rawPair(t, cfg, 1<<20)
	_, err := raw.Write(append(be32(50), 1, 2, 3))
	require.NoError(t, err)
	_, err = c.ReadFrame(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	// The rest of the frame must not be read as a new frame.
	_, err = raw.Write(make([]byte, 47))
	require.NoError(t, err)
	_, err = c.ReadFrame(context.Background())
	assert.ErrorIs(t, err, transport.ErrClosed)
}

func TestCancelMidFrameCloses(t *testing.T) {
	raw, c := rawPair(t, testConfig(), 1<<20)
	_, err := raw.Write(append(be32(50), 1, 2, 3))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.ReadFrame(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = c.ReadFrame(context.Background())
	assert.ErrorIs(t, err, transport.ErrClosed)
}

// TestCancelledReadsDoNotStick reads many times with contexts that end at
// random points; a later read must still see the next frame.
func TestCancelledReadsDoNotStick(t *testing.T) {
	raw, c := rawPair(t, testConfig(), 1<<20)
	for i := range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*100*time.Microsecond)
		_, err := c.ReadFrame(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	_, err := raw.Write(append(be32(4), 9, 9, 9, 9))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, err := c.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, []byte{9, 9, 9, 9}, f)
}

func TestWriteTooShort(t *testing.T) {
	_, c := rawPair(t, testConfig(), 1<<20)
	for _, parts := range [][][]byte{nil, {{}}, {{1, 2, 3}}, {{1}, {2, 3}}} {
		assert.ErrorIs(t, c.WriteFrame(context.Background(), parts...), transport.ErrBadFrame)
	}
}

// stalledWrite writes 1 MiB frames to a raw peer that never reads until a
// write fails, and returns that error and how long it took.
func stalledWrite(ctx context.Context, t *testing.T, cfg *Config) (time.Duration, error) {
	t.Helper()
	_, c := rawPair(t, cfg, 1<<20)
	big := make([]byte, 1<<20)
	start := time.Now()
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		err = c.WriteFrame(ctx, big)
	}
	d := time.Since(start)
	// A failed write tore a frame: the connection is closed.
	assert.ErrorIs(t, c.WriteFrame(context.Background(), big[:4]), transport.ErrClosed)
	return d, err
}

func TestWriteTimeoutDropsStalledPeer(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 200 * time.Millisecond
	cfg.WriteBuffer = 4096
	d, err := stalledWrite(context.Background(), t, cfg)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, d, 10*time.Second)
}

func TestWriteTimeoutShorterThanContext(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := stalledWrite(ctx, t, cfg)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

func TestWriteCancelledWhileBlocked(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	d, err := stalledWrite(ctx, t, cfg)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, d, 10*time.Second)
}

func TestCloseUnblocksWrite(t *testing.T) {
	cfg := testConfig()
	cfg.WriteTimeout = 0
	_, c := rawPair(t, cfg, 1<<20)
	done := make(chan error, 1)
	go func() {
		big := make([]byte, 1<<20)
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			err = c.WriteFrame(context.Background(), big)
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Close())
	select {
	case err := <-done:
		assert.True(t, errors.Is(err, transport.ErrClosed), "got %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock WriteFrame")
	}
}

func TestAcceptCancelThenAccept(t *testing.T) {
	ln, err := Listen(context.Background(), "127.0.0.1:0", testConfig(), 0)
	require.NoError(t, err)
	defer ln.Close()
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, err := ln.Accept(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	raw, err := net.DialTimeout("tcp", ln.Addr(), 5*time.Second)
	require.NoError(t, err)
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	require.NoError(t, err)
	c.Close()
	ln.Close()
	_, err = ln.Accept(ctx)
	assert.ErrorIs(t, err, transport.ErrClosed)
}

// TestLyingLengthCostsNoMemory: a peer that declares a 16 MiB frame and
// sends a few bytes makes the reader hold only what arrived.
func TestLyingLengthCostsNoMemory(t *testing.T) {
	var r lyingReader
	r.data = make([]byte, 100)
	_, err := readBody(&r, 16<<20, eagerAlloc, true)
	require.Error(t, err)
	// (a recycled buffer of the first class may be up to twice its size)
	assert.Less(t, r.maxAsked, 2*eagerAlloc, "the buffer grows only as bytes arrive")
}

// dialledPair is a dialled connection and its accepted end, closed with
// the test.
func dialledPair(t *testing.T) (dialled, accepted *Conn) {
	ctx := context.Background()
	ln, err := Listen(ctx, "127.0.0.1:0", NewConfig(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	c, err := Dial(ctx, ln.Addr(), NewConfig(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ac, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { ac.Close() })
	return c, ac.(*Conn)
}

// TestDialledConnReadsFramesWhole: a dialled connection (a client reading
// its server's answers) allocates a large frame at once; an accepted one
// grows it as bytes arrive.
func TestDialledConnReadsFramesWhole(t *testing.T) {
	c, sc := dialledPair(t)
	assert.Equal(t, c.MaxFrameSize(), c.eager)
	assert.Equal(t, eagerAlloc, sc.eager)

	var r lyingReader
	r.data = make([]byte, 300<<10)
	got, err := readBody(&r, 300<<10, c.eager, false)
	require.NoError(t, err)
	assert.Len(t, got, 300<<10)
	assert.Equal(t, 300<<10, r.maxAsked, "one read into the whole frame")
}

type lyingReader struct {
	data     []byte
	maxAsked int
}

func (l *lyingReader) Read(p []byte) (int, error) {
	if len(p) > l.maxAsked {
		l.maxAsked = len(p)
	}
	if len(l.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, l.data)
	l.data = l.data[n:]
	return n, nil
}

func TestReadBodyLargeFrame(t *testing.T) {
	want := make([]byte, 3<<20+17)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got, err := readBody(bytes.NewReader(want), len(want), eagerAlloc, true)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestSlowSenderDropped: a frame that starts but does not finish within
// read_timeout ends the connection.
func TestSlowSenderDropped(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout = 200 * time.Millisecond
	ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, 0)
	require.NoError(t, err)
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr())
	require.NoError(t, err)
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = raw.Write([]byte{0, 0, 0, 100, 0, 0})
	require.NoError(t, err)
	start := time.Now()
	_, err = c.ReadFrame(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 4*time.Second)
}

func TestFramePoolClasses(t *testing.T) {
	for _, tc := range []struct{ n, class int }{{1, 9}, {512, 9}, {513, 10}, {4096, 12}, {4097, 13}, {64 << 10, 16}, {(64 << 10) + 1, 17}, {4 << 20, 22}, {(4 << 20) + 1, -1}} {
		assert.Equal(t, tc.class, frameClass(tc.n), "n=%d", tc.n)
	}
	// A fresh buffer has the exact size; a recycled one of 12,000 bytes
	// serves frames up to 8 KiB (its class), not larger ones.
	b := getFrame(12000, false)
	assert.Len(t, b, 12000)
	assert.Equal(t, 12000, cap(b))
	assert.GreaterOrEqual(t, cap(getFrame(12000, true)), 16384, "full: (at least) the class's capacity")
	putFrame(make([]byte, 100)) // below the smallest class: dropped
	// sync.Pool may drop what it is given (a quarter of it under -race):
	// give back fresh buffers until a frame of their class gets one.
	got := false
	for i := 0; i < 100 && !got; i++ {
		b := make([]byte, 12000)
		putFrame(b)
		c := getFrame(6000, false)
		assert.Len(t, c, 6000)
		assert.GreaterOrEqual(t, cap(c), 6000)
		got = &c[:1][0] == &b[:1][0]
	}
	assert.True(t, got, "the recycled buffer serves a frame of its class")
	assert.GreaterOrEqual(t, cap(getFrame(9000, false)), 9000, "a larger frame never gets a smaller buffer")
	big := getFrame(5<<20, true)
	assert.Equal(t, 5<<20, cap(big), "beyond the largest class: allocated to size")
}

// TestFramePoolRecyclesWithoutAllocating: giving a frame back and taking
// it again allocates nothing once the pool is warm (the *[]byte each
// buffer travels in is reused, not allocated per putFrame).
func TestFramePoolRecyclesWithoutAllocating(t *testing.T) {
	if racebuild.Enabled {
		t.Skip("sync.Pool drops a quarter of what it is given under -race")
	}
	b := getFrame(2000, true)
	allocs := testing.AllocsPerRun(1000, func() {
		putFrame(b)
		b = getFrame(2000, true)
	})
	assert.Zero(t, allocs)
}

// TestRecycledFramesCarryOnlyTheirBytes: an accepted connection reads
// frames into pooled buffers; frames recycled at once and read again of
// other sizes (both the eager and the growing path) hold exactly what was
// sent, never bytes of an earlier frame.
func TestRecycledFramesCarryOnlyTheirBytes(t *testing.T) {
	ctx := context.Background()
	c, sc := dialledPair(t)
	sizes := []int{10, 70000, 5, 200000, 4096, 300 << 10, 17, 65536, 65537}
	go func() {
		for i, n := range sizes {
			c.WriteFrame(ctx, bytes.Repeat([]byte{byte('A' + i)}, n))
		}
	}()
	for i, n := range sizes {
		f, err := sc.ReadFrame(ctx)
		require.NoError(t, err)
		require.Len(t, f, n)
		assert.Equal(t, bytes.Repeat([]byte{byte('A' + i)}, n), f, "frame %d", i)
		for j := range f {
			f[j] = 'x' // scribble: the next frame must not see it
		}
		sc.RecycleFrame(f)
	}
}
