package natstransport_test

// End to end: `mq dev` with `transports: [nats]` (name server and broker
// reachable only through an embedded NATS server), driven by Quiver's own
// client library dialling through this transport.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
)

// natsDev is an `mq dev` reachable only over NATS.
type natsDev struct {
	ns, broker string // host:port, as listened on (no TCP socket behind them)
	dial       client.DialFunc
}

// freeAddr is a loopback address nothing listens on over TCP.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func startNATSDev(t *testing.T, natsURL string, sets ...string) *natsDev {
	t.Helper()
	bin := testserver.Binary(t)
	d := &natsDev{ns: freeAddr(t), broker: freeAddr(t)}
	dir := t.TempDir()
	args := []string{"dev",
		"--set", "transports=nats",
		"--set", "transport.nats.url=" + natsURL,
		"--set", "transport.nats.reconnect_wait=50ms",
		"--set", "namesrv.listen=" + d.ns,
		"--set", "broker.listen=" + d.broker,
		// The broker reaches its name server over NATS too.
		"--set", "broker.namesrv=nats://" + d.ns,
		"--set", "broker.register_interval=1s",
		"--set", "storage.dir=" + filepath.Join(dir, "store"),
		"--set", "log.level=debug",
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	logs := &testserver.Output{}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mq dev did not stop on SIGTERM within 20s")
		}
		if t.Failed() {
			t.Logf("mq dev log tail:\n%s", logs.Tail(80))
		}
	})

	p := natstransport.NewProvider()
	cfg := natstransport.NewConfig()
	cfg.URL = natsURL
	set := transport.NewSet([]transport.Provider{p}, map[string]any{"nats": cfg}, transport.Deps{Logger: logger(t)})
	d.dial = func(ctx context.Context, addr string) (transport.Conn, error) { return set.Dial(ctx, addr) }

	// Ready when the name server, asked over NATS, routes TBW102 to the
	// broker.
	rc := remoting.NewClient(remoting.DialFunc(d.dial), nil, nil, remoting.PeerOptions{})
	defer rc.Close()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for {
		select {
		case <-exited:
			t.Fatalf("mq dev exited:\n%s", logs.Tail(80))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := rc.Invoke(ctx, "nats://"+d.ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil))
		cancel()
		switch {
		case err != nil:
			last = err
		case resp.Code != remoting.Success:
			last = fmt.Errorf("route TBW102: code %d %s", resp.Code, resp.Remark)
		case !bytes.Contains(resp.Body, []byte(d.broker)):
			last = fmt.Errorf("route lacks the broker: %s", resp.Body)
		default:
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("mq dev not ready over NATS: %v\n%s", last, logs.Tail(80))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *natsDev) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.WithNameServers("nats://"+d.ns), client.WithDialer(d.dial))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (d *natsDev) createTopic(t *testing.T, topic string, n int) {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	a := admin.New(d.client(t))
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: n, WriteQueueNums: n}))
	require.Eventually(t, func() bool {
		r, err := a.Route(ctx, topic)
		return err == nil && len(r.Publish) == n
	}, 20*time.Second, 50*time.Millisecond, "route of %s", topic)
}

func (d *natsDev) producer(t *testing.T) *producer.Producer {
	t.Helper()
	p, err := producer.New(d.client(t), uniq("PG"))
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

func (d *natsDev) push(t *testing.T, topic, group string, h consumer.Handler, opts ...consumer.Option) *consumer.PushConsumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithConsumeFrom(consumer.FromFirstOffset)}, opts...)
	pc, err := consumer.NewPush(d.client(t), group, h, opts...)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.All()))
	require.NoError(t, pc.Start(ctxFor(t, 20*time.Second)))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	return pc
}

var uniqSeq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), uniqSeq.Add(1))
}

type collector struct {
	mu   sync.Mutex
	msgs map[string]*client.MessageExt
}

func newCollector() *collector { return &collector{msgs: map[string]*client.MessageExt{}} }

func (c *collector) handle(_ context.Context, msgs []*client.MessageExt) consumer.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.msgs[string(m.Body)] = m
	}
	return consumer.ConsumeSuccess
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
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

func sendSync(t *testing.T, p *producer.Producer, m *client.Message) {
	t.Helper()
	res, err := p.SendSync(ctxFor(t, 10*time.Second), m)
	require.NoError(t, err)
	require.Equal(t, client.SendOK, res.Status)
}

type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) producer.LocalTransactionState {
	switch {
	case strings.HasPrefix(string(m.Body), "commit"):
		return producer.Commit
	case strings.HasPrefix(string(m.Body), "rollback"):
		return producer.Rollback
	}
	return producer.Unknown
}

func (l *txListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) producer.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	if strings.HasPrefix(string(m.Body), "unknown-commit") {
		return producer.Commit
	}
	return producer.Rollback
}

