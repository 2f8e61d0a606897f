package acl

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ordersYAML is the security guide's account (docs/guide/security.md).
const ordersYAML = `
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: orders-app
    secretKey: orders-secret-change-me-0123456789ab
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - Orders=PUB|SUB
    groupPerms:
      - orders-consumer=SUB
`

// TestOfficialGoClientProducerAndConsumerInOneInstance is issue 43's
// report: a producer (group TrafficProducers, not in groupPerms) and a
// push consumer (group orders-consumer) sharing one client instance send
// one heartbeat naming both groups. RocketMQ 4.9's PlainAccessValidator
// checks only the consumer groups and their topics, so the heartbeat
// passes and the consumer is registered; Quiver refused the whole
// heartbeat. The producer group the account holds nothing on is left out
// of the heartbeat the broker processes (it would get the group's
// transaction check-backs).
func TestOfficialGoClientProducerAndConsumerInOneInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the official client")
	}
	rlog.SetLogLevel("error")
	a, _, _ := newACL(t, ordersYAML)
	b := startFakeBroker(t, a)
	cred := primitive.Credentials{AccessKey: "orders-app", SecretKey: "orders-secret-change-me-0123456789ab"}
	instance := fmt.Sprintf("orders_%d", os.Getpid())

	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		producer.WithGroupName("TrafficProducers"),
		producer.WithInstanceName(instance),
		producer.WithCredentials(cred),
		producer.WithRetry(0),
	)
	require.NoError(t, err)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		consumer.WithGroupName("orders-consumer"),
		consumer.WithInstance(instance),
		consumer.WithCredentials(cred),
	)
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("Orders", consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.SendSync(ctx, primitive.NewMessage("Orders", []byte("hello")))
	require.NoError(t, err)

	// One heartbeat that names the consumer group reaches the processor,
	// without the producer group.
	var hb string
	require.Eventually(t, func() bool {
		for _, h := range b.handledHeartbeats() {
			if strings.Contains(h, `"orders-consumer"`) {
				hb = h
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "no heartbeat of orders-consumer passed; refusals: %v", b.remarksNow())
	assert.NotContains(t, hb, "TrafficProducers", "a producer group the account holds nothing on is not joined")
	assert.Contains(t, hb, `"Orders"`)
	b.waitRebalanced(t, "orders-consumer")
	for _, r := range b.remarksNow() {
		assert.NotContains(t, r, "TrafficProducers", "the heartbeat is not refused for its producer group")
	}
}
