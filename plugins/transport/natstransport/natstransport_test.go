package natstransport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/remoting/remotingtest"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/core/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runNATS starts an embedded nats-server on port (-1: a free one) and
// stops it at the end of the test.
func runNATS(t testing.TB, port int, tune ...func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true}
	for _, f := range tune {
		f(opts)
	}
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready")
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func natsURL(s *server.Server) string {
	return "nats://" + s.Addr().String()
}

func testConfig(s *server.Server) *Config {
	cfg := NewConfig()
	cfg.URL = natsURL(s)
	cfg.ConnectTimeout = 5 * time.Second
	cfg.ReconnectWait = 20 * time.Millisecond
	return cfg
}

// testLogger logs to t.Log until the test's cleanups have run.
func testLogger(t testing.TB) *slog.Logger { return remotingtest.Logger(t) }

func deps(t testing.TB, maxFrame int) transport.Deps {
	return transport.Deps{Logger: testLogger(t), MaxFrameSize: maxFrame}
}

// conformance runs the suite against a server tuned by tune, with the
// listener and the dialer on separate providers (so separate NATS
// connections) or on one shared provider.
func conformance(t *testing.T, shared bool, tune ...func(*server.Options)) {
	s := runNATS(t, -1, tune...)
	cfg := testConfig(s)
	transporttest.Run(t, func(t *testing.T) (transport.Listener, func(context.Context) (transport.Conn, error)) {
		lp := NewProvider()
		dp := lp
		if !shared {
			dp = NewProvider()
		}
		ln, err := lp.Listen(context.Background(), "127.0.0.1:0", cfg, deps(t, transporttest.MaxFrameSize))
		require.NoError(t, err)
		return ln, func(ctx context.Context) (transport.Conn, error) {
			return dp.Dial(ctx, ln.Addr(), cfg, deps(t, transporttest.MaxFrameSize))
		}
	})
}

func TestConformance(t *testing.T) { conformance(t, false) }

// TestConformanceShared has listener and dialer share one NATS connection,
// as the name server and broker of `mq dev` do.
func TestConformanceShared(t *testing.T) { conformance(t, true) }

