package admin

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestViewMessageCopies stores a message and its dead-letter copy (same
// UNIQ_KEY) on a live mq dev and finds them by msgId, across the cluster
// and within one topic, and the original by its offsetMsgId.
func TestViewMessageCopies(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	c, err := client.New(client.WithNameServers(dev.Namesrv), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	a := New(c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic, group = "ViewCopies", "ViewCopiesGroup"
	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}))
	uniq := client.NewUniqID()
	props := message.Properties{message.PropertyUniqKey: uniq, "WAIT": "true"}
	resp, err := c.Invoke(ctx, dev.Broker, client.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "ViewCopiesProducer", "topic": topic, "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte("original")))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	offID := resp.Ext("msgId")
	_, off, err := message.ParseOffsetMsgID(offID)
	require.NoError(t, err)

	resp, err = c.Invoke(ctx, dev.Broker, client.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": strconv.FormatInt(off, 10), "delayLevel": "-1", "originMsgId": offID, "maxReconsumeTimes": "16",
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	dlq := protocol.DLQTopic(group)

	// The DLQ topic reaches the name server's topic list at the broker's
	// next registration.
	var found []FoundMessage
	require.Eventually(t, func() bool {
		found, err = a.ViewMessage(ctx, uniq, "")
		return err == nil && len(found) == 2
	}, 15*time.Second, 50*time.Millisecond, "the original and its dead letter: %v %v", found, err)
	assert.Equal(t, topic, found[0].Message.Topic, "the copy in an ordinary topic comes first")
	assert.Equal(t, "original", string(found[0].Message.Body))
	assert.Equal(t, "broker-a", found[0].BrokerName)
	assert.Equal(t, dev.Broker, found[0].BrokerAddr)
	assert.Equal(t, dlq, found[1].Message.Topic)
	assert.Equal(t, uniq, found[1].Message.UniqKey())

	found, err = a.ViewMessage(ctx, uniq, dlq)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, dlq, found[0].Message.Topic)

	// The offsetMsgId names the original only; it is no UNIQ_KEY, so a
	// hit proves VIEW_MESSAGE_BY_ID on the registered broker. Lower-case
	// hex is read the same.
	for _, id := range []string{offID, strings.ToLower(offID), " " + offID + "\n"} {
		found, err = a.ViewMessage(ctx, id, "")
		require.NoError(t, err, id)
		require.Len(t, found, 1)
		assert.Equal(t, topic, found[0].Message.Topic)
		assert.Equal(t, off, found[0].Message.CommitLogOffset)
	}

	_, err = a.ViewMessage(ctx, client.NewUniqID(), "")
	assert.ErrorIs(t, err, ErrMessageNotFound)
	_, err = a.ViewMessage(ctx, client.NewUniqID(), topic)
	assert.ErrorIs(t, err, ErrMessageNotFound)
	_, err = a.ViewMessage(ctx, "nonsense", "")
	assert.ErrorIs(t, err, ErrBadMessageID)
}
