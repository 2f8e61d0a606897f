package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func createTopicReq(topic string) map[string]string {
	return map[string]string{"topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}
}

// TestTraceTopicCreatedWhenEnabled: broker.trace_topic_enable creates the
// trace topic at start as Java's TopicConfigManager (1 queue, perm 6),
// lists it among the system topics; off (Java's default), there is none.
func TestTraceTopicCreatedWhenEnabled(t *testing.T) {
	off := startBroker(t, t.TempDir(), nil)
	_, ok := off.b.topics.get(protocol.TraceTopic)
	assert.False(t, ok, "trace topic created with trace_topic_enable off")

	h := startBroker(t, t.TempDir(), func(c *Config) { c.TraceTopicEnable, c.TraceTopicName = true, "MyTraces" })
	tc, ok := h.b.topics.get("MyTraces")
	require.True(t, ok, "trace topic missing")
	assert.Equal(t, int32(1), tc.ReadQueueNums)
	assert.Equal(t, int32(1), tc.WriteQueueNums)
	assert.Equal(t, int32(protocol.PermRead|protocol.PermWrite), tc.Perm)

	resp := h.invoke(remoting.GetSystemTopicListFromBroker, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var tl struct {
		TopicList []string `json:"topicList"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &tl))
	assert.Contains(t, tl.TopicList, "MyTraces")
	assert.Contains(t, tl.TopicList, protocol.TraceTopic)

	// A client can write a trace record to it (a trace dispatcher's send).
	resp = h.send("MyTraces", 0, "Pub\x011\x02", nil)
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// TestCreateTopicRefusesSystemTopics: UPDATE_AND_CREATE_TOPIC answers a
// system topic (Java's TopicValidator.isSystemTopic for this broker) with
// INVALID_PARAMETER and Java's remark while
// validateSystemTopicWhenUpdateTopic is on, and creates it once an
// UPDATE_BROKER_CONFIG turned it off.
func TestCreateTopicRefusesSystemTopics(t *testing.T) {
	h := startBroker(t, t.TempDir(), func(c *Config) { c.TraceTopicEnable, c.TraceTopicName = true, "MyTraces" })
	tests := []struct {
		give string
		want int32
	}{
		{protocol.TraceTopic, invalidParameter}, // in Java's fixed set even when traces are off
		{"MyTraces", invalidParameter},          // added when enabled
		{protocol.AutoCreateTopic, invalidParameter},
		{protocol.ScheduleTopic, invalidParameter},
		{"BenchmarkTest", invalidParameter},
		{"CHECKPOINT_TOPIC", invalidParameter},
		{protocol.TransHalfTopic, invalidParameter},
		{"rmq_sys_anything", invalidParameter},
		{protocol.DefaultCluster, invalidParameter},
		{"broker-a", invalidParameter},
		{"DefaultCluster_REPLY_TOPIC", invalidParameter},
		{"Orders", remoting.Success},
		{"%RETRY%g1", remoting.Success},
		{"RMQ_SYS_TRACE_TOPIC2", remoting.Success},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			resp := h.invoke(remoting.UpdateAndCreateTopic, createTopicReq(tt.give), nil)
			assert.Equal(t, tt.want, resp.Code, resp.Remark)
			if tt.want != remoting.Success {
				assert.Equal(t, "The topic["+tt.give+"] is conflict with system topic.", resp.Remark)
			}
		})
	}

	resp := h.invoke(remoting.UpdateBrokerConfig, nil, []byte("validateSystemTopicWhenUpdateTopic=false"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = h.invoke(remoting.UpdateAndCreateTopic, createTopicReq(protocol.TraceTopic), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	_, ok := h.b.topics.get(protocol.TraceTopic)
	assert.True(t, ok)
}

func TestTraceTopicNameValidated(t *testing.T) {
	c := NewConfig()
	c.TraceTopicEnable, c.TraceTopicName = true, "bad topic"
	assert.ErrorContains(t, c.Validate(), "broker.trace_topic_name")
	c.TraceTopicEnable = false
	assert.NoError(t, c.Validate())
}
