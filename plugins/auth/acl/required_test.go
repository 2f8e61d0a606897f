package acl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

func topicN(name string, act auth.Action) Need {
	return Need{Resource: auth.Resource{Name: name}, Action: act}
}

func groupN(g string) Need {
	return Need{Resource: auth.Resource{Name: "%RETRY%" + g, IsGroup: true}, Action: auth.Sub}
}

var adminN = Need{Action: auth.Admin}

const hbBody = `{"clientID":"192.0.2.2@16632","producerDataSet":[{"groupName":"PG1"}],
 "consumerDataSet":[{"groupName":"CG1","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
   "consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[
     {"classFilterMode":false,"topic":"TopicA","subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"subVersion":1796214814246119280,"expressionType":"TAG"},
     {"classFilterMode":false,"topic":"%RETRY%CG1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1796214814246157946,"expressionType":"TAG"}],
   "unitMode":false},
  {"groupName":"CG2","subscriptionDataSet":[{"topic":"TopicB"},{"topic":"TopicA"}]}]}`

var requiredTests = []struct {
	name string
	code int32
	ext  map[string]string
	body string
	want []Need
}{
	{name: "send", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "PG", "topic": "T"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send to retry topic", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "CLIENT_INNER_PRODUCER", "topic": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "send to DLQ topic", code: remoting.SendMessage, ext: map[string]string{"topic": "%DLQ%CG"}, want: []Need{topicN("%DLQ%CG", auth.Pub)}},
	{name: "send trace", code: remoting.SendMessage, ext: map[string]string{"topic": "RMQ_SYS_TRACE_TOPIC"}, want: []Need{topicN("RMQ_SYS_TRACE_TOPIC", auth.Pub)}},
	{name: "send v2", code: remoting.SendMessageV2, ext: map[string]string{"a": "PG", "b": "T"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send v2 retry", code: remoting.SendMessageV2, ext: map[string]string{"a": "CLIENT_INNER_PRODUCER", "b": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "send batch", code: remoting.SendBatchMessage, ext: map[string]string{"a": "PG", "b": "T", "m": "true"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send back", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "CG", "originTopic": "T"}, want: []Need{groupN("CG")}},
	{name: "pull", code: remoting.PullMessage, ext: map[string]string{"consumerGroup": "CG", "topic": "T"}, want: []Need{topicN("T", auth.Sub), groupN("CG")}},
	{name: "pull retry topic", code: remoting.PullMessage, ext: map[string]string{"consumerGroup": "CG", "topic": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "query message", code: remoting.QueryMessage, ext: map[string]string{"topic": "T", "key": "k"}, want: []Need{topicN("T", auth.Sub)}},
	{
		name: "heartbeat", code: remoting.HeartBeat, body: hbBody,
		want: []Need{groupN("CG1"), topicN("TopicA", auth.Sub), groupN("CG2"), topicN("TopicB", auth.Sub)},
	},
	{name: "heartbeat producers only", code: remoting.HeartBeat, body: `{"clientID":"c","producerDataSet":[{"groupName":"PG"}],"consumerDataSet":[]}`},
	{name: "unregister client", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "consumerGroup": "CG"}, want: []Need{groupN("CG")}},
	{name: "unregister producer", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "producerGroup": "PG"}},
	{name: "consumer list", code: remoting.GetConsumerListByGroup, ext: map[string]string{"consumerGroup": "CG"}, want: []Need{groupN("CG")}},
	{name: "update offset", code: remoting.UpdateConsumerOffset, ext: map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "1", "commitOffset": "5"}, want: []Need{groupN("CG"), topicN("T", auth.Sub)}},
	{name: "query offset", code: remoting.QueryConsumerOffset, ext: map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "1"}, want: []Need{groupN("CG"), topicN("T", auth.Sub)}},
	{name: "end transaction", code: remoting.EndTransaction, ext: map[string]string{"producerGroup": "PG", "commitOrRollback": "8"}},
	{name: "create topic", code: remoting.UpdateAndCreateTopic, ext: map[string]string{"topic": "T"}, want: []Need{adminN}},
	{name: "update broker config", code: remoting.UpdateBrokerConfig, want: []Need{adminN}},
	{name: "delete topic in broker", code: remoting.DeleteTopicInBroker, ext: map[string]string{"topic": "T"}, want: []Need{adminN}},
	{name: "create group", code: remoting.UpdateAndCreateSubscriptionGroup, want: []Need{adminN}},
	{name: "delete group", code: remoting.DeleteSubscriptionGroup, ext: map[string]string{"groupName": "G"}, want: []Need{adminN}},
	{name: "delete topic in namesrv", code: remoting.DeleteTopicInNamesrv, ext: map[string]string{"topic": "T"}, want: []Need{adminN}},
	{name: "reset offset", code: remoting.InvokeBrokerToResetOffset, ext: map[string]string{"topic": "T", "group": "G"}, want: []Need{adminN}},
	// Codes outside the table need only the signature.
	{name: "route info", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "T"}},
	{name: "register broker", code: remoting.RegisterBroker},
	{name: "max offset", code: remoting.GetMaxOffset, ext: map[string]string{"topic": "T", "queueId": "0"}},
	{name: "lock", code: remoting.LockBatchMQ, body: `{"consumerGroup":"CG"}`},
	{name: "unknown code", code: 9999},
}

