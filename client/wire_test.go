package client

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
