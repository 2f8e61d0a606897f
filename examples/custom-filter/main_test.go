package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// TestGraphsValidate: each role's graph, with this binary's plugins,
// is complete.
func TestGraphsValidate(t *testing.T) {
	for name, r := range roles {
		plan, err := kernel.NewPlan(config.FromMap(map[string]any{"broker.standalone": true}), server.Spec(r, plugins()))
		require.NoError(t, err, name)
		require.NoError(t, fx.ValidateApp(plan.Options()), name)
	}
}

// buildBinary builds this example with go build, as its author would.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mq-regex")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// TestRegexSubscription starts the example binary as dev and shows that an
// official-client consumer subscribing with the REGEX type receives
// exactly the matching messages, and that a bad REGEX is refused at
// subscription with its position.
func TestRegexSubscription(t *testing.T) {
	rlog.SetLogLevel("error")
	srv := testserver.StartDev(t, testserver.Options{Binary: buildBinary(t), Sets: []string{"filter.regex.max_length=64"}})
	topic := fmt.Sprintf("Colors_%d", time.Now().UnixNano())

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{srv.Namesrv}), producer.WithGroupName("PG_regex"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { p.Shutdown() })
	send := func(body, color string) {
		t.Helper()
		m := primitive.NewMessage(topic, []byte(body))
		if color != "-" {
			m.WithProperty("color", color)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, m)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
	}
	colors := []string{"blue", "black", "red", "Blue", "lightblue", "-", "", "bl", "green", "blush"}
	var want []string
	for i := 0; i < 3*len(colors); i++ {
		c := colors[i%len(colors)]
		body := fmt.Sprintf("%d-%s", i, c)
		if len(c) >= 2 && c[:2] == "bl" {
			want = append(want, body)
		}
		send(body, c)
	}
	waitRoute(t, srv.Namesrv, topic)

	var mu sync.Mutex
	got := map[string]bool{}
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer([]string{srv.Namesrv}), consumer.WithGroupName("CG_regex"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{Type: "REGEX", Expression: "color=^bl"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[string(m.Body)] = true
			}
			return consumer.ConsumeSuccess, nil
		}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.Shutdown() })

	// A matching marker sent last; the marker proves only its own queue
	// caught up (each queue is pulled on its own), so wait for every
	// matching message, then check nothing else came.
	send("marker", "blueberry")
	want = append(want, "marker")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range want {
			if !got[w] {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "every matching message delivered")
	mu.Lock()
	var bodies []string
	for b := range got {
		bodies = append(bodies, b)
	}
	mu.Unlock()
	slices.Sort(bodies)
	slices.Sort(want)
	assert.Equal(t, want, bodies)

	// A bad expression is refused when the consumer subscribes.
	resp := heartbeat(t, srv.Broker, topic, "REGEX", "color=(")
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, `REGEX expression "color=(": at position 6: expected a regular expression`)
	// The plugin's own config section is honoured (max_length 64).
	resp = heartbeat(t, srv.Broker, topic, "REGEX", "color="+string(make([]byte, 70)))
	assert.Contains(t, resp.Remark, "filter.regex.max_length")
}

func rawClient(t *testing.T) *remoting.Client {
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func waitRoute(t *testing.T, ns, topic string) {
	t.Helper()
	c := rawClient(t)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		return err == nil && resp.Code == remoting.Success
	}, 20*time.Second, 20*time.Millisecond, "no route for %s", topic)
}

func heartbeat(t *testing.T, broker, topic, typ, expr string) *remoting.Command {
	t.Helper()
	hb := protocol.HeartbeatData{ClientID: "127.0.0.1@raw", ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: "CG_raw", ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: topic, SubString: expr, ExpressionType: typ}},
	}}}
	body, err := json.Marshal(hb)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rawClient(t).Invoke(ctx, broker, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.NoError(t, err)
	return resp
}