func TestRequired(t *testing.T) {
	for _, tt := range requiredTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Required(auth.Request{Code: tt.code, ExtFields: tt.ext, Body: []byte(tt.body)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Every code of the table has a case above.
func TestRequiredCoversTable(t *testing.T) {
	tested := map[int32]bool{}
	for _, tt := range requiredTests {
		tested[tt.code] = true
	}
	for code, r := range requirements {
		assert.True(t, tested[code], "code %d (%s) has no case in requiredTests", code, r.name)
		assert.NotEmpty(t, r.name)
		assert.Equal(t, r.name, CodeName(code))
	}
}

func TestRequiredMalformed(t *testing.T) {
	tests := []struct {
		name string
		code int32
		ext  map[string]string
		body string
		want string
	}{
		{name: "send without topic", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "PG"}, want: "SEND_MESSAGE (10): the topic field is missing"},
		{name: "send with empty topic", code: remoting.SendMessage, ext: map[string]string{"topic": ""}, want: "the topic field is missing"},
		{name: "send nil ext", code: remoting.SendMessage, want: "the topic field is missing"},
		{name: "batch without b", code: remoting.SendBatchMessage, ext: map[string]string{"topic": "T"}, want: "SEND_BATCH_MESSAGE (320): the b field is missing"},
		{name: "pull without group", code: remoting.PullMessage, ext: map[string]string{"topic": "T"}, want: "the consumerGroup field is missing"},
		{name: "send back without group", code: remoting.ConsumerSendMsgBack, want: "the group field is missing"},
		{name: "heartbeat not JSON", code: remoting.HeartBeat, body: "{", want: "HEART_BEAT (34): the body is not heartbeat JSON"},
		{name: "heartbeat empty", code: remoting.HeartBeat, want: "not heartbeat JSON"},
		{name: "heartbeat wrong shape", code: remoting.HeartBeat, body: `{"consumerDataSet":{"a":1}}`, want: "not heartbeat JSON"},
		{name: "heartbeat null consumer", code: remoting.HeartBeat, body: `{"consumerDataSet":[null]}`, want: "a consumer has no groupName"},
		{name: "heartbeat no group", code: remoting.HeartBeat, body: `{"consumerDataSet":[{"subscriptionDataSet":[]}]}`, want: "a consumer has no groupName"},
		{name: "heartbeat no topic", code: remoting.HeartBeat, body: `{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{}]}]}`, want: "a subscription of group G has no topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Required(auth.Request{Code: tt.code, ExtFields: tt.ext, Body: []byte(tt.body)})
			require.Error(t, err)
			assert.True(t, errors.Is(err, auth.ErrDenied))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestCheckPermission(t *testing.T) {
	tests := []struct {
		needed, owned byte
		want          bool
	}{
		{PermPub, PermPub, true},
		{PermPub, PermSub, false},
		{PermSub, PermSub, true},
		{PermSub, PermPub | PermSub, true},
		{PermPub, PermPub | PermSub, true},
		{PermPub, PermDeny, false},
		{PermPub, PermDeny | PermPub, false},
		{PermAny, PermPub, true},
		{PermAny, PermSub, true},
		{PermAny, PermDeny, false},
		{PermAny, 0, false},
		{PermPub, 0, false},
		{PermPub | PermSub, PermSub, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, CheckPermission(tt.needed, tt.owned), "needed %s owned %s", permString(tt.needed), permString(tt.owned))
	}
}

func TestParsePerm(t *testing.T) {
	tests := []struct {
		give string
		want byte
	}{
		{"", PermDeny}, {"DENY", PermDeny}, {"PUB", PermPub}, {"SUB", PermSub}, {" PUB ", PermPub},
		{"PUB|SUB", PermPub | PermSub}, {"SUB|PUB", PermPub | PermSub},
	}
	for _, tt := range tests {
		got, err := parsePerm(tt.give)
		require.NoError(t, err, tt.give)
		assert.Equal(t, tt.want, got, tt.give)
	}
	for _, bad := range []string{"ANY", "pub", "PUB|", "PUB SUB", "PUB|SUB|DENY"} {
		_, err := parsePerm(bad)
		assert.Error(t, err, bad)
	}
}