func (l *txListener) count(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

// TestE2E runs the client's main paths against a broker reachable only
// through NATS.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mq dev")
	}
	ns := startNATS(t, -1)
	dev := startNATSDev(t, "nats://"+ns.Addr().String(), "transaction.timeout=500ms", "transaction.check_interval=500ms")

	t.Run("NoTCP", func(t *testing.T) {
		for _, a := range []string{dev.ns, dev.broker} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
			}
			assert.Error(t, err, "%s answers over TCP", a)
		}
	})

	t.Run("ProduceConsumeClustering", func(t *testing.T) {
		topic, group := uniq("Split"), uniq("CG")
		dev.createTopic(t, topic, 4)
		c1, c2 := newCollector(), newCollector()
		dev.push(t, topic, group, c1.handle)
		dev.push(t, topic, group, c2.handle)
		p := dev.producer(t)
		big := strings.Repeat("x", 2<<20) // above NATS's max_payload: split frames
		for i := range 40 {
			body := fmt.Sprintf("m-%d", i)
			if i == 7 {
				body += big
			}
			sendSync(t, p, client.NewMessage(topic, []byte(body)))
		}
		require.Eventually(t, func() bool { return c1.count()+c2.count() >= 40 }, 60*time.Second, 50*time.Millisecond, "40 messages (have %d+%d)", c1.count(), c2.count())
		for _, b := range c1.bodies() {
			assert.NotContains(t, c2.bodies(), b, "consumed by both")
		}
		all := append(c1.bodies(), c2.bodies()...)
		assert.Len(t, all, 40)
		assert.Contains(t, all, "m-7"+big)
		assert.NotZero(t, c1.count(), "clustering: both members get queues")
		assert.NotZero(t, c2.count(), "clustering: both members get queues")
	})

	t.Run("Broadcasting", func(t *testing.T) {
		topic, group := uniq("Bcast"), uniq("CG")
		dev.createTopic(t, topic, 4)
		c1, c2 := newCollector(), newCollector()
		dev.push(t, topic, group, c1.handle, consumer.WithModel(consumer.Broadcasting), consumer.WithOffsetDir(t.TempDir()))
		dev.push(t, topic, group, c2.handle, consumer.WithModel(consumer.Broadcasting), consumer.WithOffsetDir(t.TempDir()))
		p := dev.producer(t)
		for i := range 20 {
			sendSync(t, p, client.NewMessage(topic, []byte(fmt.Sprintf("b-%d", i))))
		}
		require.Eventually(t, func() bool { return c1.count() >= 20 && c2.count() >= 20 }, 60*time.Second, 50*time.Millisecond)
		assert.Equal(t, c1.bodies(), c2.bodies())
	})

	// Request-reply: the broker pushes the reply (PUSH_REPLY_MESSAGE_TO_CLIENT)
	// to the requester's own connection, here a NATS one.
	t.Run("RequestReply", func(t *testing.T) {
		topic := uniq("RPC")
		dev.createTopic(t, topic, 2)
		replier := dev.producer(t)
		replied := make(chan error, 4)
		dev.push(t, topic, uniq("RPCG"), func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
			for _, m := range msgs {
				r, err := client.NewReply(m, []byte("reply:"+string(m.Body)))
				if err == nil {
					_, err = replier.SendSync(ctx, r)
				}
				replied <- err
			}
			return consumer.ConsumeSuccess
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := client.NewMessage(topic, []byte("ping"))
		reply, err := dev.producer(t).Request(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, "reply:ping", string(reply.Body))
		assert.Equal(t, req.Property(client.PropertyCorrelationID), reply.Property(client.PropertyCorrelationID))
		require.NoError(t, <-replied)
	})

	t.Run("Orderly", func(t *testing.T) {
		topic := uniq("Order")
		dev.createTopic(t, topic, 4)
		var mu sync.Mutex
		order := map[string][]int{}
		h := func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				k, n, _ := strings.Cut(string(m.Body), ":")
				i, _ := strconv.Atoi(n)
				order[k] = append(order[k], i)
			}
			return consumer.ConsumeSuccess
		}
		dev.push(t, topic, uniq("CG"), h, consumer.WithOrderly())
		p := dev.producer(t)
		keys := []string{"alpha", "beta", "gamma"}
		for i := range 20 {
			for _, k := range keys {
				sendSync(t, p, client.NewMessage(topic, []byte(fmt.Sprintf("%s:%d", k, i))).SetShardingKey(k))
			}
		}
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if len(order[k]) < 20 {
					return false
				}
			}
			return true
		}, 60*time.Second, 50*time.Millisecond, "60 ordered messages")
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			want := make([]int, 20)
			for i := range want {
				want[i] = i
			}
			assert.Equal(t, want, order[k][:20], k)
		}
	})

	// Last: it restarts the NATS server under the broker and the clients.
	defer t.Run("NATSRestartUnderProducers", func(t *testing.T) {
		topic := uniq("Restart")
		dev.createTopic(t, topic, 4)
		p := dev.producer(t)
		type sent struct {
			body       string
			start, end time.Time
			err        error
		}
		var (
			mu    sync.Mutex
			sends []sent
			stop  atomic.Bool
			wg    sync.WaitGroup
		)
		for w := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					body := fmt.Sprintf("r-%d-%d", w, i)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					start := time.Now()
					res, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body)))
					cancel()
					if err == nil && res.Status != client.SendOK {
						err = fmt.Errorf("status %v", res.Status)
					}
					mu.Lock()
					sends = append(sends, sent{body, start, time.Now(), err})
					mu.Unlock()
					if err != nil {
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
		okSince := func(t0 time.Time) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, s := range sends {
				if s.err == nil && s.start.After(t0) {
					n++
				}
			}
			return n
		}
		require.Eventually(t, func() bool { return okSince(time.Time{}) >= 50 }, 20*time.Second, 20*time.Millisecond)
		port := ns.Addr().(*net.TCPAddr).Port
		down := time.Now()
		ns.Shutdown()
		ns.WaitForShutdown()
		time.Sleep(300 * time.Millisecond)
		up := time.Now()
		startNATS(t, port)
		require.Eventually(t, func() bool { return okSince(up) >= 100 }, 60*time.Second, 50*time.Millisecond, "sends after the NATS restart")
		stop.Store(true)
		wg.Wait()

		acked := map[string]bool{}
		kinds := map[string]int{} // failure messages, for the log
		var failed, inFlight int
		var firstOK time.Time
		for _, s := range sends {
			if s.err == nil {
				acked[s.body] = true
				if s.start.After(up) && (firstOK.IsZero() || s.end.Before(firstOK)) {
					firstOK = s.end
				}
				continue
			}
			failed++
			kinds[s.err.Error()]++
			if s.start.Before(down) {
				inFlight++
			}
			assert.True(t, s.start.Before(up.Add(10*time.Second)), "send %s failed %v after the restart: %v", s.body, s.start.Sub(up), s.err)
		}
		t.Logf("%d sends acknowledged, %d failed (%d in flight at the shutdown); first success %v after the restart",
			len(acked), failed, inFlight, firstOK.Sub(up).Round(time.Millisecond))
		for k, n := range kinds {
			t.Logf("%4d × %s", n, k)
		}
		// The name server dropped the broker when its connection went with
		// the NATS server; the broker registers again within
		// register_interval (1s here).
		a := admin.New(dev.client(t))
		require.Eventually(t, func() bool {
			_, err := a.Route(ctxFor(t, 5*time.Second), topic)
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "route of %s after the restart", topic)
		// Everything acknowledged is there.
		col := newCollector()
		dev.push(t, topic, uniq("CG"), col.handle)
		require.Eventually(t, func() bool { return col.count() >= len(acked) }, 60*time.Second, 50*time.Millisecond, "consume %d acknowledged (have %d)", len(acked), col.count())
		got := map[string]bool{}
		for _, b := range col.bodies() {
			got[b] = true
		}
		for b := range acked {
			assert.True(t, got[b], "acknowledged %s lost", b)
		}
	})

	t.Run("TransactionCheckBack", func(t *testing.T) {
		topic := uniq("Tx")
		dev.createTopic(t, topic, 2)
		col := newCollector()
		dev.push(t, topic, uniq("CG"), col.handle)
		l := &txListener{checked: map[string]int{}}
		tp, err := producer.NewTransactional(dev.client(t), uniq("TPG"), l)
		require.NoError(t, err)
		defer tp.Shutdown(context.Background())
		ctx := ctxFor(t, 20*time.Second)
		for _, b := range []string{"commit-1", "rollback-1", "unknown-commit-1", "unknown-rollback-1"} {
			res, err := tp.SendMessageInTransaction(ctx, client.NewMessage(topic, []byte(b)))
			require.NoError(t, err)
			assert.Equal(t, client.SendOK, res.Status)
		}
		// The broker's check-backs reach the producer over NATS, on the
		// producer's own subject.
		require.Eventually(t, func() bool { return col.count() >= 2 && l.count("unknown-rollback-1") > 0 }, 60*time.Second, 50*time.Millisecond,
			"2 messages and a check of the undecided rollback (have %v)", col.bodies())
		time.Sleep(time.Second)
		assert.Equal(t, []string{"commit-1", "unknown-commit-1"}, col.bodies())
		assert.Zero(t, l.count("commit-1"), "a committed message was checked")
		assert.Positive(t, l.count("unknown-commit-1"))
	})
}
