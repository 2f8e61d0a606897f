package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
)

// TestRequestReply: producer.Request and RequestAsync get the reply a
// push consumer sends with client.NewReply (SEND_REPLY_MESSAGE_V2), which
// the broker pushes back (PUSH_REPLY_MESSAGE_TO_CLIENT) over the
// requester's own connection, on every transport; a request nobody
// answers ends with client.ErrTimeout.
func TestRequestReply(t *testing.T) {
	for _, s := range []scheme{tcpScheme, quicScheme} {
		t.Run(string(s), func(t *testing.T) { testRequestReply(t, s) })
	}
}

func testRequestReply(t *testing.T, s scheme) {
	e := startEnv(t, s)
	topic := uniq("RPC")
	e.createTopic(t, topic, 2)
	replier := e.producer(t)
	replyErrs := make(chan error, 16)
	e.push(t, topic, pushOpts{group: uniq("RPCG")}, func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
		for _, m := range msgs {
			r, err := client.NewReply(m, []byte("reply:"+string(m.Body)))
			if err == nil {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = replier.SendSync(sctx, r)
				cancel()
			}
			replyErrs <- err
		}
		return consumer.ConsumeSuccess
	})
	requester := e.producer(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := msg(topic, "ping")
	reply, err := requester.Request(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "reply:ping", string(reply.Body))
	assert.Equal(t, req.Property(client.PropertyCorrelationID), reply.Property(client.PropertyCorrelationID))
	assert.Equal(t, client.ReplyMessageFlag, reply.Property(client.PropertyMessageType))
	assert.NotEmpty(t, reply.Property(client.PropertyPushReplyTime))
	assert.NotEmpty(t, reply.Property(client.PropertyReplyArriveTime))
	assert.Equal(t, client.ReplyTopic("DefaultCluster"), reply.Topic)
	require.NoError(t, <-replyErrs)

	type outcome struct {
		m   *client.MessageExt
		err error
	}
	got := make(chan outcome, 1)
	require.NoError(t, requester.RequestAsync(ctx, msg(topic, "pong"), func(_ context.Context, m *client.MessageExt, err error) {
		got <- outcome{m, err}
	}))
	select {
	case o := <-got:
		require.NoError(t, o.err)
		assert.Equal(t, "reply:pong", string(o.m.Body))
	case <-ctx.Done():
		t.Fatal("RequestAsync: no callback")
	}
	require.NoError(t, <-replyErrs)

	// Nobody consumes this topic: the request times out.
	quiet := uniq("RPCQ")
	e.createTopic(t, quiet, 1)
	tctx, tcancel := context.WithTimeout(context.Background(), time.Second)
	defer tcancel()
	_, err = requester.Request(tctx, msg(quiet, "nobody"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, client.ErrTimeout) || errors.Is(err, context.DeadlineExceeded), "error %v", err)
}
