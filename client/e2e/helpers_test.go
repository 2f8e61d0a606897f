// Package e2e runs Quiver's client against a real `mq dev`.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// testserver's process waiter ends when the process does, which
		// may be just after the last cleanup.
		goleak.IgnoreTopFunction("os/exec.(*Cmd).Wait"),
		goleak.IgnoreTopFunction("syscall.Syscall6"),
		goleak.IgnoreTopFunction("os.(*Process).blockUntilWaitable"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), seq.Add(1)) }

// env is one mq dev and how to reach it.
type env struct {
	srv *testserver.Proc
	ns  string // name-server address with scheme
}

type scheme string

const (
	tcpScheme  scheme = "tcp"
	quicScheme scheme = "quic"
)

var (
	pluginsOnce sync.Once
	pluginsOut  string
)

// mqPlugins returns `mq plugins` output.
func mqPlugins(t *testing.T) string {
	pluginsOnce.Do(func() {
		out, err := exec.Command(testserver.Binary(t), "plugins").CombinedOutput()
		if err != nil {
			pluginsOut = "error: " + err.Error()
			return
		}
		pluginsOut = string(out)
	})
	return pluginsOut
}

func hasPlugin(t *testing.T, kind, id string) bool {
	for _, line := range strings.Split(mqPlugins(t), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != kind {
			continue
		}
		for _, p := range strings.Split(v, ",") {
			if strings.TrimSpace(p) == id {
				return true
			}
		}
	}
	return false
}

func startEnv(t *testing.T, s scheme, sets ...string) *env {
	t.Helper()
	if s == quicScheme {
		if !hasPlugin(t, "transport", "quic") {
			t.Skipf("the quic transport is not composed into mq yet (mq plugins: %q)", mqPlugins(t))
		}
		sets = append(sets, "transports=tcp,quic")
	}
	srv := testserver.StartDev(t, testserver.Options{Sets: sets})
	ns := srv.Namesrv
	if s == quicScheme {
		ns = "quic://" + ns
	}
	return &env{srv: srv, ns: ns}
}

// testLog sends client logs to t.Log when CLIENT_E2E_LOG is set.
func testLog(t *testing.T) *slog.Logger {
	if os.Getenv("CLIENT_E2E_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(strings.TrimRight(string(b), "\n"))
		}
		return len(b), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (e *env) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	base := []client.Option{
		client.WithNameServers(e.ns),
		transports.WithDialer(transports.WithInsecureQUIC()),
		client.WithLogger(testLog(t)),
	}
	c, err := client.New(append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *env) producer(t *testing.T, opts ...producer.Option) *producer.Producer {
	t.Helper()
	p, err := producer.New(e.client(t), uniq("PG"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

func (e *env) admin(t *testing.T) *admin.Admin { return admin.New(e.client(t)) }

// createTopic makes a topic with n queues and waits for its route.
func (e *env) createTopic(t *testing.T, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := e.admin(t)
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: n, WriteQueueNums: n}))
	waitFor(t, 10*time.Second, func() bool {
		r, err := a.Route(ctx, topic)
		return err == nil && len(r.Publish) == n
	}, "route of %s", topic)
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for "+what, append([]any{d}, args...)...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sendSync(t *testing.T, p *producer.Producer, msgs ...*client.Message) *client.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, msgs...)
	require.NoError(t, err)
	require.Equal(t, client.SendOK, res.Status)
	return res
}

// collector records consumed messages.
type collector struct {
	mu    sync.Mutex
	msgs  map[string]*client.MessageExt
	order []string
	calls int
}

func newCollector() *collector { return &collector{msgs: map[string]*client.MessageExt{}} }

func (c *collector) handle(_ context.Context, msgs []*client.MessageExt) consumer.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	for _, m := range msgs {
		c.msgs[string(m.Body)] = m
		c.order = append(c.order, string(m.Body))
	}
	return consumer.ConsumeSuccess
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) get(body string) *client.MessageExt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs[body]
}

func (c *collector) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.msgs))
	for b := range c.msgs {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

func (c *collector) wait(t *testing.T, n int, d time.Duration) {
	t.Helper()
	waitFor(t, d, func() bool { return c.count() >= n }, "%d messages (have %d)", n, c.count())
}

type pushOpts struct {
	group string
	sel   consumer.Selector
	opts  []consumer.Option
	copts []client.Option
}

func (e *env) push(t *testing.T, topic string, o pushOpts, h consumer.Handler) *consumer.PushConsumer {
	t.Helper()
	if o.sel.Expression == "" {
		o.sel = consumer.All()
	}
	opts := append([]consumer.Option{consumer.WithConsumeFrom(consumer.FromFirstOffset)}, o.opts...)
	pc, err := consumer.NewPush(e.client(t, o.copts...), o.group, h, opts...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, o.sel))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, pc.Start(ctx))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	return pc
}

func msg(topic, body string) *client.Message { return client.NewMessage(topic, []byte(body)) }
