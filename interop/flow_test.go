package interop

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

// TestOfficialProducerSeesBrokerBusy: a broker shedding load answers
// SYSTEM_BUSY (2) like Apache RocketMQ; the official Go producer reports it
// as "CODE: 2 DESC: …broker busy…" without retrying (its needRetryCode does
// not include 2, against Apache RocketMQ too), and sends work again once
// the quota refills.
func TestOfficialProducerSeesBrokerBusy(t *testing.T) {
	topic := uniq("Busy")
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{
		"broker.quota.topics." + topic + ".messages_per_sec=1",
	}})
	p := newProducer(t, srv.Namesrv, producer.WithRetry(2))
	send := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("x")))
		return err
	}
	require.NoError(t, send(), "the first message fits the quota")
	err := send()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CODE: 2")
	assert.Contains(t, err.Error(), "broker busy")
	require.Eventually(t, func() bool { return send() == nil }, 10*time.Second, 300*time.Millisecond, "sends resume when the quota refills")
}
