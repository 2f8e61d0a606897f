package acl

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// fakeBroker is a name server and broker in one, just enough for the
// official producer: routes every topic to itself, accepts heartbeats and
// sends. The ACL interceptor runs in front of every handler, so whatever
// reaches a handler was signed by the official client's own code path
// (internal/remote/interceptor.go) and verified here.
type fakeBroker struct {
	addr string
	mu   sync.Mutex
	// passed and refused count requests by code; remarks keeps refusals.
	passed  map[int32]int
	refused map[int32]int
	remarks []string
	// heartbeats holds the bodies of heartbeats that passed; handled the
	// bodies the heartbeat processor got (narrowed by the ACL).
	heartbeats []string
	handled    []string
	// lists counts GET_CONSUMER_LIST_BY_GROUP requests by group, passed
	// or not.
	lists map[string]int
}

// waitRebalanced waits until the consumer of group asked for the consumer
// list of both its topics (the topic and its retry topic): the client
// races with itself when it shuts down during a rebalance.
func (b *fakeBroker) waitRebalanced(t *testing.T, group string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.lists[group] >= 2
	}, 10*time.Second, 10*time.Millisecond)
}

func (b *fakeBroker) passedHeartbeats() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.heartbeats...)
}

func (b *fakeBroker) handledHeartbeats() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.handled...)
}

func (b *fakeBroker) remarksNow() []string {
	_, _, r := b.counts()
	return r
}

func (b *fakeBroker) counts() (passed, refused map[int32]int, remarks []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, r := map[int32]int{}, map[int32]int{}
	for k, v := range b.passed {
		p[k] = v
	}
	for k, v := range b.refused {
		r[k] = v
	}
	return p, r, append([]string(nil), b.remarks...)
}

func startFakeBroker(t *testing.T, a *ACL) *fakeBroker {
	t.Helper()
	b := &fakeBroker{passed: map[int32]int{}, refused: map[int32]int{}, lists: map[string]int{}}
	router := remoting.NewRouter()
	check := a.Interceptor()
	router.Use(func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := check(ctx, p, req)
		b.mu.Lock()
		if req.Code == remoting.GetConsumerListByGroup {
			b.lists[req.Ext("consumerGroup")]++
		}
		if resp != nil {
			b.refused[req.Code]++
			b.remarks = append(b.remarks, resp.Remark)
		} else {
			b.passed[req.Code]++
			if req.Code == remoting.HeartBeat {
				b.heartbeats = append(b.heartbeats, string(req.Body))
			}
		}
		b.mu.Unlock()
		return resp
	})
	var offset atomic.Int64
	router.Register(remoting.GetRouteInfoByTopic, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		route := protocol.TopicRouteData{
			QueueDatas:  []protocol.QueueData{{BrokerName: "broker-a", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []protocol.BrokerData{{Cluster: "c", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: b.addr}}},
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = route.Encode()
		return resp
	})
	router.Register(remoting.HeartBeat, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		b.mu.Lock()
		b.handled = append(b.handled, string(req.Body))
		b.mu.Unlock()
		return remoting.NewResponse(req, remoting.Success, "")
	})
	router.Register(remoting.SendMessage, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.SetExt("msgId", "7F00000100002A9F0000000000000000")
		resp.SetExt("queueId", "0")
		resp.SetExtInt("queueOffset", offset.Add(1))
		return resp
	})
	router.Register(remoting.GetConsumerListByGroup, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		// No consumer ids: the client gets no queues and never pulls.
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(`{"consumerIdList":[]}`)
		return resp
	})
	router.Register(remoting.CheckClientConfig, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	})
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcp.NewConfig(), 0)
	require.NoError(t, err)
	b.addr = ln.Addr()
	srv := remoting.NewServer(router, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	return b
}

var instanceSeq atomic.Int64

func officialProducer(t *testing.T, addr string, cred primitive.Credentials) rocketmq.Producer {
	t.Helper()
	n := instanceSeq.Add(1)
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{addr})),
		producer.WithGroupName(fmt.Sprintf("PG_%d", n)),
		producer.WithInstanceName(fmt.Sprintf("acl_%d_%d", os.Getpid(), n)),
		producer.WithCredentials(cred),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

