package acl

import (
	"context"
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

const hbBody = `{"clientID":"192.0.2.2@16632","producerDataSet":[{"groupName":"PG1"}],
 "consumerDataSet":[{"groupName":"CG1","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
   "consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[
     {"classFilterMode":false,"topic":"TopicA","subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"subVersion":1796214814246119280,"expressionType":"TAG"},
     {"classFilterMode":false,"topic":"%RETRY%CG1","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1796214814246157946,"expressionType":"TAG"}],
   "unitMode":false},
  {"groupName":"CG2","subscriptionDataSet":[{"topic":"TopicB"},{"topic":"TopicA"}]}]}`

// stored is the commit log of the tests: offset -> message.
var storedMsgs = map[int64]auth.StoredMessage{
	100: {Topic: "T"},
	200: {Topic: "RMQ_SYS_TRANS_HALF_TOPIC", RealTopic: "TX"},
	300: {Topic: "%RETRY%CG"},
}

func lookup(_ context.Context, off int64) (auth.StoredMessage, error) {
	m, ok := storedMsgs[off]
	if !ok {
		return m, errors.New("no such offset")
	}
	return m, nil
}

var requiredTests = []struct {
	name string
	code int32
	ext  map[string]string
	body string
	want []Need
	kind Kind
}{
	{name: "send", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "PG", "topic": "T"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send to retry topic", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "CLIENT_INNER_PRODUCER", "topic": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "send to DLQ topic", code: remoting.SendMessage, ext: map[string]string{"topic": "%DLQ%CG"}, want: []Need{topicN("%DLQ%CG", auth.Pub)}},
	{name: "send trace", code: remoting.SendMessage, ext: map[string]string{"topic": "RMQ_SYS_TRACE_TOPIC"}, want: []Need{topicN("RMQ_SYS_TRACE_TOPIC", auth.Pub)}},
	{name: "send v2", code: remoting.SendMessageV2, ext: map[string]string{"a": "PG", "b": "T"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send v2 retry", code: remoting.SendMessageV2, ext: map[string]string{"a": "CLIENT_INNER_PRODUCER", "b": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "send batch", code: remoting.SendBatchMessage, ext: map[string]string{"a": "PG", "b": "T", "m": "true"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send reply", code: remoting.SendReplyMessageV2, ext: map[string]string{"a": "PG", "b": "T"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "send back", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "CG", "offset": "100"}, want: []Need{groupN("CG"), topicN("T", auth.Sub)}},
	{name: "send back a retry", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "CG", "offset": "300"}, want: []Need{groupN("CG")}},
	{name: "pull", code: remoting.PullMessage, ext: map[string]string{"consumerGroup": "CG", "topic": "T"}, want: []Need{topicN("T", auth.Sub), groupN("CG")}},
	{name: "pull retry topic", code: remoting.PullMessage, ext: map[string]string{"consumerGroup": "CG", "topic": "%RETRY%CG"}, want: []Need{groupN("CG")}},
	{name: "query message", code: remoting.QueryMessage, ext: map[string]string{"topic": "T", "key": "k"}, want: []Need{topicN("T", auth.Sub)}},
	{name: "view message", code: remoting.ViewMessageByID, ext: map[string]string{"offset": "100"}, want: []Need{topicN("T", auth.Sub)}},
	{name: "view half message", code: remoting.ViewMessageByID, ext: map[string]string{"offset": "200"}, want: []Need{topicN("RMQ_SYS_TRANS_HALF_TOPIC", auth.Sub)}},
	{
		name: "heartbeat", code: remoting.HeartBeat, body: hbBody,
		want: []Need{groupN("CG1"), groupN("CG2"), topicN("TopicA", auth.Sub), topicN("TopicB", auth.Sub)},
	},
	{name: "heartbeat producers only", code: remoting.HeartBeat, body: `{"clientID":"c","producerDataSet":[{"groupName":"PG"}],"consumerDataSet":[]}`}, // 4.9: producer groups are not checked (narrow.go)
	{name: "heartbeat inner producer", code: remoting.HeartBeat, body: `{"clientID":"c","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"consumerDataSet":[]}`},
	{name: "heartbeat without consumers", code: remoting.HeartBeat, body: `{"clientID":"c"}`},
	{name: "heartbeat other key case", code: remoting.HeartBeat, body: `{"ConsumerDataSet":[{"GroupName":"CG","subscriptionDataSet":[]}]}`, want: []Need{groupN("CG")}},
	{name: "unregister client", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "consumerGroup": "CG"}, want: []Need{groupN("CG")}},
	{name: "unregister producer", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "producerGroup": "PG"}},
	{name: "consumer list", code: remoting.GetConsumerListByGroup, ext: map[string]string{"consumerGroup": "CG"}, want: []Need{groupN("CG")}},
	{name: "update offset", code: remoting.UpdateConsumerOffset, ext: map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "1", "commitOffset": "5"}, want: []Need{groupN("CG"), topicN("T", auth.Sub)}},
	{name: "query offset", code: remoting.QueryConsumerOffset, ext: map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "1"}, want: []Need{groupN("CG"), topicN("T", auth.Sub)}},
	{name: "max offset", code: remoting.GetMaxOffset, ext: map[string]string{"topic": "T", "queueId": "0"}, want: []Need{topicN("T", auth.Sub)}},
	{name: "max offset of retry", code: remoting.GetMaxOffset, ext: map[string]string{"topic": "%RETRY%CG", "queueId": "0"}, want: []Need{groupN("CG")}},
	{
		name: "lock", code: remoting.LockBatchMQ, body: `{"consumerGroup":"CG","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"U","brokerName":"b","queueId":1}]}`,
		want: []Need{groupN("CG"), topicN("T", auth.Sub), topicN("U", auth.Sub)},
	},
	{name: "unlock", code: remoting.UnlockBatchMQ, body: `{"consumerGroup":"CG","clientId":"c","mqSet":[]}`, want: []Need{groupN("CG")}},
	{name: "end transaction", code: remoting.EndTransaction, ext: map[string]string{"producerGroup": "PG", "commitOrRollback": "8", "commitLogOffset": "200"},
		want: []Need{{Resource: auth.Resource{Name: "%RETRY%PG", IsGroup: true}, Action: auth.Any}, topicN("TX", auth.Pub)}},
	{name: "recall", code: remoting.RecallMessage, ext: map[string]string{"producerGroup": "PG", "topic": "T", "recallHandle": "djEgVCBiIDEgaWQ=", "bname": "b"},
		want: []Need{topicN("T", auth.Pub)}},
	{name: "recall without producer group", code: remoting.RecallMessage, ext: map[string]string{"topic": "T", "recallHandle": "x"}, want: []Need{topicN("T", auth.Pub)}},
	{name: "topic config", code: remoting.GetTopicConfig, ext: map[string]string{"topic": "T", "lo": "true", "bname": "b"}, want: []Need{topicN("T", auth.Any)}},
	{name: "resend DLQ", code: remoting.ResendDLQ, ext: map[string]string{"group": "CG", "all": "true"}, want: []Need{groupN("CG")}},
	{name: "consume stats", code: remoting.GetConsumeStats, ext: map[string]string{"consumerGroup": "CG"}, want: []Need{groupN("CG")}},
	{name: "create topic", code: remoting.UpdateAndCreateTopic, ext: map[string]string{"topic": "T"}, kind: AdminOnly},
	{name: "route info", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "T"}, kind: Public},
	{name: "register broker", code: remoting.RegisterBroker, kind: ClusterOnly},
	{name: "HA pull", code: remoting.HAPull, kind: ClusterOnly},
	{name: "all topic config", code: remoting.GetAllTopicConfig, kind: AdminOrCluster},
	{name: "check transaction state", code: remoting.CheckTransactionState, kind: Refused},
}

