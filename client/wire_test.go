package client

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// TestSignature checks ACL signing against the spec's worked example
// (§8.1): GET_ROUTEINFO of TopicA with ak/sk.
func TestSignature(t *testing.T) {
	c := &Client{opts: options{accessKey: "ak", secretKey: "sk", securityToken: "tok"}}
	req := NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TopicA"}, nil)
	c.sign(req)
	assert.Equal(t, "LaFvs8ZmttDE4nOZYPB8+nLiOHA=", req.Ext("Signature"))
	assert.Equal(t, "ak", req.Ext("AccessKey"))
	assert.Equal(t, "tok", req.Ext("SecurityToken"), "sent, not signed, like the official Go client")
	assert.Equal(t, "GO", req.Language)
	assert.EqualValues(t, 317, req.Version)
}

type fakeConsumer struct{}

func (fakeConsumer) ConsumerData() HeartbeatConsumer {
	return HeartbeatConsumer{GroupName: "CG1", ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
		ConsumeFromWhere:    "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []HeartbeatSubscription{NewSubscription("TopicA", "TAG", "TagA || TagB")}}
}
func (fakeConsumer) SubscribedTopics() []string                 { return nil }
func (fakeConsumer) IDsChanged()                                {}
func (fakeConsumer) ResetOffset(string, map[MessageQueue]int64) {}
func (fakeConsumer) Offsets(string) map[MessageQueue]int64      { return nil }

// TestHeartbeatBody checks the heartbeat JSON against the captured
// official body (§4.8): key names and order, codeSet as strings,
// subVersion as an integer.
func TestHeartbeatBody(t *testing.T) {
	c := &Client{id: "192.0.2.2@16632", producers: map[string]ProducerHandler{"PG1": nil}, consumers: map[string]ConsumerHandler{"CG1": fakeConsumer{}}}
	hb, hasConsumers := c.heartbeatData()
	assert.True(t, hasConsumers)
	b, err := json.Marshal(hb)
	require.NoError(t, err)
	assert.Regexp(t, `^\{"clientID":"192.0.2.2@16632","producerDataSet":\[\{"groupName":"PG1"\}\],"consumerDataSet":\[\{"groupName":"CG1","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":\[\{"classFilterMode":false,"topic":"TopicA","subString":"TagA \|\| TagB","tagsSet":\["TagA","TagB"\],"codeSet":\["2598919","2598920"\],"subVersion":\d+,"expressionType":"TAG"\}\],"unitMode":false\}\]\}$`, string(b))
}

// TestDecodeEachMatchesDecodeMessages: DecodeEach hands the same messages
// as DecodeMessages, in order, whatever the previous one left in the
// reused message (properties of another shape, retry topics, a
// compressed body, hosts that change).
func TestDecodeEachMatchesDecodeMessages(t *testing.T) {
	var body []byte
	for i := 0; i < 6; i++ {
		props := message.Properties{message.PropertyUniqKey: fmt.Sprint("U", i)}
		if i%2 == 0 {
			props[message.PropertyTags], props["extra"] = "T", fmt.Sprint("x", i)
		}
		m := &message.Ext{Message: message.Message{Topic: "Each", Body: []byte(fmt.Sprint("body-", i)), Properties: props},
			QueueID: 1, QueueOffset: int64(i), StoreHost: netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:10911", 1+i/3)),
			BornHost: netip.MustParseAddrPort("10.1.0.1:5000"), CommitLogOffset: int64(1000 * i)}
		if i == 3 {
			m.Topic = "%RETRY%G"
			m.Properties[message.PropertyRetryTopic] = "Each"
		}
		if i == 4 {
			z, err := message.Deflate(m.Body, 5)
			require.NoError(t, err)
			m.Body, m.SysFlag = z, message.FlagCompressed
		}
		enc, err := message.EncodeStored(m)
		require.NoError(t, err)
		body = append(body, enc...)
	}
	want, err := DecodeMessages(body, "b")
	require.NoError(t, err)
	var got []MessageExt
	require.NoError(t, DecodeEach(body, "b", func(m *MessageExt) bool {
		c := *m
		c.Properties = maps.Clone(m.Properties)
		c.Body = append([]byte(nil), m.Body...)
		got = append(got, c)
		return true
	}))
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, *want[i], got[i], "message %d", i)
	}
	n := 0
	require.NoError(t, DecodeEach(body, "b", func(*MessageExt) bool { n++; return n < 2 }))
	assert.Equal(t, 2, n, "false stops the walk")
	assert.Error(t, DecodeEach(body[:len(body)-3], "b", func(*MessageExt) bool { return true }))
}