// TestConformanceSmallPayload splits nearly every frame of the suite: the
// server's max_payload is 16 KiB.
func TestConformanceSmallPayload(t *testing.T) {
	conformance(t, false, func(o *server.Options) { o.MaxPayload = 16 << 10 })
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	assert.Equal(t, "nats", p.ID())
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
		{"cluster urls", func(c *Config) { c.URL = "nats://a:4222, tls://b:4222" }, ""},
		{"credentials", func(c *Config) { c.CredentialsFile = "user.creds" }, ""},
		{"nkey", func(c *Config) { c.NKeySeedFile = "user.nk" }, ""},
		{"tls", func(c *Config) { c.TLS = TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"} }, ""},
		{"no idle timeout", func(c *Config) { c.IdleTimeout = 0 }, ""},
		{"prefix with tokens", func(c *Config) { c.SubjectPrefix = "edge.quiver" }, ""},
		{"empty url", func(c *Config) { c.URL = "" }, "url: must be set"},
		{"bad scheme", func(c *Config) { c.URL = "http://a:4222" }, "url"},
		{"no host", func(c *Config) { c.URL = "nats://" }, "no host"},
		{"creds and nkey", func(c *Config) { c.CredentialsFile, c.NKeySeedFile = "a", "b" }, "credentials_file, nkey_seed_file"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "c.pem" }, "tls.cert_file"},
		{"ca and insecure", func(c *Config) { c.TLS.CAFile, c.TLS.InsecureSkipVerify = "ca.pem", true }, "tls.insecure_skip_verify"},
		{"empty prefix", func(c *Config) { c.SubjectPrefix = "" }, "subject_prefix"},
		{"wildcard prefix", func(c *Config) { c.SubjectPrefix = "quiver.*" }, "subject_prefix"},
		{"empty token", func(c *Config) { c.SubjectPrefix = "a..b" }, "subject_prefix"},
		{"inbox prefix", func(c *Config) { c.SubjectPrefix = "_INBOX" }, "reserved"},
		{"negative wait", func(c *Config) { c.ReconnectWait = -1 }, "reconnect_wait"},
		{"negative idle", func(c *Config) { c.IdleTimeout = -1 }, "idle_timeout"},
		{"tiny idle", func(c *Config) { c.IdleTimeout = time.Millisecond }, "idle_timeout"},
		{"zero connect timeout", func(c *Config) { c.ConnectTimeout = 0 }, "connect_timeout"},
		{"max reconnects", func(c *Config) { c.MaxReconnects = -2 }, "max_reconnects"},
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
	c := NewConfig()
	c.URL, c.ConnectTimeout, c.MaxReconnects = "ftp://x", 0, -5
	err := c.Validate()
	require.Error(t, err)
	for _, key := range []string{"url", "connect_timeout", "max_reconnects"} {
		assert.Contains(t, err.Error(), key)
	}
}

func TestSubjects(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"127.0.0.1:10911", "quiver.127_0_0_1.10911"},
		{"[::1]:9876", "quiver.__1.9876"},
		{"[::ffff:10.0.0.1]:1", "quiver.10_0_0_1.1"},
		{"Broker-A.example.com:10911", "quiver.broker-a_example_com.10911"},
		{"DefaultCluster.broker-a.0", "quiver.DefaultCluster.broker-a.0"},
		{"nats-broker-a", "quiver.nats-broker-a"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			a, err := parseAddress(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, a.subject("quiver"))
			assert.Equal(t, []string{tt.want}, a.listenSubjects("quiver"))
		})
	}
	for _, bad := range []string{"a b", "quiver.*", "x..y", "host:port", "1.2.3.4:70000", ":"} {
		_, err := parseAddress(bad)
		assert.Error(t, err, bad)
	}
	a, err := parseAddress("0.0.0.0:10911")
	require.NoError(t, err)
	subs := a.listenSubjects("q")
	assert.Contains(t, subs, "q.127_0_0_1.10911")
	assert.Contains(t, subs, "q.localhost.10911")
	assert.Equal(t, "q.127_0_0_1.10911", a.dialAddress().subject("q"))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func listen(t testing.TB, p *Provider, addr string, cfg *Config) *Listener {
	t.Helper()
	ln, err := p.ListenNATS(context.Background(), addr, cfg, deps(t, 0))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair dials ln through dp and returns both ends.
func pair(t testing.TB, ln *Listener, dp *Provider, cfg *Config) (client, srv *Conn) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	c, err := dp.DialNATS(ctx, ln.Addr(), cfg, deps(t, 0))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return c, s.(*Conn)
}

