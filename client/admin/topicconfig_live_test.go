package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestBrokerTopicConfig reads one topic's config from a live mq dev's
// broker (GET_TOPIC_CONFIG), and the broker's refusal of a topic it does
// not hold.
func TestBrokerTopicConfig(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	a, _ := liveAdmin(t, dev.Namesrv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: "OneConfig", ReadQueueNums: 3, WriteQueueNums: 2}))
	c, err := a.BrokerTopicConfig(ctx, dev.Broker, "OneConfig")
	require.NoError(t, err)
	assert.Equal(t, "OneConfig", c.TopicName)
	assert.EqualValues(t, 3, c.ReadQueueNums)
	assert.EqualValues(t, 2, c.WriteQueueNums)
	assert.EqualValues(t, 6, c.Perm)
	assert.Empty(t, c.Attributes)

	_, err = a.BrokerTopicConfig(ctx, dev.Broker, "NoSuchTopic")
	var be *client.BrokerError
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, remoting.TopicNotExist, be.Code)
}
