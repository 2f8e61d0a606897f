package interop

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// responder is a push consumer that answers every request as the
// official client's examples/consumer/rpc does: utils.CreateReplyMessage
// and SendSync on a producer of its own. It records each reply's outcome.
type responder struct {
	mu      sync.Mutex
	results []error
	ch      chan error
}

func startResponder(t *testing.T, ns, topic string) *responder {
	t.Helper()
	r := &responder{ch: make(chan error, 16)}
	replier := newProducer(t, ns)
	newPushConsumer(t, ns, topic, consumerOpts{group: uniq("RPCG")}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if m.GetProperty("REPLY_TO_CLIENT") == "" {
				continue // the requester's warm-up message
			}
			body := []byte("reply:" + string(m.Body))
			reply, err := consumer.CreateReplyMessage(m, body)
			if err == nil {
				// CreateReplyMessage (v2.1.3) parses body as properties
				// instead of setting it; Java's MessageUtil sets it.
				reply.Body = body
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = replier.SendSync(sctx, reply)
				cancel()
			}
			r.mu.Lock()
			r.results = append(r.results, err)
			r.mu.Unlock()
			select {
			case r.ch <- err:
			default:
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	return r
}

func (r *responder) next(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the responder sent no reply within 30s")
		return nil
	}
}

func rpcTopic(t *testing.T, srv *testserver.Proc) string {
	t.Helper()
	topic := uniq("RPC")
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	awaitRoute(t, srv.Namesrv, topic)
	return topic
}

// newRequester starts an official producer and waits until the broker
// knows its connection from a heartbeat: the broker pushes replies to the
// producer connections it knows (Java's ProducerManager.findChannel). The
// official Go client heartbeats one second after its start to the brokers
// it knows by then (the warm-up send makes it know the broker), then every
// 30 s; its examples/consumer/rpc sleeps a second before replying for that.
func newRequester(t *testing.T, srv *testserver.Proc, topic string) rocketmq.Producer {
	t.Helper()
	group := uniq("RPCP")
	p := newProducer(t, srv.Namesrv, producer.WithGroupName(group))
	sendSync(t, p, newMsg(topic, "warm-up"))
	c := rawClient(t)
	deadline := time.Now().Add(40 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.GetProducerConnectionList, map[string]string{"producerGroup": group}, nil))
		cancel()
		if err == nil && resp.Code == remoting.Success {
			return p
		}
		require.True(t, time.Now().Before(deadline), "the broker does not know producer group %s after 40s", group)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRequestReplyOfficialClient runs the official Go client's
// request-reply (producer.Request, RequestAsync; the responder's
// CreateReplyMessage and SendSync, which sends SEND_REPLY_MESSAGE) against
// mq dev: the broker pushes each reply to the requester
// (PUSH_REPLY_MESSAGE_TO_CLIENT) and answers the replier SUCCESS.
func TestRequestReplyOfficialClient(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := rpcTopic(t, srv)
	awaitRoute(t, srv.Namesrv, "DefaultCluster_REPLY_TOPIC")
	r := startResponder(t, srv.Namesrv, topic)
	requester := newRequester(t, srv, topic)

	t.Run("sync", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reply, err := requester.Request(ctx, 20*time.Second, newMsg(topic, "ping"))
		require.NoError(t, err)
		require.NotNil(t, reply)
		assert.Equal(t, "reply:ping", string(reply.Body))
		assert.Equal(t, "reply", reply.GetProperty("MSG_TYPE"))
		assert.NotEmpty(t, reply.GetProperty("CORRELATION_ID"))
		assert.NotEmpty(t, reply.GetProperty("PUSH_REPLY_TIME"), "the broker stamps the push time")
		require.NoError(t, r.next(t), "the replier's send is answered SUCCESS")
	})

	t.Run("async", func(t *testing.T) {
		got := make(chan *primitive.Message, 2)
		errs := make(chan error, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The official client may call the callback again when it drops
		// the answered future: keep the first call.
		var once sync.Once
		require.NoError(t, requester.RequestAsync(ctx, 20*time.Second, func(_ context.Context, m *primitive.Message, err error) {
			once.Do(func() {
				if err != nil {
					errs <- err
					return
				}
				got <- m
			})
		}, newMsg(topic, "pong")))
		select {
		case m := <-got:
			require.NotNil(t, m)
			assert.Equal(t, "reply:pong", string(m.Body))
		case err := <-errs:
			t.Fatalf("RequestAsync: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no reply within 30s")
		}
		require.NoError(t, r.next(t))
	})

	t.Run("requester gone", func(t *testing.T) {
		// A request whose REPLY_TO_CLIENT names no connected producer:
		// Java answers the replier SYSTEM_ERROR, "channel of <id> not
		// found" (ReplyMessageProcessor.pushReplyMessage).
		m := newMsg(topic, "orphan")
		m.WithProperty("CORRELATION_ID", "c-orphan")
		m.WithProperty("REPLY_TO_CLIENT", "127.0.0.1@gone")
		m.WithProperty("TTL", "3000")
		sendSync(t, requester, m)
		err := r.next(t)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "channel of <127.0.0.1@gone> not found")
	})
}

// TestRequestTimeoutOfficialClient: a request nobody answers ends with
// the official client's timeout error, not a hang.
func TestRequestTimeoutOfficialClient(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := rpcTopic(t, srv)
	requester := newRequester(t, srv, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := requester.Request(ctx, 2*time.Second, newMsg(topic, "nobody"))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "timeout"), "error %v", err)
}