func TestListenAddresses(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	p := NewProvider()
	ln := listen(t, p, "127.0.0.1:0", cfg)
	_, port, err := net.SplitHostPort(ln.Addr())
	require.NoError(t, err)
	assert.NotEqual(t, "0", port)
	assert.Equal(t, []string{"quiver.127_0_0_1." + port}, ln.Subjects())

	// The same subject twice in one process is an address in use.
	_, err = p.ListenNATS(context.Background(), ln.Addr(), cfg, deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already listened on in this process")

	// Another process (provider) may: the queue group shares connections.
	other := listen(t, NewProvider(), ln.Addr(), cfg)
	assert.Equal(t, ln.Subjects(), other.Subjects())

	// A name is a subject tail; dialling the name reaches it.
	named := listen(t, p, "DefaultCluster.broker-a.0", cfg)
	assert.Equal(t, "DefaultCluster.broker-a.0", named.Addr())
	assert.Equal(t, []string{"quiver.DefaultCluster.broker-a.0"}, named.Subjects())
	c, srv := pair(t, named, NewProvider(), cfg)
	assert.Equal(t, "DefaultCluster.broker-a.0", c.RemoteAddr())
	assert.Equal(t, c.LocalAddr(), srv.RemoteAddr())

	// 0.0.0.0 is reached through loopback.
	any := listen(t, p, "0.0.0.0:0", cfg)
	_, port, _ = net.SplitHostPort(any.Addr())
	ctx := ctxFor(t, 5*time.Second)
	dc, err := NewProvider().DialNATS(ctx, "127.0.0.1:"+port, cfg, deps(t, 0))
	require.NoError(t, err)
	dc.Close()

	// The subject prefix applies.
	pc := testConfig(s)
	pc.SubjectPrefix = "edge.mq"
	pl := listen(t, p, "127.0.0.1:0", pc)
	assert.True(t, strings.HasPrefix(pl.Subjects()[0], "edge.mq.127_0_0_1."), pl.Subjects())
}

// TestSharedNATSConnection: one provider holds one NATS connection for all
// its listeners and dialers, and closes it with the last of them.
func TestSharedNATSConnection(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	p := NewProvider()
	ln1 := listen(t, p, "127.0.0.1:0", cfg)
	ln2 := listen(t, p, "127.0.0.1:0", cfg)
	c, srv := pair(t, ln1, p, cfg)
	assert.Same(t, ln1.hub, ln2.hub)
	assert.Same(t, ln1.hub, c.hub)
	assert.Equal(t, 1, s.NumClients())
	ln1.Close()
	ln2.Close()
	assert.Equal(t, 1, s.NumClients(), "connections still use it")
	c.Close()
	srv.Close()
	require.Eventually(t, func() bool { return s.NumClients() == 0 }, 5*time.Second, 10*time.Millisecond)
	p.pool.mu.Lock()
	assert.Empty(t, p.pool.hubs)
	p.pool.mu.Unlock()
	// A new listener connects again.
	ln3 := listen(t, p, "127.0.0.1:0", cfg)
	assert.NotSame(t, ln1.hub, ln3.hub)
}

func TestDialRefused(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	start := time.Now()
	_, err := NewProvider().DialNATS(ctxFor(t, 5*time.Second), "127.0.0.1:1", cfg, deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "natstransport: dial 127.0.0.1:1: connection refused: nothing listens on quiver.127_0_0_1.1")
	assert.Less(t, time.Since(start), time.Second, "no-responders answer at once")

	// No NATS server at all.
	bad := NewConfig()
	bad.URL, bad.ConnectTimeout = "nats://127.0.0.1:1", time.Second
	_, err = NewProvider().DialNATS(ctxFor(t, 5*time.Second), "127.0.0.1:1", bad, deps(t, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "natstransport: connect to nats://127.0.0.1:1")
}

// TestFrameAboveMaxPayload: frames above the server's max_payload travel
// split; frames above the frame limit are refused with a clear error and
// the connection goes on.
func TestFrameAboveMaxPayload(t *testing.T) {
	s := runNATS(t, -1) // max_payload 1 MiB
	cfg := testConfig(s)
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	client, srv := pair(t, ln, NewProvider(), cfg)
	assert.EqualValues(t, 1<<20, client.hub.nc.MaxPayload())
	ctx := ctxFor(t, 30*time.Second)
	big := make([]byte, transport.DefaultMaxFrameSize+1)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for _, n := range []int{1<<20 - headerLen, 1<<20 - headerLen + 1, 3<<20 + 17, transport.DefaultMaxFrameSize} {
		done := make(chan error, 1)
		go func() { done <- client.WriteFrame(ctx, big[:4], big[4:n]) }()
		got, err := srv.ReadFrame(ctx)
		require.NoError(t, err)
		require.NoError(t, <-done)
		require.True(t, bytes.Equal(big[:n], got), "frame of %d bytes corrupted", n)
	}
	err := srv.WriteFrame(ctx, big)
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	assert.Contains(t, err.Error(), "16777217 bytes is above the frame limit of 16777216 bytes (remoting.max_frame_size)")
	require.NoError(t, srv.WriteFrame(ctx, []byte("ping")))
	got, err := client.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
}

// TestIdleTimeout: a peer that stops sending (keep-alives included) is
// dropped after the smaller idle timeout of both ends; a quiet peer that
// keeps sending keep-alives is not.
func TestIdleTimeout(t *testing.T) {
	s := runNATS(t, -1)
	lcfg := testConfig(s)
	lcfg.IdleTimeout = 300 * time.Millisecond
	dcfg := testConfig(s) // 120 s: the listener's smaller value wins
	ln := listen(t, NewProvider(), "127.0.0.1:0", lcfg)
	quiet, quietSrv := pair(t, ln, NewProvider(), dcfg)
	mute, muteSrv := pair(t, ln, NewProvider(), dcfg)
	assert.Equal(t, 300*time.Millisecond, quiet.idle)
	mute.mu.Lock()
	mute.timer.Stop() // no more keep-alives from this one
	mute.mu.Unlock()
	ctx := ctxFor(t, 10*time.Second)
	start := time.Now()
	_, err := muteSrv.ReadFrame(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "peer vanished")
	// Silence counts from the last message received, which may precede
	// start by a little.
	assert.Less(t, time.Since(start), 2*time.Second)
	// The mute client hears the goodbye.
	_, err = mute.ReadFrame(ctx)
	assert.ErrorIs(t, err, io.EOF)
	// The quiet pair is still up after several timeouts.
	time.Sleep(time.Second)
	require.NoError(t, quiet.WriteFrame(ctx, []byte("still here")))
	got, err := quietSrv.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "still here", string(got))
}

// TestPeerProcessGone: when the peer's NATS connection disappears without
// a goodbye, our next write comes back as no-responders and ends the
// connection, with no wait for the idle timeout.
func TestPeerProcessGone(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	client, srv := pair(t, ln, NewProvider(), cfg)
	client.hub.nc.Close() // the process is gone: no goodbye
	ctx := ctxFor(t, 5*time.Second)
	read := make(chan error, 1)
	go func() {
		_, err := srv.ReadFrame(ctx)
		read <- err
	}()
	// The NATS server may take a moment to notice the client is gone;
	// the first write after that comes back.
	start := time.Now()
	var err error
	for done := false; !done; {
		select {
		case err = <-read:
			done = true
		case <-time.After(10 * time.Millisecond):
			srv.WriteFrame(ctx, []byte("anyone?"))
		}
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unreachable")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Error(t, srv.WriteFrame(ctx, []byte("again")))
}

// TestReconnectListener: restarting the NATS server ends the connections
// with ErrConnLost; the listener's subscription comes back and new dials
// work.
func TestReconnectListener(t *testing.T) {
	s := runNATS(t, -1)
	port := s.Addr().(*net.TCPAddr).Port
	cfg := testConfig(s)
	lp, dp := NewProvider(), NewProvider()
	ln := listen(t, lp, "127.0.0.1:0", cfg)
	client, srv := pair(t, ln, dp, cfg)
	ctx := ctxFor(t, 20*time.Second)
	reads := make(chan error, 2)
	for _, c := range []*Conn{client, srv} {
		go func() {
			_, err := c.ReadFrame(ctx)
			reads <- err
		}()
	}
	s.Shutdown()
	s.WaitForShutdown()
	for range 2 {
		err := <-reads
		assert.ErrorIs(t, err, ErrConnLost)
		assert.Contains(t, err.Error(), "natstransport: NATS connection lost")
	}
	err := client.WriteFrame(ctx, []byte("x"))
	assert.ErrorIs(t, err, ErrConnLost)
	// The dialer's NATS connection had no other user: it was closed, and
	// a dial now fails to connect at once.
	start := time.Now()
	_, err = dp.DialNATS(ctx, ln.Addr(), cfg, deps(t, 0))
	assert.Error(t, err, "dial while the server is down")
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.True(t, ln.hub.nc.IsReconnecting(), "the listener's connection reconnects")

	runNATS(t, port)
	var c2 *Conn
	require.Eventually(t, func() bool {
		c2, err = dp.DialNATS(ctx, ln.Addr(), cfg, deps(t, 0))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "dial after reconnect: %v", err)
	defer c2.Close()
	s2, err := ln.Accept(ctx)
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, c2.WriteFrame(ctx, []byte("hello again")))
	got, err := s2.ReadFrame(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hello again", string(got))
}

// TestWriteFindsConnLost: a write that finds the NATS connection down
// before the hub's disconnect handler ran fails with ErrConnLost, and so
// does everything after it, the Close that remoting then makes included:
// a write racing with that Close says the link was lost, not a bare
// transport.ErrClosed as if we had closed the connection.
func TestWriteFindsConnLost(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	client, _ := pair(t, ln, NewProvider(), cfg)
	// Hold the disconnect handler back: nats.go has seen the loss (its
	// handler runs after the status changed), the connections not yet.
	h := client.hub
	seen, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
		once.Do(func() { close(seen) })
		<-release
		h.disconnected(err)
	})
	t.Cleanup(func() { close(release) })
	ctx := ctxFor(t, 10*time.Second)
	s.Shutdown()
	s.WaitForShutdown()
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("no disconnect")
	}

	err := client.WriteFrame(ctx, []byte("first"))
	require.ErrorIs(t, err, ErrConnLost)
	// What remoting does after a failed write; its other writers follow.
	require.NoError(t, client.Close())
	err = client.WriteFrame(ctx, []byte("second"))
	assert.ErrorIs(t, err, transport.ErrClosed)
	assert.ErrorIs(t, err, ErrConnLost, "a write after the close")
	_, err = client.ReadFrame(ctx)
	assert.ErrorIs(t, err, transport.ErrClosed)
	assert.ErrorIs(t, err, ErrConnLost, "a read after the close")
}

