package remoting

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/quivermq/quiver/core/auth"
)

// Request codes: every RequestCode of Apache RocketMQ 4.9.x (Java
// org.apache.rocketmq.common.protocol.RequestCode), then Quiver's own
// extensions (1000 and up) and the RocketMQ 5 codes Quiver serves. Each has
// one row in codeRows, which holds its name and everything else about it.
const (
	SendMessage                      int32 = 10
	PullMessage                      int32 = 11
	QueryMessage                     int32 = 12
	QueryBrokerOffset                int32 = 13
	QueryConsumerOffset              int32 = 14
	UpdateConsumerOffset             int32 = 15
	UpdateAndCreateTopic             int32 = 17
	GetAllTopicConfig                int32 = 21
	GetTopicConfigList               int32 = 22
	GetTopicNameList                 int32 = 23
	UpdateBrokerConfig               int32 = 25
	GetBrokerConfig                  int32 = 26
	TriggerDeleteFiles               int32 = 27
	GetBrokerRuntimeInfo             int32 = 28
	SearchOffsetByTimestamp          int32 = 29
	GetMaxOffset                     int32 = 30
	GetMinOffset                     int32 = 31
	GetEarliestMsgStoreTime          int32 = 32
	ViewMessageByID                  int32 = 33
	HeartBeat                        int32 = 34
	UnregisterClient                 int32 = 35
	ConsumerSendMsgBack              int32 = 36
	EndTransaction                   int32 = 37
	GetConsumerListByGroup           int32 = 38
	CheckTransactionState            int32 = 39
	NotifyConsumerIDsChanged         int32 = 40
	LockBatchMQ                      int32 = 41
	UnlockBatchMQ                    int32 = 42
	GetAllConsumerOffset             int32 = 43
	GetAllDelayOffset                int32 = 45
	CheckClientConfig                int32 = 46
	UpdateAndCreateACLConfig         int32 = 50
	DeleteACLConfig                  int32 = 51
	GetBrokerClusterACLInfo          int32 = 52
	UpdateGlobalWhiteAddrsConfig     int32 = 53
	GetBrokerClusterACLConfig        int32 = 54
	PutKVConfig                      int32 = 100
	GetKVConfig                      int32 = 101
	DeleteKVConfig                   int32 = 102
	RegisterBroker                   int32 = 103
	UnregisterBroker                 int32 = 104
	GetRouteInfoByTopic              int32 = 105
	GetBrokerClusterInfo             int32 = 106
	UpdateAndCreateSubscriptionGroup int32 = 200
	GetAllSubscriptionGroupConfig    int32 = 201
	GetTopicStatsInfo                int32 = 202
	GetConsumerConnectionList        int32 = 203
	GetProducerConnectionList        int32 = 204
	WipeWritePermOfBroker            int32 = 205
	GetAllTopicListFromNameServer    int32 = 206
	DeleteSubscriptionGroup          int32 = 207
	GetConsumeStats                  int32 = 208
	SuspendConsumer                  int32 = 209
	ResumeConsumer                   int32 = 210
	ResetConsumerOffsetInConsumer    int32 = 211
	ResetConsumerOffsetInBroker      int32 = 212
	AdjustConsumerThreadPool         int32 = 213
	WhoConsumeTheMessage             int32 = 214
	DeleteTopicInBroker              int32 = 215
	DeleteTopicInNamesrv             int32 = 216
	GetKVListByNamespace             int32 = 219
	ResetConsumerClientOffset        int32 = 220
	GetConsumerStatusFromClient      int32 = 221
	InvokeBrokerToResetOffset        int32 = 222
	InvokeBrokerToGetConsumerStatus  int32 = 223
	GetTopicsByCluster               int32 = 224
	QueryTopicConsumeByWho           int32 = 300
	RegisterFilterServer             int32 = 301
	RegisterMessageFilterClass       int32 = 302
	QueryConsumeTimeSpan             int32 = 303
	GetSystemTopicListFromNS         int32 = 304
	GetSystemTopicListFromBroker     int32 = 305
	CleanExpiredConsumeQueue         int32 = 306
	GetConsumerRunningInfo           int32 = 307
	QueryCorrectionOffset            int32 = 308
	ConsumeMessageDirectly           int32 = 309
	SendMessageV2                    int32 = 310
	GetUnitTopicList                 int32 = 311
	GetHasUnitSubTopicList           int32 = 312
	GetHasUnitSubUnunitTopicList     int32 = 313
	CloneGroupOffset                 int32 = 314
	ViewBrokerStatsData              int32 = 315
	CleanUnusedTopic                 int32 = 316
	GetBrokerConsumeStats            int32 = 317
	UpdateNamesrvConfig              int32 = 318
	GetNamesrvConfig                 int32 = 319
	SendBatchMessage                 int32 = 320
	QueryConsumeQueue                int32 = 321
	QueryDataVersion                 int32 = 322
	ResumeCheckHalfMessage           int32 = 323
	SendReplyMessage                 int32 = 324
	SendReplyMessageV2               int32 = 325
	PushReplyMessageToClient         int32 = 326
	AddWritePermOfBroker             int32 = 327
	GetAllProducerInfo               int32 = 328
	DeleteExpiredCommitLog           int32 = 329

	// ResetConsumerOffset is INVOKE_BROKER_TO_RESET_OFFSET under the name
	// admin tools use for it.
	ResetConsumerOffset int32 = 222

	// Quiver extensions.
	ResendDLQ           int32 = 1001 // QUIVER_RESEND_DLQ: resend dead letters of a group
	HAPull              int32 = 1100 // QUIVER_HA_PULL: slave pulls the master's commit log
	ControllerHeartbeat int32 = 1101 // QUIVER_CONTROLLER_HEARTBEAT: broker ↔ controller

	// RegisterTopicInNamesrv is RocketMQ 5's REGISTER_TOPIC_IN_NAMESRV
	// (not in 4.9): a broker registers one topic's queue data without
	// its whole topic table. Listed with Quiver's codes.
	RegisterTopicInNamesrv int32 = 217

	// GetTopicConfig is RocketMQ 5's GET_TOPIC_CONFIG (not in 4.9): one
	// topic's config on a broker (modules/broker/admin_topicconfig.go).
	// Listed with Quiver's codes.
	GetTopicConfig int32 = 351

	// RecallMessage is RocketMQ 5.3's RECALL_MESSAGE (not in 4.9): a
	// producer recalls a timer message by the recall handle its send was
	// answered with (modules/schedule). Listed with Quiver's codes.
	RecallMessage int32 = 370

	// RocketMQ 5.3's ACL 2.0 administration (not in 4.9): users and their
	// policies (plugins/auth/acl/acl2). Listed with Quiver's codes.
	AuthCreateUser int32 = 3001
	AuthUpdateUser int32 = 3002
	AuthDeleteUser int32 = 3003
	AuthGetUser    int32 = 3004
	AuthListUser   int32 = 3005
	AuthCreateACL  int32 = 3006
	AuthUpdateACL  int32 = 3007
	AuthDeleteACL  int32 = 3008
	AuthGetACL     int32 = 3009
	AuthListACL    int32 = 3010
)

