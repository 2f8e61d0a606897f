package admin

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestBrokerFigures reads runtime info, topic stats and a group's consume
// stats from a live mq dev, and resets the group's offsets: the calls
// mq admin makes, with the broker's fastjson bodies.
func TestBrokerFigures(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	c, err := client.New(client.WithNameServers(dev.Namesrv), client.WithRequestTimeout(5*time.Second), transports.WithDialer())
	require.NoError(t, err)
	defer c.Close()
	a := New(c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic, group = "Figures", "FiguresGroup"
	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2}))
	for i := range 3 {
		resp, err := c.Invoke(ctx, dev.Broker, client.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "FiguresProducer", "topic": topic, "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": "", "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
		}, []byte("m"+strconv.Itoa(i))))
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	resp, err := c.Invoke(ctx, dev.Broker, client.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "2"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	info, err := a.BrokerRuntimeInfo(ctx, dev.Broker)
	require.NoError(t, err)
	assert.NotEmpty(t, info)

	q0 := protocol.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 0}
	q1 := protocol.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueID: 1}
	ts, err := a.TopicStats(ctx, dev.Broker, topic)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.Equal(t, int64(3), ts[q0].MaxOffset)
	assert.Equal(t, int64(0), ts[q0].MinOffset)
	assert.Positive(t, ts[q0].LastUpdateTimestamp)
	assert.Equal(t, int64(0), ts[q1].MaxOffset)

	cs, err := a.ConsumeStats(ctx, dev.Broker, group, "")
	require.NoError(t, err)
	assert.Equal(t, OffsetWrapper{BrokerOffset: 3, ConsumerOffset: 2, LastTimestamp: cs.OffsetTable[q0].LastTimestamp}, cs.OffsetTable[q0])
	assert.Positive(t, cs.OffsetTable[q0].LastTimestamp, "the store time of the last consumed message")

	offs, told, err := a.ResetOffsetOn(ctx, dev.Broker, group, topic, 0, true)
	require.NoError(t, err)
	assert.Equal(t, 0, told, "no consumer online")
	assert.Equal(t, int64(0), offs[q0])
	cs, err = a.ConsumeStats(ctx, dev.Broker, group, topic)
	require.NoError(t, err)
	assert.Equal(t, int64(0), cs.OffsetTable[q0].ConsumerOffset)

	tcs, err := a.TopicConfigs(ctx, dev.Broker)
	require.NoError(t, err)
	require.Contains(t, tcs, topic)
	assert.Equal(t, int32(2), tcs[topic].WriteQueueNums)

	require.NoError(t, a.PutSubscriptionGroup(ctx, dev.Broker, []byte(`{"groupName":"FiguresSub","consumeEnable":true,"retryQueueNums":1,"retryMaxTimes":3}`)))
	groups, err := a.SubscriptionGroups(ctx, dev.Broker)
	require.NoError(t, err)
	require.Contains(t, groups, "FiguresSub")
	assert.Contains(t, string(groups["FiguresSub"]), `"retryMaxTimes":3`)
	_, online, err := a.ConsumerConnections(ctx, dev.Broker, "FiguresSub")
	require.NoError(t, err)
	assert.False(t, online)
	require.NoError(t, a.DeleteSubscriptionGroup(ctx, dev.Broker, "FiguresSub"))
	groups, err = a.SubscriptionGroups(ctx, dev.Broker)
	require.NoError(t, err)
	assert.NotContains(t, groups, "FiguresSub")

	_, err = a.BrokerRuntimeInfo(ctx, "127.0.0.1:1")
	require.Error(t, err)
	_, err = a.TopicStats(ctx, dev.Broker, "NoSuchTopic")
	assert.Positive(t, client.CodeOf(err), "a refusal carries the broker's code: %v", err)
}
