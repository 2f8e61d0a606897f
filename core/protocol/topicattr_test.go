package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseAttributeMods: Java's AttributeParser.parseToMap and
// parseToString (its AttributeParserTest cases).
func TestParseAttributeMods(t *testing.T) {
	got, err := ParseAttributeMods("+message.type=FIFO,-reserve.time,+queue.type=SimpleCQ")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"+message.type": "FIFO", "-reserve.time": "", "+queue.type": "SimpleCQ"}, got)
	assert.Equal(t, "+message.type=FIFO,+queue.type=SimpleCQ,-reserve.time", FormatAttributeMods(got))
	got, err = ParseAttributeMods("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for give, want := range map[string]string{
		"message.type=FIFO":                  "add/alter attribute format is wrong: message.type",
		"message.type":                       "delete attribute format is wrong: message.type",
		"+message.type=A,+message.type=B":    "key duplication: +message.type",
		"+message.type=FIFO,+message.type=A": "key duplication: +message.type",
	} {
		_, err := ParseAttributeMods(give)
		assert.EqualError(t, err, want, give)
	}
}

func TestAlterTopicAttributes(t *testing.T) {
	mods := func(s string) map[string]string {
		m, err := ParseAttributeMods(s)
		require.NoError(t, err)
		return m
	}
	got, err := AlterTopicAttributes(true, nil, mods("+message.type=FIFO"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"message.type": "FIFO"}, got)
	cur := got
	got, err = AlterTopicAttributes(false, cur, mods("+message.type=NORMAL,+reserve.time=10"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"message.type": "NORMAL", "reserve.time": "10"}, got)
	assert.Equal(t, map[string]string{"message.type": "FIFO"}, cur, "current is not changed")
	got, err = AlterTopicAttributes(false, cur, mods("-message.type"))
	require.NoError(t, err)
	assert.Nil(t, got)
	got, err = AlterTopicAttributes(false, cur, nil)
	require.NoError(t, err)
	assert.Equal(t, cur, got)
	for _, tt := range []struct {
		create bool
		give   string
		want   string
	}{
		{true, "-message.type", "only add attribute is supported while creating topic. key: message.type"},
		{false, "-queue.type", "attempt to delete a nonexistent key: queue.type"},
		{false, "+cleanup.policy=COMPACTION", "attempt to update an unchangeable attribute. key: cleanup.policy"},
		{true, "+cleanup.policy=KEEP", "value is not in set: [DELETE, COMPACTION]"},
		{true, "+reserve.time=-2", "value is not in range(-1, 9223372036854775807)"},
		{true, "+nope=1", "unsupported key: nope"},
	} {
		_, err := AlterTopicAttributes(tt.create, cur, mods(tt.give))
		assert.EqualError(t, err, tt.want, tt.give)
	}
}

// TestTopicConfigAttributesJSON: the field as Java's TopicConfig writes it.
func TestTopicConfigAttributesJSON(t *testing.T) {
	var c TopicConfig
	require.NoError(t, json.Unmarshal([]byte(`{"topicName":"T","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{"+message.type":"FIFO"}}`), &c))
	assert.Equal(t, map[string]string{"+message.type": "FIFO"}, c.Attributes)
	c.Attributes = map[string]string{AttrMessageType: MessageTypeFIFO}
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"attributes":{"message.type":"FIFO"}`)
	assert.Equal(t, MessageTypeFIFO, c.MessageType())
	assert.Equal(t, MessageTypeNormal, (&TopicConfig{}).MessageType())
	o := c
	o.Attributes = map[string]string{AttrMessageType: MessageTypeDelay}
	assert.False(t, c.Equal(&o))
	o.Attributes = map[string]string{AttrMessageType: MessageTypeFIFO}
	assert.True(t, c.Equal(&o))
}
