// Package official checks that Quiver's client and the official RocketMQ
// Go client (github.com/apache/rocketmq-client-go/v2) interoperate on one
// mq dev: one produces, the other consumes, and they share group offsets
// and queue allocation. (No goleak here: the official client leaves
// goroutines behind after Shutdown.)
package official

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	os.Exit(m.Run())
}

var seq atomic.Int64

func uniq(p string) string { return fmt.Sprintf("%s_%d_%d", p, os.Getpid(), seq.Add(1)) }

func qclient(t *testing.T, ns string) *client.Client {
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func createTopic(t *testing.T, ns, topic string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := admin.New(qclient(t, ns))
	require.NoError(t, a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: n, WriteQueueNums: n}))
	waitFor(t, 10*time.Second, func() bool {
		r, err := a.Route(ctx, topic)
		return err == nil && len(r.Publish) == n
	}, "route")
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+what, args...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type bodies struct {
	mu sync.Mutex
	m  map[string]map[string]string // body → properties (+ "_tag", "_msgid")
}

func newBodies() *bodies { return &bodies{m: map[string]map[string]string{}} }

func (b *bodies) add(body string, props map[string]string) {
	b.mu.Lock()
	b.m[body] = props
	b.mu.Unlock()
}

func (b *bodies) count() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.m) }

func (b *bodies) keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.m))
	for k := range b.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (b *bodies) get(k string) map[string]string { b.mu.Lock(); defer b.mu.Unlock(); return b.m[k] }

func officialProducer(t *testing.T, ns string) rocketmq.Producer {
	p, err := rocketmq.NewProducer(rproducer.WithNameServer([]string{ns}), rproducer.WithGroupName(uniq("OPG")),
		rproducer.WithInstanceName(uniq("opi")), rproducer.WithRetry(2), rproducer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	return p
}

func officialConsumer(t *testing.T, ns, topic, group string, got *bodies) func() {
	c, err := rocketmq.NewPushConsumer(rconsumer.WithNameServer([]string{ns}), rconsumer.WithGroupName(group),
		rconsumer.WithInstance(uniq("oci")), rconsumer.WithConsumerModel(rconsumer.Clustering),
		rconsumer.WithConsumeFromWhere(rconsumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, rconsumer.MessageSelector{Type: rconsumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (rconsumer.ConsumeResult, error) {
			for _, m := range msgs {
				props := map[string]string{}
				for k, v := range m.GetProperties() {
					props[k] = v
				}
				props["_tag"] = m.GetTags()
				props["_msgid"] = m.MsgId
				got.add(string(m.Body), props)
			}
			return rconsumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	var once sync.Once
	stop := func() { once.Do(func() { c.Shutdown() }) }
	t.Cleanup(stop)
	return stop
}

func quiverConsumer(t *testing.T, ns, topic, group string, got *bodies) *consumer.PushConsumer {
	pc, err := consumer.NewPush(qclient(t, ns), group, func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
		for _, m := range msgs {
			props := map[string]string{}
			for k, v := range m.Properties {
				props[k] = v
			}
			props["_tag"] = m.Tag()
			props["_msgid"] = m.MsgID
			got.add(string(m.Body), props)
		}
		return consumer.ConsumeSuccess
	}, consumer.WithConsumeFrom(consumer.FromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.All()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, pc.Start(ctx))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	return pc
}

// TestOfficialProducesQuiverConsumes: sync, batch and compressed sends of
// the official producer reach a Quiver consumer with tags, keys,
// properties and message ids intact.
func TestOfficialProducesQuiverConsumes(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("O2Q")
	createTopic(t, srv.Namesrv, topic, 4)
	p := officialProducer(t, srv.Namesrv)
	ids := map[string]string{}
	for i := 0; i < 10; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("o-%d", i)))
		m.WithTag("TagO")
		m.WithKeys([]string{"k1", fmt.Sprint("k", i)})
		m.WithProperty("color", "green")
		res, err := p.SendSync(context.Background(), m)
		require.NoError(t, err)
		ids[string(m.Body)] = res.MsgID
	}
	var batch []*primitive.Message
	for i := 0; i < 5; i++ {
		batch = append(batch, primitive.NewMessage(topic, []byte(fmt.Sprintf("ob-%d", i))))
	}
	_, err := p.SendSync(context.Background(), batch...)
	require.NoError(t, err)
	big := bytes.Repeat([]byte("q"), 9000)
	_, err = p.SendSync(context.Background(), primitive.NewMessage(topic, big))
	require.NoError(t, err)

	got := newBodies()
	quiverConsumer(t, srv.Namesrv, topic, uniq("QCG"), got)
	waitFor(t, 30*time.Second, func() bool { return got.count() >= 16 }, "16 messages, have %d", got.count())
	for body, id := range ids {
		props := got.get(body)
		require.NotNil(t, props, body)
		assert.Equal(t, "TagO", props["_tag"])
		assert.Equal(t, "green", props["color"])
		assert.Equal(t, id, props["_msgid"])
		assert.Contains(t, props["KEYS"], "k1")
	}
	assert.NotNil(t, got.get(string(big)), "compressed body inflated")
}

// TestQuiverProducesOfficialConsumes: sync, async, oneway, batch and
// compressed sends of Quiver's producer reach the official consumer.
func TestQuiverProducesOfficialConsumes(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Q2O")
	createTopic(t, srv.Namesrv, topic, 4)
	p, err := producer.New(qclient(t, srv.Namesrv), uniq("QPG"))
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	ctx := context.Background()
	ids := map[string]string{}
	for i := 0; i < 10; i++ {
		m := client.NewMessage(topic, []byte(fmt.Sprintf("q-%d", i))).SetTag("TagQ").SetKeys("k1", fmt.Sprint("k", i)).SetProperty("color", "red")
		res, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		ids[string(m.Body)] = res.MsgID
	}
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		require.NoError(t, p.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) { assert.NoError(t, err); wg.Done() },
			client.NewMessage(topic, []byte(fmt.Sprintf("qa-%d", i)))))
		require.NoError(t, p.SendOneway(ctx, client.NewMessage(topic, []byte(fmt.Sprintf("qo-%d", i)))))
	}
	wg.Wait()
	var batch []*client.Message
	for i := 0; i < 5; i++ {
		batch = append(batch, client.NewMessage(topic, []byte(fmt.Sprintf("qb-%d", i))))
	}
	_, err = p.SendSync(ctx, batch...)
	require.NoError(t, err)
	big := bytes.Repeat([]byte("w"), 9000)
	_, err = p.SendSync(ctx, client.NewMessage(topic, big))
	require.NoError(t, err)

	got := newBodies()
	officialConsumer(t, srv.Namesrv, topic, uniq("OCG"), got)
	waitFor(t, 40*time.Second, func() bool { return got.count() >= 26 }, "26 messages, have %d: %v", got.count(), got.keys())
	for body, id := range ids {
		props := got.get(body)
		require.NotNil(t, props, body)
		assert.Equal(t, "TagQ", props["_tag"])
		assert.Equal(t, "red", props["color"])
		assert.Equal(t, id, props["_msgid"])
	}
	assert.NotNil(t, got.get(string(big)), "compressed body inflated by the official consumer")
}

