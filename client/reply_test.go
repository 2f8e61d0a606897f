package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
)

// NewReply builds what Java's MessageUtil.createReplyMessage builds.
func TestNewReply(t *testing.T) {
	req := &MessageExt{Message: Message{Topic: "T", Properties: map[string]string{
		message.PropertyCluster: "C1", PropertyCorrelationID: "id-1", PropertyReplyToClient: "10.0.0.1@x",
		PropertyMessageTTL: "3000", "user": "u",
	}}}
	r, err := NewReply(req, []byte("answer"))
	require.NoError(t, err)
	assert.Equal(t, "C1_REPLY_TOPIC", r.Topic)
	assert.Equal(t, "answer", string(r.Body))
	assert.Equal(t, map[string]string{PropertyMessageType: "reply", PropertyCorrelationID: "id-1",
		PropertyReplyToClient: "10.0.0.1@x", PropertyMessageTTL: "3000"}, r.Properties)
	assert.True(t, IsReply(r))

	_, err = NewReply(&MessageExt{Message: Message{Properties: map[string]string{}}}, nil)
	assert.ErrorContains(t, err, "CLUSTER")
	_, err = NewReply(nil, nil)
	assert.Error(t, err)
}

// A PUSH_REPLY_MESSAGE_TO_CLIENT as a Java broker sends it reaches the
// request waiting on its correlation id, body inflated; the answer is
// SUCCESS whether or not anyone waits.
func TestHandlePushReply(t *testing.T) {
	c, err := New(WithNameServers("127.0.0.1:1"), WithDialer(func(context.Context, string) (transport.Conn, error) {
		return nil, errors.New("no network in this test")
	}))
	require.NoError(t, err)
	defer c.Close()

	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write([]byte("the answer"))
	require.NoError(t, w.Close())
	props := "CORRELATION_ID\x01id-7\x02MSG_TYPE\x01reply\x02PUSH_REPLY_TIME\x011700000000999\x02"
	push := remoting.NewRequest(remoting.PushReplyMessageToClient, map[string]string{
		"producerGroup": "PG", "topic": "C_REPLY_TOPIC", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "1", "bornTimestamp": "1700000000111", "flag": "0", "properties": props,
		"reconsumeTimes": "0", "unitMode": "false", "bornHost": "10.0.0.2:5000", "storeHost": "10.0.0.3:10911",
		"storeTimestamp": "1700000000999",
	}, z.Bytes())

	got := make(chan *MessageExt, 1)
	forget := c.ExpectReply("id-7", func(m *MessageExt) { got <- m })
	defer forget()
	resp := c.handle(t.Context(), nil, push)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.Success, resp.Code)
	m := <-got
	assert.Equal(t, "the answer", string(m.Body))
	assert.Equal(t, "C_REPLY_TOPIC", m.Topic)
	assert.Equal(t, "10.0.0.2:5000", m.BornHost)
	assert.Equal(t, "10.0.0.3:10911", m.StoreHost)
	assert.EqualValues(t, 1700000000111, m.BornTimestamp.UnixMilli())
	assert.EqualValues(t, 1700000000999, m.StoreTimestamp.UnixMilli())
	assert.Equal(t, "id-7", m.Property(PropertyCorrelationID))
	assert.NotEmpty(t, m.Property(PropertyReplyArriveTime))

	// Delivered once: a second push of the same id finds nobody waiting.
	assert.Equal(t, remoting.Success, c.handle(t.Context(), nil, push).Code)
	assert.Empty(t, got)

	bad := remoting.NewRequest(remoting.PushReplyMessageToClient, map[string]string{"queueId": "x"}, nil)
	resp = c.handle(t.Context(), nil, bad)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "process reply message fail", resp.Remark)
}