// TestClosedAfterGoodbye: once the peer's goodbye ended the connection,
// a write racing with our Close (remoting closes after reading io.EOF)
// says the peer closed it, not a bare transport.ErrClosed.
func TestClosedAfterGoodbye(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	client, srv := pair(t, ln, NewProvider(), cfg)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, srv.Close())
	_, err := client.ReadFrame(ctx)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, client.Close())
	err = client.WriteFrame(ctx, []byte("late"))
	assert.ErrorIs(t, err, transport.ErrClosed)
	assert.ErrorIs(t, err, io.ErrClosedPipe)
	assert.Contains(t, err.Error(), "the peer closed the connection")
}

// TestQueueGroup: two instances listening on one address share the
// connections, and each connection stays with the instance that accepted
// it.
func TestQueueGroup(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	a := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	b := listen(t, NewProvider(), a.Addr(), cfg)
	ctx := ctxFor(t, 20*time.Second)
	var wg sync.WaitGroup
	served := map[string]int{}
	var mu sync.Mutex
	for name, ln := range map[string]*Listener{"a": a, "b": b} {
		wg.Go(func() {
			for {
				c, err := ln.Accept(ctx)
				if err != nil {
					return
				}
				wg.Go(func() {
					defer c.Close()
					for {
						f, err := c.ReadFrame(ctx)
						if err != nil {
							return
						}
						mu.Lock()
						served[name]++
						mu.Unlock()
						if c.WriteFrame(ctx, []byte(name+":"), f) != nil {
							return
						}
					}
				})
			}
		})
	}
	dp := NewProvider()
	got := map[string]int{}
	for i := range 40 {
		c, err := dp.DialNATS(ctx, a.Addr(), cfg, deps(t, 0))
		require.NoError(t, err)
		var owner string
		for j := range 5 {
			require.NoError(t, c.WriteFrame(ctx, []byte(strconv.Itoa(i*10+j))))
			f, err := c.ReadFrame(ctx)
			require.NoError(t, err)
			who, body, _ := strings.Cut(string(f), ":")
			assert.Equal(t, strconv.Itoa(i*10+j), body)
			if j == 0 {
				owner = who
			}
			assert.Equal(t, owner, who, "connection %d moved between instances", i)
		}
		got[owner]++
		c.Close()
	}
	a.Close()
	b.Close()
	wg.Wait()
	assert.Positive(t, got["a"], "instance a got no connection: %v", got)
	assert.Positive(t, got["b"], "instance b got no connection: %v", got)
	assert.Equal(t, 5*got["a"], served["a"])
}

// TestSlowReader: a reader that falls more than maxQueued behind has its
// connection closed (NATS has no flow control), and the writer learns it.
func TestSlowReader(t *testing.T) {
	s := runNATS(t, -1)
	cfg := testConfig(s)
	ln := listen(t, NewProvider(), "127.0.0.1:0", cfg)
	client, srv := pair(t, ln, NewProvider(), cfg)
	ctx := ctxFor(t, 30*time.Second)
	chunk := make([]byte, 512<<10)
	limit := maxQueued(transport.DefaultMaxFrameSize)
	var err error
	for sent := 0; sent < 2*limit && err == nil; sent += len(chunk) {
		err = client.WriteFrame(ctx, chunk)
		if sent > limit+(8<<20) {
			time.Sleep(time.Millisecond) // let the goodbye arrive
		}
	}
	require.Error(t, err, "writes never failed")
	assert.Contains(t, err.Error(), "peer closed the connection")
	// The reader gets what was queued, then the reason.
	for {
		_, err = srv.ReadFrame(ctx)
		if err != nil {
			break
		}
	}
	assert.Contains(t, err.Error(), "reader too slow")
}
