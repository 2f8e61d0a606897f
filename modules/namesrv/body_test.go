package namesrv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
)

func TestParseTopicConfig(t *testing.T) {
	tests := []struct {
		name string
		give string
		want *protocol.TopicConfig
	}{
		{name: "java 4.x", give: "TopicA 4 8 6 SINGLE_TAG",
			want: &protocol.TopicConfig{TopicName: "TopicA", ReadQueueNums: 4, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG"}},
		{name: "java 5.x with attributes", give: `TopicA 4 4 6 SINGLE_TAG {"+message.type":"NORMAL"}`,
			want: &protocol.TopicConfig{TopicName: "TopicA", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG"}},
		{name: "java 5.x trailing separator", give: "TopicA 4 4 6 SINGLE_TAG ",
			want: &protocol.TopicConfig{TopicName: "TopicA", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG"}},
		{name: "json", give: `{"topicName":"TopicA","readQueueNums":2,"writeQueueNums":2,"perm":7,"topicSysFlag":1}`,
			want: &protocol.TopicConfig{TopicName: "TopicA", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 7, TopicSysFlag: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTopicConfig([]byte(tt.give))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseTopicConfigErrors(t *testing.T) {
	for _, give := range []string{"", "TopicA 4 4 6", "TopicA x 4 6 SINGLE_TAG", " 4 4 6 SINGLE_TAG", `{"perm":6}`, "{"} {
		t.Run(give, func(t *testing.T) {
			_, err := parseTopicConfig([]byte(give))
			assert.ErrorIs(t, err, errBadBody)
		})
	}
}

func TestDecodeRegisterBodyEmpty(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		b, err := decodeRegisterBody(nil, compressed)
		require.NoError(t, err)
		assert.NotNil(t, b.TopicConfigSerializeWrapper.TopicConfigTable)
		assert.Zero(t, b.TopicConfigSerializeWrapper.DataVersion)
	}
}

func FuzzDecodeRegisterBody(f *testing.F) {
	f.Add(javaCompressed(f, brokerA.wrapper(), []string{"a"}, false), true)
	f.Add(javaCompressed(f, brokerA.wrapper(), nil, true), true)
	f.Add([]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"A"}}}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, compressed bool) {
		b, err := decodeRegisterBody(body, compressed)
		if err != nil {
			assert.ErrorIs(t, err, errBadBody)
			return
		}
		assert.NotNil(t, b.TopicConfigSerializeWrapper.TopicConfigTable)
	})
}
