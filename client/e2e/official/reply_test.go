package official

import (
	"context"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestRequestReplyAcrossClients: a Quiver service answers the official
// client's Request, and an official service answers Quiver's.
func TestRequestReplyAcrossClients(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	ns := srv.Namesrv

	t.Run("official requests, Quiver replies", func(t *testing.T) {
		topic := uniq("RPCQ")
		createTopic(t, ns, topic, 2)
		c := qclient(t, ns)
		replier, err := producer.New(c, uniq("QRP"))
		require.NoError(t, err)
		t.Cleanup(func() { replier.Shutdown(context.Background()) })
		replied := make(chan error, 4)
		pc, err := consumer.NewPush(c, uniq("QRG"), func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
			for _, m := range msgs {
				if m.Property(client.PropertyReplyToClient) == "" {
					continue // the requester's warm-up
				}
				r, err := client.NewReply(m, []byte("quiver:"+string(m.Body)))
				if err == nil {
					_, err = replier.SendSync(ctx, r)
				}
				replied <- err
			}
			return consumer.ConsumeSuccess
		}, consumer.WithConsumeFrom(consumer.FromFirstOffset))
		require.NoError(t, err)
		require.NoError(t, pc.Subscribe(topic, consumer.All()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, pc.Start(ctx))
		t.Cleanup(func() { pc.Shutdown(context.Background()) })

		group := uniq("ORP")
		req, err := rocketmq.NewProducer(rproducer.WithNameServer([]string{ns}), rproducer.WithGroupName(group),
			rproducer.WithInstanceName(uniq("ori")), rproducer.WithSendMsgTimeout(5*time.Second))
		require.NoError(t, err)
		require.NoError(t, req.Start())
		t.Cleanup(func() { req.Shutdown() })
		// The official client heartbeats a second after its start to the
		// brokers it knows by then: the warm-up send makes it know ours.
		_, err = req.SendSync(ctx, primitive.NewMessage(topic, []byte("warm-up")))
		require.NoError(t, err)
		a := admin.New(c)
		waitFor(t, 40*time.Second, func() bool {
			conns, found, err := a.ProducerConnections(ctx, srv.Broker, group)
			return err == nil && found && len(conns) > 0
		}, "the broker to list producer group %s", group)

		reply, err := req.Request(ctx, 20*time.Second, primitive.NewMessage(topic, []byte("hi")))
		require.NoError(t, err)
		assert.Equal(t, "quiver:hi", string(reply.Body))
		require.NoError(t, <-replied)
	})

	t.Run("Quiver requests, official replies", func(t *testing.T) {
		topic := uniq("RPCO")
		createTopic(t, ns, topic, 2)
		replier := officialProducer(t, ns)
		replied := make(chan error, 4)
		oc, err := rocketmq.NewPushConsumer(rconsumer.WithNameServer([]string{ns}), rconsumer.WithGroupName(uniq("ORG")),
			rconsumer.WithInstance(uniq("oci")), rconsumer.WithConsumeFromWhere(rconsumer.ConsumeFromFirstOffset))
		require.NoError(t, err)
		require.NoError(t, oc.Subscribe(topic, rconsumer.MessageSelector{Type: rconsumer.TAG, Expression: "*"},
			func(ctx context.Context, msgs ...*primitive.MessageExt) (rconsumer.ConsumeResult, error) {
				for _, m := range msgs {
					body := []byte("official:" + string(m.Body))
					r, err := rconsumer.CreateReplyMessage(m, body)
					if err == nil {
						r.Body = body // v2.1.3's CreateReplyMessage drops it
						_, err = replier.SendSync(ctx, r)
					}
					replied <- err
				}
				return rconsumer.ConsumeSuccess, nil
			}))
		require.NoError(t, oc.Start())
		t.Cleanup(func() { oc.Shutdown() })

		p, err := producer.New(qclient(t, ns), uniq("QRQ"))
		require.NoError(t, err)
		t.Cleanup(func() { p.Shutdown(context.Background()) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reply, err := p.Request(ctx, client.NewMessage(topic, []byte("yo")))
		require.NoError(t, err)
		assert.Equal(t, "official:yo", string(reply.Body))
		require.NoError(t, <-replied)
	})
}
