package retry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// TestSendBackKeepsPriority: a 4.x consumer's sent-back message keeps its
// priority property, and when the group's retry topic is a PRIORITY topic
// it goes to the queue of its level there (not behind every retried low
// message in one queue); a plain retry topic keeps RocketMQ's placement.
func TestSendBackKeepsPriority(t *testing.T) {
	s, b, st := newService(t, NewConfig())
	_, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: protocol.RetryTopic("GP"), ReadQueueNums: 4, WriteQueueNums: 4,
		Perm: protocol.PermRead | protocol.PermWrite, Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypePriority}})
	require.NoError(t, err)
	for _, p := range []string{"0", "3", "7"} {
		off := put(t, b, &message.Ext{Message: message.Message{Topic: "T", Properties: message.Properties{
			message.PropertyUniqKey: "U" + p, message.PropertyPriority: p}, Body: []byte("p" + p)}, QueueOffset: 1})
		for _, g := range []string{"GP", "G"} {
			resp := sendBack(s, g, off, 0, 16)
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		}
	}
	want := map[int32]string{0: "p0", 3: "p3"}
	for q, body := range want {
		var res store.ReadResult
		require.NoError(t, st.Read(context.Background(), store.Queue{Topic: protocol.RetryTopic("GP"), ID: q}, 0, store.ReadOptions{MaxMessages: 10}, &res))
		var got []string
		for _, rec := range res.Records {
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err)
			got = append(got, string(m.Body))
			assert.NotEmpty(t, m.Properties[message.PropertyPriority])
		}
		if q == 3 {
			assert.Equal(t, []string{"p3", "p7"}, got, "levels past the top share the top queue")
		} else {
			assert.Equal(t, []string{body}, got)
		}
	}
	plain := readAll(t, st, protocol.RetryTopic("G"))
	require.Len(t, plain, 3, "the plain retry topic's one queue")
	assert.Equal(t, "7", plain[2].Properties[message.PropertyPriority])
}
