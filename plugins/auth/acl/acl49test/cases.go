// Package acl49test holds RocketMQ 4.9.8's ACL 1.0 decisions on a table of
// requests, for the tests of ACL 1.0 (plugins/auth/acl) and of ACL 2.0
// after migrating the same file (plugins/auth/acl/acl2): both must decide
// every case as 4.9 does.
package acl49test

import (
	"context"
	_ "embed"
	"maps"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// Case is one request and RocketMQ 4.9.8's decision on it under
// plain_acl_4.9.8.yml (Sample), the sample file 4.9.8 ships
// (distribution/conf/plain_acl.yml), copied unchanged. Why names the rule
// of PlainAccessValidator.parse / PlainPermissionManager.validate and
// checkPerm that decides it.
type Case struct {
	Name   string
	Remote string // client address; "" is 172.16.0.9:51234 (no white list)
	AK     string // "" sends no AccessKey (unsigned)
	BadSig bool   // signed with a wrong secret
	Code   int32
	Ext    map[string]string
	Body   string
	Stored string // the topic of the message at any commit-log offset
	Allow  bool
	Why    string
}

// Sample is the 4.9.8 sample file, unchanged.
//
//go:embed plain_acl_4.9.8.yml
var Sample string

// sample49Secret is the secretKey of both accounts of the sample file.
const sample49Secret = "12345678"

func heartbeat(consumers ...[]string) string {
	body := `{"clientID":"172.16.0.9@1","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"consumerDataSet":[`
	for i, c := range consumers {
		if i > 0 {
			body += ","
		}
		body += `{"groupName":"` + c[0] + `","subscriptionDataSet":[`
		for j, t := range c[1:] {
			if j > 0 {
				body += ","
			}
			body += `{"topic":"` + t + `","subString":"*"}`
		}
		body += `]}`
	}
	return body + `]}`
}

func producerHeartbeat(groups ...string) string {
	body := `{"clientID":"172.16.0.9@1","producerDataSet":[`
	for i, g := range groups {
		if i > 0 {
			body += ","
		}
		body += `{"groupName":"` + g + `"}`
	}
	return body + `],"consumerDataSet":[]}`
}

// Cases are the table (issue 43: at least 40).
var Cases = []Case{
	// SEND_MESSAGE / SEND_MESSAGE_V2: PUB on the topic.
	{Name: "send listed PUB|SUB", AK: "RocketMQ", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Allow: true, Why: "topicB=PUB|SUB holds PUB"},
	{Name: "send listed SUB only", AK: "RocketMQ", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicC"}, Why: "topicC=SUB lacks PUB"},
	{Name: "send listed DENY", AK: "RocketMQ", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicA"}, Why: "topicA=DENY"},
	{Name: "send unlisted", AK: "RocketMQ", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicX"}, Why: "defaultTopicPerm: DENY"},
	{Name: "send v2 listed", AK: "RocketMQ", Code: remoting.SendMessageV2, Ext: map[string]string{"a": "PG", "b": "topicB"}, Allow: true, Why: "SEND_MESSAGE_V2 reads b"},
	{Name: "send v2 SUB only", AK: "RocketMQ", Code: remoting.SendMessageV2, Ext: map[string]string{"a": "PG", "b": "topicC"}, Why: "topicC=SUB lacks PUB"},
	{Name: "send trace topic", AK: "RocketMQ", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "RMQ_SYS_TRACE_TOPIC"}, Allow: true, Why: "PUB on RMQ_SYS_TRACE_TOPIC skips the check"},
	{Name: "send v2 trace topic", AK: "RocketMQ", Code: remoting.SendMessageV2, Ext: map[string]string{"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"}, Allow: true, Why: "PUB on RMQ_SYS_TRACE_TOPIC skips the check"},
	// PULL_MESSAGE: SUB on the topic and on the group's retry topic.
	{Name: "pull listed", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicB", "consumerGroup": "groupB"}, Allow: true, Why: "SUB on topicB and %RETRY%groupB"},
	{Name: "pull SUB topic SUB group", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicC", "consumerGroup": "groupC"}, Allow: true, Why: "topicC=SUB, groupC=SUB"},
	{Name: "pull DENY topic", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicA", "consumerGroup": "groupB"}, Why: "topicA=DENY"},
	{Name: "pull DENY group", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicB", "consumerGroup": "groupA"}, Why: "groupA=DENY"},
	{Name: "pull unlisted group", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicB", "consumerGroup": "groupX"}, Allow: true, Why: "defaultGroupPerm: SUB"},
	{Name: "pull unlisted topic", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicX", "consumerGroup": "groupB"}, Why: "defaultTopicPerm: DENY"},
	{Name: "pull retry topic", AK: "RocketMQ", Code: remoting.PullMessage, Ext: map[string]string{"topic": "%RETRY%groupB", "consumerGroup": "groupB"}, Allow: true, Why: "%RETRY%groupB is groupB's, SUB"},
	// QUERY_MESSAGE: SUB on the topic.
	{Name: "query SUB topic", AK: "RocketMQ", Code: remoting.QueryMessage, Ext: map[string]string{"topic": "topicC", "key": "k"}, Allow: true, Why: "topicC=SUB"},
	{Name: "query DENY topic", AK: "RocketMQ", Code: remoting.QueryMessage, Ext: map[string]string{"topic": "topicA", "key": "k"}, Why: "topicA=DENY"},
	// HEART_BEAT: the consumer groups and their subscriptions only.
	{Name: "heartbeat consumer", AK: "RocketMQ", Code: remoting.HeartBeat, Body: heartbeat([]string{"groupB", "topicB", "%RETRY%groupB"}), Allow: true, Why: "SUB on %RETRY%groupB and topicB"},
	{Name: "heartbeat DENY group", AK: "RocketMQ", Code: remoting.HeartBeat, Body: heartbeat([]string{"groupA", "topicB"}), Why: "groupA=DENY"},
	{Name: "heartbeat DENY topic", AK: "RocketMQ", Code: remoting.HeartBeat, Body: heartbeat([]string{"groupB", "topicB"}, []string{"groupC", "topicA"}), Why: "a subscription to topicA=DENY"},
	{Name: "heartbeat unlisted topic", AK: "RocketMQ", Code: remoting.HeartBeat, Body: heartbeat([]string{"groupB", "topicX"}), Why: "defaultTopicPerm: DENY"},
	{Name: "heartbeat producers only", AK: "RocketMQ", Code: remoting.HeartBeat, Body: producerHeartbeat("PG"), Allow: true, Why: "producerDataSet is not read"},
	{Name: "heartbeat DENY producer group", AK: "RocketMQ", Code: remoting.HeartBeat, Body: producerHeartbeat("groupA"), Allow: true, Why: "producerDataSet is not read"},
	{Name: "heartbeat producer and consumer", AK: "RocketMQ", Code: remoting.HeartBeat, Body: `{"clientID":"c","producerDataSet":[{"groupName":"groupA"}],"consumerDataSet":[{"groupName":"groupC","subscriptionDataSet":[{"topic":"topicC"}]}]}`, Allow: true, Why: "only groupC and topicC are checked"},
	// UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP: SUB on the group.
	{Name: "unregister consumer", AK: "RocketMQ", Code: remoting.UnregisterClient, Ext: map[string]string{"clientID": "c", "consumerGroup": "groupB"}, Allow: true, Why: "groupB=PUB|SUB"},
	{Name: "unregister DENY group", AK: "RocketMQ", Code: remoting.UnregisterClient, Ext: map[string]string{"clientID": "c", "consumerGroup": "groupA"}, Why: "groupA=DENY"},
	{Name: "unregister producer only", AK: "RocketMQ", Code: remoting.UnregisterClient, Ext: map[string]string{"clientID": "c", "producerGroup": "groupA"}, Allow: true, Why: "no consumerGroup: getRetryTopic(null) adds nothing"},
	{Name: "consumer list", AK: "RocketMQ", Code: remoting.GetConsumerListByGroup, Ext: map[string]string{"consumerGroup": "groupC"}, Allow: true, Why: "groupC=SUB"},
	{Name: "consumer list DENY group", AK: "RocketMQ", Code: remoting.GetConsumerListByGroup, Ext: map[string]string{"consumerGroup": "groupA"}, Why: "groupA=DENY"},
	// UPDATE_CONSUMER_OFFSET: SUB on the group and the topic.
	{Name: "commit offset", AK: "RocketMQ", Code: remoting.UpdateConsumerOffset, Ext: map[string]string{"consumerGroup": "groupB", "topic": "topicB", "queueId": "0", "commitOffset": "1"}, Allow: true, Why: "SUB on both"},
	{Name: "commit offset DENY topic", AK: "RocketMQ", Code: remoting.UpdateConsumerOffset, Ext: map[string]string{"consumerGroup": "groupB", "topic": "topicA", "queueId": "0", "commitOffset": "1"}, Why: "topicA=DENY"},
	// CONSUMER_SEND_MSG_BACK: SUB on the group.
	{Name: "send back", AK: "RocketMQ", Code: remoting.ConsumerSendMsgBack, Ext: map[string]string{"group": "groupB", "offset": "100"}, Stored: "topicB", Allow: true, Why: "SUB on %RETRY%groupB"},
	{Name: "send back DENY group", AK: "RocketMQ", Code: remoting.ConsumerSendMsgBack, Ext: map[string]string{"group": "groupA", "offset": "100"}, Stored: "topicB", Why: "groupA=DENY"},
	// Codes 4.9 checks the signature of only.
	{Name: "route of a DENY topic", AK: "RocketMQ", Code: remoting.GetRouteInfoByTopic, Ext: map[string]string{"topic": "topicA"}, Allow: true, Why: "GET_ROUTEINFO_BY_TOPIC names no resource"},
	{Name: "query offset", AK: "RocketMQ", Code: remoting.QueryConsumerOffset, Ext: map[string]string{"consumerGroup": "groupB", "topic": "topicB", "queueId": "0"}, Allow: true, Why: "QUERY_CONSUMER_OFFSET names no resource"},
	{Name: "max offset", AK: "RocketMQ", Code: remoting.GetMaxOffset, Ext: map[string]string{"topic": "topicC", "queueId": "0"}, Allow: true, Why: "GET_MAX_OFFSET names no resource"},
	// Permission.ADMIN_CODE.
	{Name: "create topic by a user", AK: "RocketMQ", Code: remoting.UpdateAndCreateTopic, Ext: map[string]string{"topic": "topicB"}, Why: "UPDATE_AND_CREATE_TOPIC needs admin"},
	{Name: "delete topic by a user", AK: "RocketMQ", Code: remoting.DeleteTopicInBroker, Ext: map[string]string{"topic": "topicB"}, Why: "DELETE_TOPIC_IN_BROKER needs admin"},
	{Name: "create group by a user", AK: "RocketMQ", Code: remoting.UpdateAndCreateSubscriptionGroup, Body: `{"groupName":"groupB"}`, Why: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP needs admin"},
	{Name: "delete group by a user", AK: "RocketMQ", Code: remoting.DeleteSubscriptionGroup, Ext: map[string]string{"groupName": "groupB"}, Why: "DELETE_SUBSCRIPTIONGROUP needs admin"},
	{Name: "broker config by a user", AK: "RocketMQ", Code: remoting.UpdateBrokerConfig, Body: "a=b", Why: "UPDATE_BROKER_CONFIG needs admin"},
	{Name: "create topic by admin", AK: "rocketmq2", Code: remoting.UpdateAndCreateTopic, Ext: map[string]string{"topic": "T"}, Allow: true, Why: "admin: true"},
	{Name: "delete group by admin", AK: "rocketmq2", Code: remoting.DeleteSubscriptionGroup, Ext: map[string]string{"groupName": "G"}, Allow: true, Why: "admin: true"},
	// An admin that lists no permissions has them all.
	{Name: "admin sends anywhere", AK: "rocketmq2", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicA"}, Allow: true, Why: "admin with no topicPerms/groupPerms"},
	{Name: "admin pulls anywhere", AK: "rocketmq2", Code: remoting.PullMessage, Ext: map[string]string{"topic": "topicX", "consumerGroup": "groupA"}, Allow: true, Why: "admin with no topicPerms/groupPerms"},
	// Authentication.
	{Name: "unsigned", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Why: "No accessKey is configured"},
	{Name: "unknown access key", AK: "Stranger", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Why: "No acl config for Stranger"},
	{Name: "wrong secret", AK: "RocketMQ", BadSig: true, Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Why: "Check signature failed"},
	{Name: "admin wrong secret", AK: "rocketmq2", BadSig: true, Code: remoting.UpdateAndCreateTopic, Ext: map[string]string{"topic": "T"}, Why: "Check signature failed"},
	// White lists.
	{Name: "global white unsigned", Remote: "192.168.0.5:4000", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicA"}, Allow: true, Why: "globalWhiteRemoteAddresses 192.168.0.*"},
	{Name: "global white admin code", Remote: "10.10.103.7:4000", Code: remoting.UpdateAndCreateTopic, Ext: map[string]string{"topic": "T"}, Allow: true, Why: "globalWhiteRemoteAddresses 10.10.103.*"},
	{Name: "global white wrong secret", Remote: "10.10.103.7:4000", AK: "RocketMQ", BadSig: true, Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicA"}, Allow: true, Why: "the global white list comes first"},
	{Name: "account white wrong secret", Remote: "192.168.1.20:4000", AK: "rocketmq2", BadSig: true, Code: remoting.UpdateAndCreateTopic, Ext: map[string]string{"topic": "T"}, Allow: true, Why: "rocketmq2's whiteRemoteAddress 192.168.1.*"},
	{Name: "other account from that address", Remote: "192.168.1.20:4000", AK: "RocketMQ", BadSig: true, Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Why: "RocketMQ's whiteRemoteAddress is empty: matches nothing"},
	{Name: "account white unsigned", Remote: "192.168.1.20:4000", Code: remoting.SendMessage, Ext: map[string]string{"producerGroup": "PG", "topic": "topicB"}, Why: "an account's white list needs its AccessKey"},
}

// Request builds c's request, signed as 4.9's AclClientRPCHook signs.
func Request(c Case) auth.Request {
	ext := maps.Clone(c.Ext)
	if ext == nil {
		ext = map[string]string{}
	}
	var body []byte
	if c.Body != "" {
		body = []byte(c.Body)
	}
	if c.AK != "" {
		sk := sample49Secret
		if c.BadSig {
			sk = "87654321"
		}
		acl.Sign(ext, body, c.AK, sk, "")
	}
	remote := c.Remote
	if remote == "" {
		remote = "172.16.0.9:51234"
	}
	req := auth.Request{Code: c.Code, RemoteAddr: remote, ExtFields: ext, Body: body}
	if c.Stored != "" {
		topic := c.Stored
		req.Lookup = func(context.Context, int64) (auth.StoredMessage, error) { return auth.StoredMessage{Topic: topic}, nil }
	}
	return req
}