// CodeInfo is one row of the request-code table: everything Quiver knows
// of a request code in one place. The guard (core/kernel), both ACL
// plugins, `mq admin`'s names and docs/COMPATIBILITY.md read it; a router
// that registers a code without a row fails cmd/mq's TestCompatibilityDoc.
type CodeInfo struct {
	Code int32
	Name string // Java's (or Quiver's) name
	From Origin
	// ServedBy is the process that serves the code in RocketMQ 4.9 (for
	// the others: the one Quiver means it for); it gives the direction.
	ServedBy Role
	// Auth is who may send the code when authorization is on; a code
	// without a row is refused.
	Auth AuthRule
	// Note says why Quiver does not serve the code where Java does
	// (docs/COMPATIBILITY.md).
	Note string
}

// Origin says which protocol defines a request code.
type Origin uint8

// Origins.
const (
	Java49 Origin = iota + 1 // RocketMQ 4.9.x RequestCode
	Java5                    // RocketMQ 5.x, not in 4.9
	Quiver                   // Quiver's own (1000 and up)
)

// Role is a process of a RocketMQ cluster, as the serving side of a code.
type Role string

// Roles.
const (
	RoleNamesrv      Role = "name server"
	RoleBroker       Role = "broker"
	RoleClient       Role = "client"          // the broker sends it to clients
	RoleBrokerClient Role = "broker → client" // the broker forwards it to a client
	RoleNone         Role = "none"            // declared in 4.9's RequestCode, served by nobody
)

