package interop

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	os.Exit(m.Run())
}

var instanceSeq struct {
	sync.Mutex
	n int
}

// uniq returns a name unique in this test process.
func uniq(prefix string) string {
	instanceSeq.Lock()
	defer instanceSeq.Unlock()
	instanceSeq.n++
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), instanceSeq.n)
}

func newProducer(t *testing.T, ns string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	base := []producer.Option{
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName(uniq("PG")),
		producer.WithInstanceName(uniq("pi")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// collector records received messages by body.
type collector struct {
	mu   sync.Mutex
	msgs map[string]*primitive.MessageExt
	seen int
	ch   chan struct{}
}

func newCollector() *collector {
	return &collector{msgs: map[string]*primitive.MessageExt{}, ch: make(chan struct{}, 1)}
}

func (c *collector) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	c.mu.Lock()
	for _, m := range msgs {
		c.msgs[string(m.Body)] = m
		c.seen++
	}
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
	return consumer.ConsumeSuccess, nil
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
	for k := range c.msgs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hasAll reports whether every body in want has arrived.
func (c *collector) hasAll(want map[string]bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for b := range want {
		if c.msgs[b] == nil {
			return false
		}
	}
	return true
}

func (c *collector) get(body string) *primitive.MessageExt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs[body]
}

// waitFor polls until c holds n distinct messages or the timeout passes.
func (c *collector) waitFor(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for c.count() < n {
		select {
		case <-c.ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("received %d of %d messages within %s", c.count(), n, timeout)
		}
	}
}

type consumerOpts struct {
	group    string
	instance string
	selector consumer.MessageSelector
	extra    []consumer.Option
	// skipRouteWait: the caller made sure the topic's route exists (servers
	// a plain raw client cannot query, e.g. TLS).
	skipRouteWait bool
}

func newPushConsumer(t *testing.T, ns, topic string, o consumerOpts, h func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) rocketmq.PushConsumer {
	t.Helper()
	if o.instance == "" {
		o.instance = uniq("ci")
	}
	if o.selector.Expression == "" {
		o.selector = consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	}
	base := []consumer.Option{
		consumer.WithNameServer([]string{ns}),
		consumer.WithGroupName(o.group),
		consumer.WithInstance(o.instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	// A topic created by a send reaches the name server with the broker's
	// next registration, a moment later; the official consumer refuses to
	// start on a topic without a route.
	if !o.skipRouteWait {
		awaitRoute(t, ns, topic)
	}
	c, err := rocketmq.NewPushConsumer(append(base, o.extra...)...)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, o.selector, h))
	require.NoError(t, c.Start())
	stopped := false
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			c.Shutdown()
		}
	})
	return &stoppable{PushConsumer: c, stop: func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			stopped = true
			c.Shutdown()
		}
	}}
}

type stoppable struct {
	rocketmq.PushConsumer
	stop func()
}

func (s *stoppable) Shutdown() error { s.stop(); return nil }

func sendSync(t *testing.T, p rocketmq.Producer, msgs ...*primitive.Message) *primitive.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, msgs...)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status, "send result %v", res)
	return res
}

func newMsg(topic, body string) *primitive.Message { return primitive.NewMessage(topic, []byte(body)) }
