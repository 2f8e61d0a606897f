package broker

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// The statistics answers are RocketMQ's fastjson shapes: MessageQueue
// objects as map keys, fields in alphabetical order.
func TestStatsShapes(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for i := 0; i < 3; i++ {
		require.Equal(t, remoting.Success, h.send("StatsTopic", 1, fmt.Sprintf("m%d", i), nil).Code)
	}

	resp := h.invoke(remoting.GetTopicStatsInfo, map[string]string{"topic": "StatsTopic"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	ts := regexp.MustCompile(`"lastUpdateTimestamp":\d+`).ReplaceAllString(string(resp.Body), `"lastUpdateTimestamp":T`)
	assert.Contains(t, ts, `{"brokerName":"broker-a","queueId":1,"topic":"StatsTopic"}:{"lastUpdateTimestamp":T,"maxOffset":3,"minOffset":0}`)
	assert.Regexp(t, `^\{"offsetTable":\{.*\}\}$`, string(resp.Body))
	resp = h.invoke(remoting.GetTopicStatsInfo, map[string]string{"topic": "Nope"}, nil)
	assert.Equal(t, remoting.TopicNotExist, resp.Code)

	resp = h.invoke(remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "SG"}, nil)
	assert.Equal(t, remoting.ConsumerNotOnline, resp.Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "SG", "StatsTopic", "*")).Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "SG", "topic": "StatsTopic", "queueId": "1", "commitOffset": "1"}, nil).Code)

	resp = h.invoke(remoting.GetConsumeStats, map[string]string{"consumerGroup": "SG"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	cs := regexp.MustCompile(`"lastTimestamp":[1-9]\d+`).ReplaceAllString(string(resp.Body), `"lastTimestamp":T`)
	assert.Contains(t, cs, `{"brokerName":"broker-a","queueId":1,"topic":"StatsTopic"}:{"brokerOffset":3,"consumerOffset":1,"lastTimestamp":T}`)
	assert.Contains(t, cs, `{"brokerName":"broker-a","queueId":0,"topic":"StatsTopic"}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0}`)
	assert.Regexp(t, `^\{"consumeTps":0\.0,"offsetTable":\{`, cs)

	resp = h.invoke(remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "SG"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var cc ConsumerConnection
	require.NoError(t, json.Unmarshal(resp.Body, &cc))
	require.Len(t, cc.ConnectionSet, 1)
	assert.Equal(t, "c1", cc.ConnectionSet[0].ClientID)
	assert.Equal(t, codec.ServerLanguage, cc.ConnectionSet[0].Language)
	assert.EqualValues(t, codec.ServerVersion, cc.ConnectionSet[0].Version)
	assert.NotEmpty(t, cc.ConnectionSet[0].ClientAddr)
	assert.Contains(t, cc.SubscriptionTable, "StatsTopic")
	assert.Equal(t, "CLUSTERING", cc.MessageModel)

	pulled := 0
	h.b.OnPulled(func(topic string, msgs, bytes int) {
		if topic == "StatsTopic" {
			pulled += msgs
		}
	})
	require.Equal(t, remoting.Success, h.invoke(remoting.PullMessage, pullExt("SG", "StatsTopic", 1, 0, 0, 0), nil).Code)
	assert.Equal(t, 3, pulled)

	resp = h.invoke(remoting.GetBrokerRuntimeInfo, nil, nil)
	require.Equal(t, remoting.Success, resp.Code)
	var rt struct {
		Table map[string]string `json:"table"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &rt))
	assert.Equal(t, "3", rt.Table["msgPutTotalTodayNow"])
	assert.Equal(t, "3", rt.Table["msgGetTotalTodayNow"])
	assert.Equal(t, "V4_9_8", rt.Table["brokerVersionDesc"])
	assert.NotEqual(t, "0", rt.Table["commitLogMaxOffset"])
	assert.Equal(t, "1", rt.Table["quiverConnections"])
	assert.Contains(t, rt.Table, "quiverFlowBusyStore")
	_ = time.Second
}