func TestRequired(t *testing.T) {
	for _, tt := range requiredTests {
		t.Run(tt.name, func(t *testing.T) {
			rule, got, err := Required(context.Background(), auth.Request{Code: tt.code, ExtFields: tt.ext, Body: []byte(tt.body), Lookup: lookup})
			require.NoError(t, err)
			want := tt.kind
			if want == 0 {
				want = Resources
			}
			assert.Equal(t, want, rule.Kind)
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}

// Every RocketMQ 4.9.x code and every Quiver code has exactly one row,
// and each row is well formed.
func TestRulesCoverEveryCode(t *testing.T) {
	rows := map[int32]bool{}
	for _, r := range Rules() {
		rows[r.Code] = true
		assert.NotContains(t, r.Name(), "UNKNOWN", "code %d", r.Code)
		switch r.Kind {
		case Resources:
			assert.NotEmpty(t, r.Needs, r.Name())
			for _, s := range r.Needs {
				assert.Contains(t, []auth.Action{auth.Pub, auth.Sub, auth.Any}, s.Perm, r.Name())
				assert.NotEmpty(t, s.Path, r.Name())
			}
		case Public, Refused:
			assert.NotEmpty(t, r.Reason, "%s: a %s row says why", r.Name(), r.Kind)
			assert.Empty(t, r.Needs, r.Name())
		default:
			assert.Empty(t, r.Needs, r.Name())
		}
	}
	for _, c := range []int32{remoting.SendMessage, remoting.RecallMessage, remoting.HAPull, remoting.AuthListACL} {
		assert.True(t, rows[c], "request code %d (%s) has no row in the permission table", c, remoting.RequestCodeName(c))
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
		{name: "unknown code", code: 9999, want: "request code 9999 (UNKNOWN_9999) is not in the permission table"},
		{name: "send without topic", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "PG"}, want: "SEND_MESSAGE (10): the topic field is missing"},
		{name: "send with empty topic", code: remoting.SendMessage, ext: map[string]string{"topic": ""}, want: "the topic field is missing"},
		{name: "send nil ext", code: remoting.SendMessage, want: "the topic field is missing"},
		{name: "batch without b", code: remoting.SendBatchMessage, ext: map[string]string{"topic": "T"}, want: "SEND_BATCH_MESSAGE (320): the b field is missing"},
		{name: "recall without topic", code: remoting.RecallMessage, ext: map[string]string{"producerGroup": "PG", "recallHandle": "x"}, want: "RECALL_MESSAGE (370): the topic field is missing"},
		{name: "topic config without topic", code: remoting.GetTopicConfig, ext: map[string]string{"lo": "false"}, want: "GET_TOPIC_CONFIG (351): the topic field is missing"},
		{name: "pull without group", code: remoting.PullMessage, ext: map[string]string{"topic": "T"}, want: "the consumerGroup field is missing"},
		{name: "send back without group", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"offset": "100"}, want: "the group field is missing"},
		{name: "send back without offset", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "CG"}, want: "the offset field"},
		{name: "view bad offset", code: remoting.ViewMessageByID, ext: map[string]string{"offset": "x"}, want: "the offset field"},
		{name: "view missing message", code: remoting.ViewMessageByID, ext: map[string]string{"offset": "7"}, want: "no message at commit-log offset 7"},
		{name: "heartbeat not JSON", code: remoting.HeartBeat, body: "{", want: "HEART_BEAT (34): the body is not JSON"},
		{name: "heartbeat empty", code: remoting.HeartBeat, want: "the body is not JSON"},
		{name: "heartbeat two values", code: remoting.HeartBeat, body: "{} {}", want: "not one JSON value"},
		{name: "heartbeat wrong shape", code: remoting.HeartBeat, body: `{"consumerDataSet":{"a":1}}`, want: "is not a list"},
		{name: "heartbeat null consumer", code: remoting.HeartBeat, body: `{"consumerDataSet":[null]}`, want: "no object holding"},
		{name: "heartbeat no group", code: remoting.HeartBeat, body: `{"consumerDataSet":[{"subscriptionDataSet":[]}]}`, want: "the body has no consumerDataSet[].groupName"},
		{name: "heartbeat numeric group", code: remoting.HeartBeat, body: `{"consumerDataSet":[{"groupName":5}]}`, want: "the body has no consumerDataSet[].groupName"},
		{name: "heartbeat no topic", code: remoting.HeartBeat, body: `{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{}]}]}`, want: "has no consumerDataSet[].subscriptionDataSet[].topic"},
		{name: "lock without group", code: remoting.LockBatchMQ, body: `{"clientId":"c","mqSet":[]}`, want: "the body has no consumerGroup"},
		{
			name: "lock with two spellings", code: remoting.LockBatchMQ,
			body: `{"consumerGroup":"Mine","ConsumerGroup":"Victim","clientId":"c","mqSet":[]}`, want: "spelt twice",
		},
		{name: "end transaction elsewhere", code: remoting.EndTransaction, ext: map[string]string{"producerGroup": "PG", "commitLogOffset": "100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Required(context.Background(), auth.Request{Code: tt.code, ExtFields: tt.ext, Body: []byte(tt.body), Lookup: lookup})
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, auth.ErrDenied))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("no lookup", func(t *testing.T) {
		_, _, err := Required(context.Background(), auth.Request{Code: remoting.ViewMessageByID, ExtFields: map[string]string{"offset": "100"}})
		require.ErrorIs(t, err, auth.ErrDenied)
		assert.Contains(t, err.Error(), "cannot read the message")
	})
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
