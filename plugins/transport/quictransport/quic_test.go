package quictransport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/remoting/remotingtest"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/transporttest"
	"github.com/quivermq/quiver/internal/racebuild"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs to t.Log until the test's cleanups have run.
func testLogger(t testing.TB) *slog.Logger { return remotingtest.Logger(t) }

func testConfig() *Config {
	cfg := NewConfig()
	cfg.DialTimeout = 5 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	if racebuild.Enabled {
		// Under -race on a loaded machine the receiving side is slow
		// enough that quic-go drops packets on loopback and large frames
		// need retransmissions: give writes more time.
		cfg.WriteTimeout = 30 * time.Second
	}
	cfg.InsecureSkipVerify = true
	return cfg
}

func deps(t testing.TB, maxFrame int) transport.Deps {
	return transport.Deps{Logger: testLogger(t), MaxFrameSize: maxFrame}
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		cfg := testConfig()
		ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, deps(t, transporttest.MaxFrameSize))
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return Dial(ctx, ln.Addr(), cfg, deps(t, transporttest.MaxFrameSize))
		}
	}, transporttest.Unordered())
}

// TestConformanceProvider runs the suite through the Provider: the
// listener with the default config (a self-signed certificate), the dialler
// with the defaults plus insecure_skip_verify.
func TestConformanceProvider(t *testing.T) {
	p := NewProvider()
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		d := deps(t, transporttest.MaxFrameSize)
		ln, err := p.Listen(context.Background(), "127.0.0.1:0", p.NewConfig(), d)
		require.NoError(t, err)
		dc := NewConfig()
		dc.InsecureSkipVerify = true
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return p.Dial(ctx, ln.Addr(), dc, d)
		}
	}, transporttest.Unordered())
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	assert.Equal(t, "quic", p.ID())
	assert.Equal(t, NewConfig(), p.NewConfig())
	for _, give := range []any{nil, (*Config)(nil)} {
		c, err := p.Config(give)
		assert.NoError(t, err)
		assert.Equal(t, NewConfig(), c, "%T means the defaults", give)
	}
	_, err := p.Config(struct{}{})
	assert.ErrorIs(t, err, transport.ErrBadConfig)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(c *Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"cert and key", func(c *Config) { c.CertFile, c.KeyFile = "c.pem", "k.pem" }, ""},
		{"ca file", func(c *Config) { c.CAFile = "ca.pem" }, ""},
		{"insecure", func(c *Config) { c.InsecureSkipVerify = true }, ""},
		{"no keep-alive", func(c *Config) { c.KeepAlive = 0 }, ""},
		{"no write timeout", func(c *Config) { c.WriteTimeout = 0 }, ""},
		{"cert without key", func(c *Config) { c.CertFile = "c.pem" }, "cert_file, key_file"},
		{"key without cert", func(c *Config) { c.KeyFile = "k.pem" }, "cert_file, key_file"},
		{"ca and insecure", func(c *Config) { c.CAFile, c.InsecureSkipVerify = "ca.pem", true }, "insecure_skip_verify"},
		{"negative dial timeout", func(c *Config) { c.DialTimeout = -1 }, "dial_timeout"},
		{"negative write timeout", func(c *Config) { c.WriteTimeout = -1 }, "write_timeout"},
		{"zero idle timeout", func(c *Config) { c.IdleTimeout = 0 }, "idle_timeout"},
		{"zero handshake timeout", func(c *Config) { c.HandshakeTimeout = 0 }, "handshake_timeout"},
		{"keep-alive above idle", func(c *Config) { c.KeepAlive = time.Minute }, "keep_alive"},
		{"zero streams", func(c *Config) { c.MaxStreams = 0 }, "max_streams"},
		{"client auth", func(c *Config) { c.ClientAuth, c.ClientCAFile = "require", "ca.pem" }, ""},
		{"bad client auth", func(c *Config) { c.ClientAuth = "always" }, "client_auth"},
		{"client cert without key", func(c *Config) { c.ClientCertFile = "c.pem" }, "client_cert_file"},
		{"quic-go's ack delay", func(c *Config) { c.MaxAckDelay = 0 }, ""},
		{"negative ack delay", func(c *Config) { c.MaxAckDelay = -time.Millisecond }, "max_ack_delay"},
		{"ack delay too long", func(c *Config) { c.MaxAckDelay = 17 * time.Second }, "max_ack_delay"},
		{"quic's ack threshold", func(c *Config) { c.AckThreshold = 0 }, ""},
		{"ack threshold 2", func(c *Config) { c.AckThreshold = 2 }, ""},
		{"ack threshold 1", func(c *Config) { c.AckThreshold = 1 }, "ack_threshold"},
		{"negative ack threshold", func(c *Config) { c.AckThreshold = -1 }, "ack_threshold"},
		{"ack threshold too high", func(c *Config) { c.AckThreshold = 257 }, "ack_threshold"},
		{"backoff 0.85", func(c *Config) { c.CongestionBackoff = 0.85 }, ""},
		{"backoff too low", func(c *Config) { c.CongestionBackoff = 0.3 }, "congestion_backoff"},
		{"backoff too high", func(c *Config) { c.CongestionBackoff = 1 }, "congestion_backoff"},
		{"bbr", func(c *Config) { c.Congestion = "bbr" }, ""},
		{"quic-go's controller", func(c *Config) { c.Congestion = "" }, ""},
		{"unknown controller", func(c *Config) { c.Congestion = "cubic" }, "congestion: must be reno or bbr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig()
			tt.give(c)
			err := c.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// Every problem is reported.
	c := NewConfig()
	c.DialTimeout, c.MaxStreams, c.CertFile = -1, -1, "c.pem"
	err := c.Validate()
	require.Error(t, err)
	for _, key := range []string{"dial_timeout", "max_streams", "cert_file"} {
		assert.Contains(t, err.Error(), key)
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// listen starts a listener closed at the end of the test.
func listen(t testing.TB, cfg *Config, maxFrame int) *Listener {
	t.Helper()
	ln, err := Listen(context.Background(), "127.0.0.1:0", cfg, deps(t, maxFrame))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair dials ln and returns both ends, closed at the end of the test.
func pair(t testing.TB, ln *Listener, cfg *Config, maxFrame int) (client, server *Conn) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	accepted := make(chan transport.Conn, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err := Dial(ctx, ln.Addr(), cfg, deps(t, maxFrame))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	s := <-accepted
	require.NotNil(t, s)
	t.Cleanup(func() { s.Close() })
	return client, s.(*Conn)
}

// frameOf is a frame of n bytes: a 12-byte header naming writer, sequence
// and length, then a pattern derived from them.
func frameOf(w, seq, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b[0:], uint32(w))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	binary.BigEndian.PutUint32(b[8:], uint32(n))
	for i := 12; i < n; i++ {
		b[i] = byte(w*31 + seq*7 + i)
	}
	return b
}

// TestConcurrentBothWays has 16 goroutines on each end write 200 frames
// each at once; every frame arrives once and intact (in any order).
func TestConcurrentBothWays(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 60*time.Second)
	writers, perWriter := 16, 200
	if racebuild.Enabled {
		writers, perWriter = 8, 100 // the race detector slows quic-go ~10×
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*writers)
	for dir, c := range []*Conn{client, server} {
		for w := range writers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(dir), uint64(w)))
				for seq := range perWriter {
					n := 12 + r.IntN(4<<10)
					if seq%50 == 49 {
						n = 12 + r.IntN(512<<10)
					}
					f := frameOf(w, seq, n)
					if err := c.WriteFrame(ctx, f[:7], f[7:]); err != nil {
						errs <- fmt.Errorf("dir %d writer %d frame %d: %w", dir, w, seq, err)
						return
					}
				}
			})
		}
	}
	for dir, c := range []*Conn{server, client} {
		wg.Go(func() {
			seen := make([]map[int]bool, writers)
			for w := range seen {
				seen[w] = map[int]bool{}
			}
			for range writers * perWriter {
				f, err := c.ReadFrame(ctx)
				if err != nil {
					errs <- fmt.Errorf("dir %d read: %w", dir, err)
					return
				}
				w, seq := int(binary.BigEndian.Uint32(f)), int(binary.BigEndian.Uint32(f[4:]))
				n := int(binary.BigEndian.Uint32(f[8:]))
				if w >= writers || seq >= perWriter || seen[w][seq] || n != len(f) || !bytes.Equal(f, frameOf(w, seq, n)) {
					errs <- fmt.Errorf("dir %d: frame writer %d seq %d len %d/%d corrupted or duplicated", dir, w, seq, len(f), n)
					return
				}
				seen[w][seq] = true
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

// TestLargeFrames sends frames at and just below the default 16 MiB limit
// both ways, and refuses one byte more.
func TestLargeFrames(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 60*time.Second)
	big := make([]byte, transport.DefaultMaxFrameSize+1)
	for i := range big {
		big[i] = byte(i * 13)
	}
	for _, p := range [][2]*Conn{{client, server}, {server, client}} {
		for _, n := range []int{transport.DefaultMaxFrameSize, transport.DefaultMaxFrameSize - 1} {
			done := make(chan error, 1)
			go func() { done <- p[0].WriteFrame(ctx, big[:4], big[4:n]) }()
			got, err := p[1].ReadFrame(ctx)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(big[:n], got), "frame of %d bytes corrupted", n)
		}
		err := p[0].WriteFrame(ctx, big)
		require.ErrorIs(t, err, transport.ErrFrameTooLarge)
		err = p[0].WriteFrame(ctx, big[:1], big[1:])
		require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	}
	// Both ends still work.
	require.NoError(t, client.WriteFrame(ctx, []byte("ping")))
	got, err := server.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
}

func TestWriteTooShort(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, _ := pair(t, ln, cfg, 0)
	for _, parts := range [][][]byte{nil, {{}}, {{1, 2, 3}}, {{1}, {2, 3}}} {
		assert.ErrorIs(t, client.WriteFrame(context.Background(), parts...), transport.ErrBadFrame)
	}
}

func TestBudget(t *testing.T) {
	b := newBudget(10)
	stop := make(chan struct{})
	require.True(t, b.acquire(6, stop, time.Time{}))
	require.True(t, b.acquire(4, stop, time.Time{}))
	// Full: a deadline ends the wait.
	start := time.Now()
	assert.False(t, b.acquire(1, stop, time.Now().Add(50*time.Millisecond)))
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	// A release wakes a waiter that then fits.
	got := make(chan bool, 1)
	go func() { got <- b.acquire(5, stop, time.Time{}) }()
	time.Sleep(20 * time.Millisecond)
	b.release(4)
	select {
	case <-got:
		t.Fatal("4 free bytes satisfied a wait for 5")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(6)
	assert.True(t, <-got)
	// stop ends the wait.
	go func() { got <- b.acquire(100, stop, time.Time{}) }()
	close(stop)
	assert.False(t, <-got)
}

// TestStreamsReused: request/response traffic turns the same streams
// around, and one-way traffic gets its streams handed back with passes,
// so neither opens a stream per frame.
func TestStreamsReused(t *testing.T) {
	cfg := testConfig()
	ln := listen(t, cfg, 0)
	client, server := pair(t, ln, cfg, 0)
	ctx := ctxFor(t, 60*time.Second)
	const writers, perWriter = 8, 200

	// Request/response: every answer goes out on a stream a request came
	// on, and comes back as idle for the next request.
	var wg sync.WaitGroup
	wg.Go(func() {
		for range writers * perWriter {
			f, err := server.ReadFrame(ctx)
			if !assert.NoError(t, err) {
				return
			}
			wg.Go(func() { assert.NoError(t, server.WriteFrame(ctx, f)) })
		}
	})
	answers := make([]chan []byte, writers)
	for w := range answers {
		answers[w] = make(chan []byte, 1)
	}
	wg.Go(func() {
		for range writers * perWriter {
			f, err := client.ReadFrame(ctx)
			if !assert.NoError(t, err) {
				return
			}
			answers[binary.BigEndian.Uint32(f)] <- f
		}
	})
	for w := range writers {
		wg.Go(func() {
			for seq := range perWriter {
				f := frameOf(w, seq, 1024)
				if !assert.NoError(t, client.WriteFrame(ctx, f)) {
					return
				}
				assert.Equal(t, f, <-answers[w])
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, client.opened.Load(), int64(2*writers), "client streams")
	assert.LessOrEqual(t, server.opened.Load(), int64(2*writers), "server streams")

	// One way: the reader keeps passAbove streams idle and passes the rest
	// back, up to maxIdleStreams on either end.
	wg.Go(func() {
		for range writers * perWriter {
			if _, err := server.ReadFrame(ctx); !assert.NoError(t, err) {
				return
			}
		}
	})
	for w := range writers {
		wg.Go(func() {
			for seq := range perWriter {
				assert.NoError(t, client.WriteFrame(ctx, frameOf(w, seq, 1024)))
			}
		})
	}
	wg.Wait()
	idle := func(c *Conn) int {
		c.poolMu.Lock()
		defer c.poolMu.Unlock()
		return len(c.idle)
	}
	assert.Eventually(t, func() bool { return idle(client) > 0 }, 10*time.Second, time.Millisecond, "streams passed back")
	assert.LessOrEqual(t, idle(server), maxIdleStreams)
	assert.LessOrEqual(t, idle(client), maxIdleStreams)
}
