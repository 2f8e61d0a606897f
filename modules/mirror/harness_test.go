package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// cluster is a name server and a broker in this process (server.Dev, as
// `mq dev` composes them) on loopback ports, restartable on its data.
type cluster struct {
	t       testing.TB
	name    string
	dir     string
	Namesrv string
	Broker  string
	QUIC    string // quic://<Namesrv> when the cluster serves QUIC too
	quic    bool
	app     *fx.App
}

func startCluster(t testing.TB, name string, withQUIC bool) *cluster {
	t.Helper()
	c := &cluster{t: t, name: name, dir: t.TempDir(), quic: withQUIC,
		Namesrv: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)), Broker: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))}
	if withQUIC {
		c.QUIC = "quic://" + c.Namesrv
	}
	// FreePort's ports are free when it returns, not when the cluster
	// binds them: another listener or an outgoing connection's ephemeral
	// port may take one in between. The first start takes new ports then.
	for try := 1; ; try++ {
		err := c.start()
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || try == 5 {
			require.NoError(t, err)
			break
		}
		t.Logf("cluster %s: %v; again on other ports", name, err)
		c.Namesrv, c.Broker = fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
		if withQUIC {
			c.QUIC = "quic://" + c.Namesrv
		}
	}
	t.Cleanup(c.Stop)
	return c
}

// Start starts the cluster (again) on its data and ports.
func (c *cluster) Start() {
	c.t.Helper()
	require.NoError(c.t, c.start())
}

func (c *cluster) start() error {
	sets := []string{
		"namesrv.listen=" + c.Namesrv, "broker.listen=" + c.Broker, "broker.cluster=" + c.name, "broker.name=" + c.name + "-a",
		"storage.dir=" + filepath.Join(c.dir, "store"), "storage.commitlog.segment_size=4MiB",
		"metrics.listen=", "grpc.enabled=false", "log.level=error",
	}
	if c.quic {
		sets = append(sets, "transports=[tcp, quic]", "transport.quic.insecure_skip_verify=true")
	}
	cfg, err := server.Load(config.Options{Sets: sets}, server.Dev)
	if err != nil {
		return err
	}
	ps := kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()}, Storage: []store.Provider{commitlog.NewProvider()},
		Filter: []filter.Provider{tag.NewProvider(), sql92.NewProvider()}}
	if c.quic {
		ps.Transport = append(ps.Transport, quictransport.NewProvider())
	}
	plan, err := kernel.NewPlan(cfg, server.Spec(server.Dev, ps))
	if err != nil {
		return err
	}
	app := fx.New(plan.Options(), fx.NopLogger)
	if err := app.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return err
	}
	c.app = app
	c.waitReady()
	return nil
}

// Stop stops the cluster (a clean stop: its data stays).
func (c *cluster) Stop() {
	if c.app == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.app.Stop(ctx)
	c.app = nil
}

func (c *cluster) waitReady() {
	c.t.Helper()
	cl := newClient(c.t, c.Namesrv)
	defer cl.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.FetchRoute(ctx, "TBW102")
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("cluster %s not ready", c.name)
}

func newClient(t testing.TB, ns ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.WithNameServers(ns...), transports.WithDialer(transports.WithInsecureQUIC()),
		client.WithRequestTimeout(5*time.Second))
	require.NoError(t, err)
	return cl
}

// createTopic creates topic with queues queues in the cluster.
func (c *cluster) createTopic(topic string, queues int) {
	c.t.Helper()
	cl := newClient(c.t, c.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, admin.New(cl).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	for i := 0; i < 100; i++ {
		if r, err := cl.FetchRoute(ctx, topic); err == nil && len(r.Publish) == queues {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("topic %s not routed", topic)
}

// producer is a started producer on the cluster.
func (c *cluster) producer(group string) (*client.Client, *producer.Producer) {
	c.t.Helper()
	cl := newClient(c.t, c.Namesrv)
	p, err := producer.New(cl, group, producer.WithSendTimeout(3*time.Second), producer.WithRetryTimesWhenSendFailed(0))
	require.NoError(c.t, err)
	c.t.Cleanup(func() {
		_ = p.Shutdown(context.Background())
		cl.Close()
	})
	return cl, p
}

// readAll reads every message of topic in the cluster, per queue in
// order. Each request has its own timeout: a topic of 65,000 messages is
// hundreds of pulls, more than one 30 s budget holds on a loaded host.
func (c *cluster) readAll(topic string) []*client.MessageExt {
	c.t.Helper()
	cl := newClient(c.t, c.Namesrv)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	r, err := cl.FetchRoute(ctx, topic)
	cancel()
	if err != nil {
		return nil
	}
	pc, err := consumer.NewPull(cl, "reader")
	require.NoError(c.t, err)
	var out []*client.MessageExt
	qs := append([]client.MessageQueue(nil), r.Subscribe...)
	sort.Slice(qs, func(i, j int) bool { return qs[i].QueueID < qs[j].QueueID })
	for _, mq := range qs {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		maxOff, err := pc.MaxOffset(ctx, mq)
		cancel()
		require.NoError(c.t, err)
		for off := int64(0); off < maxOff; {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			res, err := pc.Pull(ctx, mq, consumer.All(), off, 256)
			cancel()
			require.NoError(c.t, err)
			if res.Status != consumer.Found {
				break
			}
			out = append(out, res.Messages...)
			off = res.NextBeginOffset
		}
	}
	return out
}

// requestTimeout bounds one request of the harness's reads.
const requestTimeout = 30 * time.Second

// ids returns the UNIQ_KEYs of msgs with how often each appears.
func ids(msgs []*client.MessageExt) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[m.MsgID]++
	}
	return out
}

// lostAndDup compares sent ids with the target's messages.
func lostAndDup(sent []string, got []*client.MessageExt) (lost, dup []string) {
	seen := ids(got)
	for _, id := range sent {
		if seen[id] == 0 {
			lost = append(lost, id)
		}
	}
	for id, n := range seen {
		if n > 1 {
			dup = append(dup, id)
		}
	}
	sort.Strings(dup)
	return lost, dup
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

// send sends n messages to topic and returns their ids.
func send(t testing.TB, p *producer.Producer, topic string, n int, prefix string) []string {
	t.Helper()
	out := make([]string, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		m := client.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i)))
		m.SetKeys(fmt.Sprintf("k-%s-%d", prefix, i))
		r, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		out = append(out, r.MsgID)
	}
	return out
}
