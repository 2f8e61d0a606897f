package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// createTopicExt is UPDATE_AND_CREATE_TOPIC's header as RocketMQ 5's
// mqadmin updateTopic sends it (CreateTopicRequestHeader, attributes as
// AttributeParser.parseToString writes them).
func createTopicExt(topic, attributes string) map[string]string {
	return map[string]string{"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", "attributes": attributes}
}

// topicAttributes reads a topic's attributes from GET_ALL_TOPIC_CONFIG's
// body as a Java client decodes it.
func (h *harness) topicAttributes(topic string) map[string]string {
	h.t.Helper()
	resp := h.invoke(remoting.GetAllTopicConfig, nil, nil)
	require.Equal(h.t, remoting.Success, resp.Code, resp.Remark)
	var body struct {
		TopicConfigTable map[string]struct {
			Attributes map[string]string `json:"attributes"`
		} `json:"topicConfigTable"`
	}
	require.NoError(h.t, json.Unmarshal(resp.Body, &body), "%s", resp.Body)
	tc, ok := body.TopicConfigTable[topic]
	require.True(h.t, ok, "topic %s in %s", topic, resp.Body)
	return tc.Attributes
}

// TestTopicAttributes: UPDATE_AND_CREATE_TOPIC's attributes header is
// applied as Java's AttributeUtil.alterCurrentAttributes applies it (only
// additions on create; add, change, delete on update; unchangeable and
// unknown keys refused with Java's remarks), kept across a restart and
// shown in GET_ALL_TOPIC_CONFIG as Java's TopicConfig "attributes".
func TestTopicAttributes(t *testing.T) {
	dir := t.TempDir()
	h := startBroker(t, dir, nil)
	ok := func(topic, attrs string) {
		t.Helper()
		resp := h.invoke(remoting.UpdateAndCreateTopic, createTopicExt(topic, attrs), nil)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	refused := func(topic, attrs string, code int32, remark string) {
		t.Helper()
		resp := h.invoke(remoting.UpdateAndCreateTopic, createTopicExt(topic, attrs), nil)
		assert.Equal(t, code, resp.Code, resp.Remark)
		assert.Equal(t, remark, resp.Remark)
	}

	ok("FifoT", "+message.type=FIFO")
	assert.Equal(t, map[string]string{"message.type": "FIFO"}, h.topicAttributes("FifoT"))
	ok("FifoT", "") // an update without attributes keeps them
	assert.Equal(t, map[string]string{"message.type": "FIFO"}, h.topicAttributes("FifoT"))
	ok("FifoT", "+message.type=DELAY")
	assert.Equal(t, map[string]string{"message.type": "DELAY"}, h.topicAttributes("FifoT"))
	ok("PlainT", "")
	assert.Empty(t, h.topicAttributes("PlainT"))

	refused("NewT", "-message.type", remoting.SystemError, "only add attribute is supported while creating topic. key: message.type")
	refused("NewT", "+message.type=BAD", remoting.SystemError, "value is not in set: [UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED, PRIORITY, LITE]")
	refused("NewT", "+color=red", remoting.SystemError, "unsupported key: color")
	refused("NewT", "message.type=FIFO", remoting.SystemError, "add/alter attribute format is wrong: message.type")
	refused("NewT", "+message.type=MIXED", 29, "MIXED message type is not supported.")
	_, exists := h.b.topics.get("NewT")
	assert.False(t, exists, "a refused create makes no topic")
	ok("BatchT", "+queue.type=BatchCQ")
	refused("BatchT", "+queue.type=SimpleCQ", remoting.SystemError, "attempt to update an unchangeable attribute. key: queue.type")
	refused("PlainT", "-message.type", remoting.SystemError, "attempt to delete a nonexistent key: message.type")

	ok("TxT", "+message.type=TRANSACTION")
	ok("GoneT", "+message.type=NORMAL")
	ok("GoneT", "-message.type")
	assert.Empty(t, h.topicAttributes("GoneT"))

	h.stop()
	h = startBroker(t, dir, nil)
	assert.Equal(t, map[string]string{"message.type": "DELAY"}, h.topicAttributes("FifoT"))
	assert.Equal(t, map[string]string{"message.type": "TRANSACTION"}, h.topicAttributes("TxT"))
	assert.Equal(t, map[string]string{"queue.type": "BatchCQ"}, h.topicAttributes("BatchT"))
	tc, found := h.b.topics.get("TxT")
	require.True(t, found)
	assert.Equal(t, protocol.MessageTypeTransaction, tc.MessageType())
}