// TestSharedOffsets: an official consumer of group G stops, a Quiver
// consumer of G continues where it left off, then stops, and an official
// consumer continues after it.
func TestSharedOffsets(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic, group := uniq("Shared"), uniq("SG")
	createTopic(t, srv.Namesrv, topic, 4)
	p, err := producer.New(qclient(t, srv.Namesrv), uniq("QPG"))
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	send := func(prefix string) {
		for i := 0; i < 12; i++ {
			_, err := p.SendSync(context.Background(), client.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i))))
			require.NoError(t, err)
		}
	}
	onlyPrefix := func(b *bodies, prefix string) {
		t.Helper()
		for _, k := range b.keys() {
			assert.True(t, strings.HasPrefix(k, prefix+"-"), "redelivered %s", k)
		}
	}

	send("one")
	o1 := newBodies()
	stop := officialConsumer(t, srv.Namesrv, topic, group, o1)
	waitFor(t, 40*time.Second, func() bool { return o1.count() >= 12 }, "official consumer: 12 messages")
	time.Sleep(500 * time.Millisecond)
	stop() // persists offsets

	send("two")
	q := newBodies()
	qc := quiverConsumer(t, srv.Namesrv, topic, group, q)
	waitFor(t, 40*time.Second, func() bool { return q.count() >= 12 }, "quiver consumer: 12 messages")
	time.Sleep(500 * time.Millisecond)
	onlyPrefix(q, "two")
	require.NoError(t, qc.Shutdown(context.Background()))

	send("three")
	o2 := newBodies()
	officialConsumer(t, srv.Namesrv, topic, group, o2)
	waitFor(t, 40*time.Second, func() bool { return o2.count() >= 12 }, "second official consumer: 12 messages")
	time.Sleep(500 * time.Millisecond)
	onlyPrefix(o2, "three")
}

// TestMixedGroup runs an official and a Quiver consumer in one group:
// they split the queues and together get every message once.
func TestMixedGroup(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic, group := uniq("Mixed"), uniq("MG")
	createTopic(t, srv.Namesrv, topic, 4)
	o, q := newBodies(), newBodies()
	// The official consumer is stopped first, explicitly: rebalancing on a
	// NOTIFY_CONSUMER_IDS_CHANGED during its own Shutdown is a data race
	// inside rocketmq-client-go (rmqClient.Shutdown vs InvokeSync).
	stopOfficial := officialConsumer(t, srv.Namesrv, topic, group, o)
	qc := quiverConsumer(t, srv.Namesrv, topic, group, q)
	waitFor(t, 40*time.Second, func() bool {
		n := 0
		for _, mq := range qc.Queues() {
			if mq.Topic == topic {
				n++
			}
		}
		return n == 2
	}, "quiver consumer holding 2 of 4 queues")
	// Let the official consumer's rebalance (on the ids-changed notice)
	// settle before producing.
	time.Sleep(2 * time.Second)
	p := officialProducer(t, srv.Namesrv)
	for i := 0; i < 40; i++ {
		_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("m-%d", i))))
		require.NoError(t, err)
	}
	waitFor(t, 40*time.Second, func() bool { return o.count()+q.count() >= 40 }, "40 messages (official %d, quiver %d)", o.count(), q.count())
	assert.NotZero(t, o.count())
	assert.NotZero(t, q.count())
	for _, k := range q.keys() {
		assert.Nil(t, o.get(k), "%s consumed by both", k)
	}
	stopOfficial()
}