func officialConsumer(t *testing.T, addr, group, topic string, cred primitive.Credentials) rocketmq.PushConsumer {
	t.Helper()
	n := instanceSeq.Add(1)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{addr})),
		consumer.WithGroupName(group),
		consumer.WithInstance(fmt.Sprintf("aclc_%d_%d", os.Getpid(), n)),
		consumer.WithCredentials(cred),
	)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}))
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

func TestOfficialGoClientSignatures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the official client")
	}
	rlog.SetLogLevel("error")
	a, _, _ := newACL(t, testYAML)
	b := startFakeBroker(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("accepted", func(t *testing.T) {
		p := officialProducer(t, b.addr, primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser})
		res, err := p.SendSync(ctx, primitive.NewMessage("topicB", []byte("hello")))
		require.NoError(t, err)
		assert.Equal(t, primitive.SendOK, res.Status)
		// The client sends its first heartbeat (a signed JSON body) 1 s
		// after it starts.
		require.Eventually(t, func() bool {
			passed, _, _ := b.counts()
			return passed[remoting.HeartBeat] > 0
		}, 10*time.Second, 20*time.Millisecond)
	})
	t.Run("accepted with a security token", func(t *testing.T) {
		// The Go client does not sign the token; the Go variant of the
		// content accepts it.
		p := officialProducer(t, b.addr, primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser, SecurityToken: "token-1"})
		_, err := p.SendSync(ctx, primitive.NewMessage("topicP", []byte("hello token")))
		require.NoError(t, err)
	})
	t.Run("denied topic", func(t *testing.T) {
		p := officialProducer(t, b.addr, primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser})
		_, err := p.SendSync(ctx, primitive.NewMessage("topicA", []byte("no")))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "CODE: 16")
		assert.Contains(t, err.Error(), "acl: no permission: PUB on topic topicA for accessKey RocketMQ")
	})
	t.Run("wrong secret", func(t *testing.T) {
		_, before, _ := b.counts()
		p := officialProducer(t, b.addr, primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser + "x"})
		_, err := p.SendSync(ctx, primitive.NewMessage("topicB", []byte("no")))
		require.Error(t, err)
		_, after, remarks := b.counts()
		assert.Greater(t, after[remoting.GetRouteInfoByTopic], before[remoting.GetRouteInfoByTopic], "the route query is refused")
		assert.Contains(t, remarks, "acl: Check signature failed for accessKey=RocketMQ")
	})
	t.Run("unknown access key", func(t *testing.T) {
		p := officialProducer(t, b.addr, primitive.Credentials{AccessKey: "Stranger", SecretKey: "whatever-123"})
		_, err := p.SendSync(ctx, primitive.NewMessage("topicB", []byte("no")))
		require.Error(t, err)
		_, _, remarks := b.counts()
		assert.Contains(t, remarks, "acl: No acl config for Stranger")
	})

	t.Run("push consumer heartbeat", func(t *testing.T) {
		// A consumer heartbeat carries consumerDataSet: group groupB may
		// consume topicB and its retry topic.
		c := officialConsumer(t, b.addr, "groupB", "topicB", primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser})
		require.NoError(t, c.Start())
		require.Eventually(t, func() bool {
			for _, hb := range b.passedHeartbeats() {
				if strings.Contains(hb, `"groupName":"groupB"`) && strings.Contains(hb, `"topic":"%RETRY%groupB"`) {
					return true
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond)
		b.waitRebalanced(t, "groupB")
	})
	t.Run("push consumer of a denied group", func(t *testing.T) {
		c := officialConsumer(t, b.addr, "groupA", "topicB", primitive.Credentials{AccessKey: "RocketMQ", SecretKey: skUser})
		require.NoError(t, c.Start())
		require.Eventually(t, func() bool {
			_, _, remarks := b.counts()
			return slices.Contains(remarks, "acl: no permission: SUB on group groupA for accessKey RocketMQ")
		}, 10*time.Second, 20*time.Millisecond)
		b.waitRebalanced(t, "groupA")
	})

	passed, _, remarks := b.counts()
	assert.Positive(t, passed[remoting.GetRouteInfoByTopic], "signed name-server query verified")
	assert.Positive(t, passed[remoting.HeartBeat], "signed heartbeat (body) verified")
	assert.Positive(t, passed[remoting.SendMessage], "signed send (ext + body) verified")
	for _, r := range remarks {
		for _, s := range testSecrets {
			assert.NotContains(t, r, s)
		}
	}
}