// Direction says who sends the code to whom.
func (c CodeInfo) Direction() string {
	switch {
	case c.ServedBy == RoleClient:
		return "broker → client"
	case c.ServedBy == RoleBrokerClient:
		return "tool → broker → client"
	case c.Auth.Kind == AuthCluster:
		return "broker → " + string(c.ServedBy)
	}
	return "client → " + string(c.ServedBy)
}

// Reasons shared by several rows.
const (
	notServed   = "not served by Quiver; admin-only should it ever be"
	clientSide  = "a code clients serve (the broker sends it to them)"
	adminRead   = "cluster-wide data, read by admin tools"
	slaveCopies = "a slave copies it from its master; admin tools read it"
	acl2Admin   = "ACL 2.0 administration (auth.acl2, which also checks it: Cluster Update, or Get for reads); with ACL 1.0 on beside it during a migration, an ACL 1.0 admin account"
	acl2Served  = "answered by ACL 2.0 when auth.acl2.enabled (plugins/auth/acl/acl2)"
)

// codeRows is THE request-code table, in code order within each part.
// Its authorization rules extend Java 4.9.8's PlainAccessResource.parse
// and Permission.ADMIN_CODE (spec §8.2), which check only the signature
// for most codes; the differences are listed under AuthRule.
var codeRows = []CodeInfo{
	// RocketMQ 4.9.x (Java org.apache.rocketmq.common.protocol.RequestCode).
	{SendMessage, "SEND_MESSAGE", Java49, RoleBroker, res("", hTopic("topic", auth.Pub)), ""},
	{PullMessage, "PULL_MESSAGE", Java49, RoleBroker, res("", hTopic("topic", auth.Sub), hGroup("consumerGroup", auth.Sub)), ""},
	{QueryMessage, "QUERY_MESSAGE", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{QueryBrokerOffset, "QUERY_BROKER_OFFSET", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{QueryConsumerOffset, "QUERY_CONSUMER_OFFSET", Java49, RoleBroker, res("", hGroup("consumerGroup", auth.Sub), hTopic("topic", auth.Sub)), ""},
	{UpdateConsumerOffset, "UPDATE_CONSUMER_OFFSET", Java49, RoleBroker, res("", hGroup("consumerGroup", auth.Sub), hTopic("topic", auth.Sub)), ""},
	{UpdateAndCreateTopic, "UPDATE_AND_CREATE_TOPIC", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetAllTopicConfig, "GET_ALL_TOPIC_CONFIG", Java49, RoleBroker, only(AuthAdminOrCluster, slaveCopies), ""},
	{GetTopicConfigList, "GET_TOPIC_CONFIG_LIST", Java49, RoleNone, only(AuthAdmin, "every topic"), ""},
	{GetTopicNameList, "GET_TOPIC_NAME_LIST", Java49, RoleNone, only(AuthAdmin, "every topic name"), ""},
	{UpdateBrokerConfig, "UPDATE_BROKER_CONFIG", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetBrokerConfig, "GET_BROKER_CONFIG", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{TriggerDeleteFiles, "TRIGGER_DELETE_FILES", Java49, RoleNone, only(AuthAdmin, ""), ""},
	{GetBrokerRuntimeInfo, "GET_BROKER_RUNTIME_INFO", Java49, RoleBroker, only(AuthAdminOrCluster, slaveCopies), ""},
	{SearchOffsetByTimestamp, "SEARCH_OFFSET_BY_TIMESTAMP", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{GetMaxOffset, "GET_MAX_OFFSET", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{GetMinOffset, "GET_MIN_OFFSET", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{GetEarliestMsgStoreTime, "GET_EARLIEST_MSG_STORETIME", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{ViewMessageByID, "VIEW_MESSAGE_BY_ID", Java49, RoleBroker, res("the message's own topic, read from the store", stored("offset", auth.Sub)), ""},
	{HeartBeat, "HEART_BEAT", Java49, RoleBroker, res("as RocketMQ 4.9, producer groups are not checked; one the account holds neither PUB nor SUB on is left out of the heartbeat the broker processes (its members get the group's transaction check-backs, half messages included)", bGroup("consumerDataSet[].groupName"), bTopic("consumerDataSet[].subscriptionDataSet[].topic")), ""},
	{UnregisterClient, "UNREGISTER_CLIENT", Java49, RoleBroker, res("", optional(hGroup("consumerGroup", auth.Sub))), ""},
	{ConsumerSendMsgBack, "CONSUMER_SEND_MSG_BACK", Java49, RoleBroker, res("the message sent back is read from the store, so nobody copies another topic's message into its retry topic", hGroup("group", auth.Sub), stored("offset", auth.Sub)), ""},
	{EndTransaction, "END_TRANSACTION", Java49, RoleBroker, res("the half message's real topic, so nobody ends another producer's transaction", hGroup("producerGroup", auth.Any), AuthSource{From: FromStored, Path: "commitLogOffset", Perm: auth.Pub, Real: true}), ""},
	{GetConsumerListByGroup, "GET_CONSUMER_LIST_BY_GROUP", Java49, RoleBroker, res("", hGroup("consumerGroup", auth.Sub)), ""},
	{CheckTransactionState, "CHECK_TRANSACTION_STATE", Java49, RoleClient, only(AuthRefused, clientSide), ""},
	{NotifyConsumerIDsChanged, "NOTIFY_CONSUMER_IDS_CHANGED", Java49, RoleClient, only(AuthRefused, clientSide), ""},
	{LockBatchMQ, "LOCK_BATCH_MQ", Java49, RoleBroker, res("", bGroup("consumerGroup"), bTopic("mqSet[].topic")), ""},
	{UnlockBatchMQ, "UNLOCK_BATCH_MQ", Java49, RoleBroker, res("", bGroup("consumerGroup"), bTopic("mqSet[].topic")), ""},
	{GetAllConsumerOffset, "GET_ALL_CONSUMER_OFFSET", Java49, RoleBroker, only(AuthAdminOrCluster, slaveCopies), ""},
	{GetAllDelayOffset, "GET_ALL_DELAY_OFFSET", Java49, RoleBroker, only(AuthAdminOrCluster, slaveCopies), ""},
	{CheckClientConfig, "CHECK_CLIENT_CONFIG", Java49, RoleBroker, res("", bGroup("group")), ""},
	{UpdateAndCreateACLConfig, "UPDATE_AND_CREATE_ACL_CONFIG", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{DeleteACLConfig, "DELETE_ACL_CONFIG", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetBrokerClusterACLInfo, "GET_BROKER_CLUSTER_ACL_INFO", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{UpdateGlobalWhiteAddrsConfig, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetBrokerClusterACLConfig, "GET_BROKER_CLUSTER_ACL_CONFIG", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{PutKVConfig, "PUT_KV_CONFIG", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{GetKVConfig, "GET_KV_CONFIG", Java49, RoleNamesrv, only(AuthAdmin, adminRead), ""},
	{DeleteKVConfig, "DELETE_KV_CONFIG", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{RegisterBroker, "REGISTER_BROKER", Java49, RoleNamesrv, only(AuthCluster, "a fake broker would receive the topic's messages"), ""},
	{UnregisterBroker, "UNREGISTER_BROKER", Java49, RoleNamesrv, only(AuthCluster, "it removes a broker's routes"), ""},
	{GetRouteInfoByTopic, "GET_ROUTEINFO_BY_TOPIC", Java49, RoleNamesrv, only(AuthPublic, "clients look up the topics they send to and consume, their retry, DLQ and trace topics; a route names brokers and queue counts, which Java's name server serves to anybody"), ""},
	{GetBrokerClusterInfo, "GET_BROKER_CLUSTER_INFO", Java49, RoleNamesrv, only(AuthAdminOrCluster, "slaves find their master in it; admin tools read it"), ""},
	{UpdateAndCreateSubscriptionGroup, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetAllSubscriptionGroupConfig, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", Java49, RoleBroker, only(AuthAdminOrCluster, slaveCopies), ""},
	{GetTopicStatsInfo, "GET_TOPIC_STATS_INFO", Java49, RoleBroker, res("", hTopic("topic", auth.Sub)), ""},
	{GetConsumerConnectionList, "GET_CONSUMER_CONNECTION_LIST", Java49, RoleBroker, res("", hGroup("consumerGroup", auth.Sub)), ""},
	{GetProducerConnectionList, "GET_PRODUCER_CONNECTION_LIST", Java49, RoleBroker, only(AuthAdmin, "producer addresses of a group"), ""},
	{WipeWritePermOfBroker, "WIPE_WRITE_PERM_OF_BROKER", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{GetAllTopicListFromNameServer, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", Java49, RoleNamesrv, only(AuthListed, ""), ""},
	{DeleteSubscriptionGroup, "DELETE_SUBSCRIPTIONGROUP", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetConsumeStats, "GET_CONSUME_STATS", Java49, RoleBroker, res("", hGroup("consumerGroup", auth.Sub), optional(hTopic("topic", auth.Sub))), ""},
	{SuspendConsumer, "SUSPEND_CONSUMER", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{ResumeConsumer, "RESUME_CONSUMER", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{ResetConsumerOffsetInConsumer, "RESET_CONSUMER_OFFSET_IN_CONSUMER", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{ResetConsumerOffsetInBroker, "RESET_CONSUMER_OFFSET_IN_BROKER", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{AdjustConsumerThreadPool, "ADJUST_CONSUMER_THREAD_POOL", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{WhoConsumeTheMessage, "WHO_CONSUME_THE_MESSAGE", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{DeleteTopicInBroker, "DELETE_TOPIC_IN_BROKER", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{DeleteTopicInNamesrv, "DELETE_TOPIC_IN_NAMESRV", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{GetKVListByNamespace, "GET_KVLIST_BY_NAMESPACE", Java49, RoleNamesrv, only(AuthAdmin, adminRead), ""},
	{ResetConsumerClientOffset, "RESET_CONSUMER_CLIENT_OFFSET", Java49, RoleClient, only(AuthRefused, clientSide), ""},
	{GetConsumerStatusFromClient, "GET_CONSUMER_STATUS_FROM_CLIENT", Java49, RoleClient, res("", hGroup("group", auth.Sub), optional(hTopic("topic", auth.Sub))), ""},
	{InvokeBrokerToResetOffset, "INVOKE_BROKER_TO_RESET_OFFSET", Java49, RoleBroker, only(AuthAdmin, "rewinds any group"), ""},
	{InvokeBrokerToGetConsumerStatus, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", Java49, RoleBroker, res("", hGroup("group", auth.Sub), optional(hTopic("topic", auth.Sub))), ""},
	{GetTopicsByCluster, "GET_TOPICS_BY_CLUSTER", Java49, RoleNamesrv, only(AuthListed, ""), ""},
	{QueryTopicConsumeByWho, "QUERY_TOPIC_CONSUME_BY_WHO", Java49, RoleBroker, only(AuthAdmin, "every group of a topic"), ""},
	{RegisterFilterServer, "REGISTER_FILTER_SERVER", Java49, RoleBroker, only(AuthCluster, notServed), "filter servers (class filters) are not supported; use SQL92 or TAG subscriptions"},
	{RegisterMessageFilterClass, "REGISTER_MESSAGE_FILTER_CLASS", Java49, RoleNone, only(AuthAdmin, notServed), ""},
	{QueryConsumeTimeSpan, "QUERY_CONSUME_TIME_SPAN", Java49, RoleBroker, res("", hTopic("topic", auth.Sub), hGroup("group", auth.Sub)), ""},
	{GetSystemTopicListFromNS, "GET_SYSTEM_TOPIC_LIST_FROM_NS", Java49, RoleNamesrv, only(AuthAdmin, adminRead), ""},
	{GetSystemTopicListFromBroker, "GET_SYSTEM_TOPIC_LIST_FROM_BROKER", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{CleanExpiredConsumeQueue, "CLEAN_EXPIRED_CONSUMEQUEUE", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetConsumerRunningInfo, "GET_CONSUMER_RUNNING_INFO", Java49, RoleBrokerClient, res("", hGroup("consumerGroup", auth.Sub)), ""},
	{QueryCorrectionOffset, "QUERY_CORRECTION_OFFSET", Java49, RoleBroker, only(AuthAdmin, "compares several groups"), ""},
	{ConsumeMessageDirectly, "CONSUME_MESSAGE_DIRECTLY", Java49, RoleBrokerClient, only(AuthAdmin, "pushes a message into a client"), ""},
	{SendMessageV2, "SEND_MESSAGE_V2", Java49, RoleBroker, res("", hTopic("b", auth.Pub)), ""},
	{GetUnitTopicList, "GET_UNIT_TOPIC_LIST", Java49, RoleNamesrv, only(AuthListed, ""), ""},
	{GetHasUnitSubTopicList, "GET_HAS_UNIT_SUB_TOPIC_LIST", Java49, RoleNamesrv, only(AuthListed, ""), ""},
	{GetHasUnitSubUnunitTopicList, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", Java49, RoleNamesrv, only(AuthListed, ""), ""},
	{CloneGroupOffset, "CLONE_GROUP_OFFSET", Java49, RoleBroker, only(AuthAdmin, "writes another group's offsets"), ""},
	{ViewBrokerStatsData, "VIEW_BROKER_STATS_DATA", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{CleanUnusedTopic, "CLEAN_UNUSED_TOPIC", Java49, RoleBroker, only(AuthAdmin, ""), ""},
	{GetBrokerConsumeStats, "GET_BROKER_CONSUME_STATS", Java49, RoleBroker, only(AuthAdmin, "every group's progress"), ""},
	{UpdateNamesrvConfig, "UPDATE_NAMESRV_CONFIG", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{GetNamesrvConfig, "GET_NAMESRV_CONFIG", Java49, RoleNamesrv, only(AuthAdmin, adminRead), ""},
	{SendBatchMessage, "SEND_BATCH_MESSAGE", Java49, RoleBroker, res("", hTopic("b", auth.Pub)), ""},
	{QueryConsumeQueue, "QUERY_CONSUME_QUEUE", Java49, RoleBroker, only(AuthAdmin, "raw queue entries"), ""},
	{QueryDataVersion, "QUERY_DATA_VERSION", Java49, RoleNamesrv, only(AuthCluster, "brokers ask it before registering"), ""},
	{ResumeCheckHalfMessage, "RESUME_CHECK_HALF_MESSAGE", Java49, RoleBroker, only(AuthAdmin, "by message id, any producer's"), ""},
	{SendReplyMessage, "SEND_REPLY_MESSAGE", Java49, RoleBroker, res("", hTopic("topic", auth.Pub)), ""},
	{SendReplyMessageV2, "SEND_REPLY_MESSAGE_V2", Java49, RoleBroker, res("", hTopic("b", auth.Pub)), ""},
	{PushReplyMessageToClient, "PUSH_REPLY_MESSAGE_TO_CLIENT", Java49, RoleClient, only(AuthRefused, clientSide), ""},
	{AddWritePermOfBroker, "ADD_WRITE_PERM_OF_BROKER", Java49, RoleNamesrv, only(AuthAdmin, ""), ""},
	{GetAllProducerInfo, "GET_ALL_PRODUCER_INFO", Java49, RoleBroker, only(AuthAdmin, adminRead), ""},
	{DeleteExpiredCommitLog, "DELETE_EXPIRED_COMMITLOG", Java49, RoleBroker, only(AuthAdmin, ""), ""},

	// RocketMQ 5.x codes Quiver serves (not in 4.9), and Quiver's own.
	{ResendDLQ, "QUIVER_RESEND_DLQ", Quiver, RoleBroker, res("", hGroup("group", auth.Sub)), ""},
	{HAPull, "QUIVER_HA_PULL", Quiver, RoleBroker, only(AuthCluster, "the whole commit log; a fake slave would make a SYNC_MASTER acknowledge what no replica holds"), ""},
	{ControllerHeartbeat, "QUIVER_CONTROLLER_HEARTBEAT", Quiver, RoleNamesrv, only(AuthCluster, "controllers elect masters from these"), "served only with namesrv.controller.enabled: true"},
	{RegisterTopicInNamesrv, "REGISTER_TOPIC_IN_NAMESRV", Java5, RoleNamesrv, only(AuthCluster, "a fake route would send a topic's messages to another broker"), ""},
	{GetTopicConfig, "GET_TOPIC_CONFIG", Java5, RoleBroker, res("RocketMQ 5's code 351 (ACL 2.0: Get on the topic); the proxy and admin tools read a topic's queues and attributes (its message type) with it", hTopic("topic", auth.Any)), ""},
	{RecallMessage, "RECALL_MESSAGE", Java5, RoleBroker, res("RocketMQ 5.3's rule (PUB on the topic); the broker recalls only a message of that topic, the one its recall handle names", hTopic("topic", auth.Pub)), ""},
	{AuthCreateUser, "AUTH_CREATE_USER", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthUpdateUser, "AUTH_UPDATE_USER", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthDeleteUser, "AUTH_DELETE_USER", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthGetUser, "AUTH_GET_USER", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthListUser, "AUTH_LIST_USER", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthCreateACL, "AUTH_CREATE_ACL", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthUpdateACL, "AUTH_UPDATE_ACL", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthDeleteACL, "AUTH_DELETE_ACL", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthGetACL, "AUTH_GET_ACL", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
	{AuthListACL, "AUTH_LIST_ACL", Java5, RoleBroker, only(AuthAdmin, acl2Admin), acl2Served},
}

// codeIndex is the table by code.
type codeIndex map[int32]CodeInfo

// codes is the index of codeRows (AddCodeForTest swaps it).
var codes = func() *atomic.Pointer[codeIndex] {
	var p atomic.Pointer[codeIndex]
	p.Store(indexCodes(codeRows))
	return &p
}()

func indexCodes(rows []CodeInfo) *codeIndex {
	m := make(codeIndex, len(rows))
	for _, r := range rows {
		if _, dup := m[r.Code]; dup {
			panic(fmt.Sprintf("remoting: request code %d (%s) has two rows", r.Code, r.Name))
		}
		m[r.Code] = r
	}
	return &m
}

// Code returns the row of a request code.
func Code(code int32) (CodeInfo, bool) {
	c, ok := (*codes.Load())[code]
	return c, ok
}

// Codes returns the table's rows in code order.
func Codes() []CodeInfo {
	return slices.SortedFunc(maps.Values(*codes.Load()), func(a, b CodeInfo) int { return cmp.Compare(a.Code, b.Code) })
}

// AddCodeForTest adds a row until remove is called: for tests showing that
// a new row reaches every reader of the table.
func AddCodeForTest(c CodeInfo) (remove func()) {
	old := codes.Load()
	rows := append(slices.Collect(maps.Values(*old)), c)
	codes.Store(indexCodes(rows))
	return func() { codes.Store(old) }
}

// RequestCodeName returns the Java (or Quiver) name of a request code, or
// "UNKNOWN_<n>".
func RequestCodeName(code int32) string {
	if c, ok := Code(code); ok {
		return c.Name
	}
	return fmt.Sprintf("UNKNOWN_%d", code)
}

// Response codes (Java ResponseCode plus RemotingSysResponseCode).
const (
	Success                   int32 = 0
	SystemError               int32 = 1
	SystemBusy                int32 = 2
	RequestCodeNotSupported   int32 = 3
	TransactionFailed         int32 = 4
	FlushDiskTimeout          int32 = 10
	SlaveNotAvailable         int32 = 11
	FlushSlaveTimeout         int32 = 12
	MessageIllegal            int32 = 13
	ServiceNotAvailable       int32 = 14
	VersionNotSupported       int32 = 15
	NoPermission              int32 = 16
	TopicNotExist             int32 = 17
	TopicExistAlready         int32 = 18
	PullNotFound              int32 = 19
	PullRetryImmediately      int32 = 20
	PullOffsetMoved           int32 = 21
	QueryNotFound             int32 = 22
	SubscriptionParseFailed   int32 = 23
	SubscriptionNotExist      int32 = 24
	SubscriptionNotLatest     int32 = 25
	SubscriptionGroupNotExist int32 = 26
	TransactionShouldCommit   int32 = 200
	TransactionShouldRollback int32 = 201
	TransactionStateUnknow    int32 = 202
	ConsumerNotOnline         int32 = 206
	NoMessage                 int32 = 208
	FlowControl               int32 = 215
	// IllegalOperation is RocketMQ 5's ILLEGAL_OPERATION (a recall handle
	// that is malformed, another topic's or broker's, or past its time).
	IllegalOperation int32 = 604
)
