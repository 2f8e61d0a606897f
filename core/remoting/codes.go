package remoting

import "fmt"

// Request codes: every RequestCode of Apache RocketMQ 4.9.x (Java
// org.apache.rocketmq.common.protocol.RequestCode), then Quiver's own
// extensions (1000 and up). JavaRequestCodes lists the Java ones with their
// Java names; docs/COMPATIBILITY.md is checked against it and the routers.
const (
	SendMessage                      int32 = 10  // SEND_MESSAGE
	PullMessage                      int32 = 11  // PULL_MESSAGE
	QueryMessage                     int32 = 12  // QUERY_MESSAGE
	QueryBrokerOffset                int32 = 13  // QUERY_BROKER_OFFSET
	QueryConsumerOffset              int32 = 14  // QUERY_CONSUMER_OFFSET
	UpdateConsumerOffset             int32 = 15  // UPDATE_CONSUMER_OFFSET
	UpdateAndCreateTopic             int32 = 17  // UPDATE_AND_CREATE_TOPIC
	GetAllTopicConfig                int32 = 21  // GET_ALL_TOPIC_CONFIG
	GetTopicConfigList               int32 = 22  // GET_TOPIC_CONFIG_LIST
	GetTopicNameList                 int32 = 23  // GET_TOPIC_NAME_LIST
	UpdateBrokerConfig               int32 = 25  // UPDATE_BROKER_CONFIG
	GetBrokerConfig                  int32 = 26  // GET_BROKER_CONFIG
	TriggerDeleteFiles               int32 = 27  // TRIGGER_DELETE_FILES
	GetBrokerRuntimeInfo             int32 = 28  // GET_BROKER_RUNTIME_INFO
	SearchOffsetByTimestamp          int32 = 29  // SEARCH_OFFSET_BY_TIMESTAMP
	GetMaxOffset                     int32 = 30  // GET_MAX_OFFSET
	GetMinOffset                     int32 = 31  // GET_MIN_OFFSET
	GetEarliestMsgStoreTime          int32 = 32  // GET_EARLIEST_MSG_STORETIME
	ViewMessageByID                  int32 = 33  // VIEW_MESSAGE_BY_ID
	HeartBeat                        int32 = 34  // HEART_BEAT
	UnregisterClient                 int32 = 35  // UNREGISTER_CLIENT
	ConsumerSendMsgBack              int32 = 36  // CONSUMER_SEND_MSG_BACK
	EndTransaction                   int32 = 37  // END_TRANSACTION
	GetConsumerListByGroup           int32 = 38  // GET_CONSUMER_LIST_BY_GROUP
	CheckTransactionState            int32 = 39  // CHECK_TRANSACTION_STATE
	NotifyConsumerIDsChanged         int32 = 40  // NOTIFY_CONSUMER_IDS_CHANGED
	LockBatchMQ                      int32 = 41  // LOCK_BATCH_MQ
	UnlockBatchMQ                    int32 = 42  // UNLOCK_BATCH_MQ
	GetAllConsumerOffset             int32 = 43  // GET_ALL_CONSUMER_OFFSET
	GetAllDelayOffset                int32 = 45  // GET_ALL_DELAY_OFFSET
	CheckClientConfig                int32 = 46  // CHECK_CLIENT_CONFIG
	UpdateAndCreateACLConfig         int32 = 50  // UPDATE_AND_CREATE_ACL_CONFIG
	DeleteACLConfig                  int32 = 51  // DELETE_ACL_CONFIG
	GetBrokerClusterACLInfo          int32 = 52  // GET_BROKER_CLUSTER_ACL_INFO
	UpdateGlobalWhiteAddrsConfig     int32 = 53  // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
	GetBrokerClusterACLConfig        int32 = 54  // GET_BROKER_CLUSTER_ACL_CONFIG
	PutKVConfig                      int32 = 100 // PUT_KV_CONFIG
	GetKVConfig                      int32 = 101 // GET_KV_CONFIG
	DeleteKVConfig                   int32 = 102 // DELETE_KV_CONFIG
	RegisterBroker                   int32 = 103 // REGISTER_BROKER
	UnregisterBroker                 int32 = 104 // UNREGISTER_BROKER
	GetRouteInfoByTopic              int32 = 105 // GET_ROUTEINFO_BY_TOPIC
	GetBrokerClusterInfo             int32 = 106 // GET_BROKER_CLUSTER_INFO
	UpdateAndCreateSubscriptionGroup int32 = 200 // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
	GetAllSubscriptionGroupConfig    int32 = 201 // GET_ALL_SUBSCRIPTIONGROUP_CONFIG
	GetTopicStatsInfo                int32 = 202 // GET_TOPIC_STATS_INFO
	GetConsumerConnectionList        int32 = 203 // GET_CONSUMER_CONNECTION_LIST
	GetProducerConnectionList        int32 = 204 // GET_PRODUCER_CONNECTION_LIST
	WipeWritePermOfBroker            int32 = 205 // WIPE_WRITE_PERM_OF_BROKER
	GetAllTopicListFromNameServer    int32 = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER
	DeleteSubscriptionGroup          int32 = 207 // DELETE_SUBSCRIPTIONGROUP
	GetConsumeStats                  int32 = 208 // GET_CONSUME_STATS
	SuspendConsumer                  int32 = 209 // SUSPEND_CONSUMER
	ResumeConsumer                   int32 = 210 // RESUME_CONSUMER
	ResetConsumerOffsetInConsumer    int32 = 211 // RESET_CONSUMER_OFFSET_IN_CONSUMER
	ResetConsumerOffsetInBroker      int32 = 212 // RESET_CONSUMER_OFFSET_IN_BROKER
	AdjustConsumerThreadPool         int32 = 213 // ADJUST_CONSUMER_THREAD_POOL
	WhoConsumeTheMessage             int32 = 214 // WHO_CONSUME_THE_MESSAGE
	DeleteTopicInBroker              int32 = 215 // DELETE_TOPIC_IN_BROKER
	DeleteTopicInNamesrv             int32 = 216 // DELETE_TOPIC_IN_NAMESRV
	GetKVListByNamespace             int32 = 219 // GET_KVLIST_BY_NAMESPACE
	ResetConsumerClientOffset        int32 = 220 // RESET_CONSUMER_CLIENT_OFFSET
	GetConsumerStatusFromClient      int32 = 221 // GET_CONSUMER_STATUS_FROM_CLIENT
	InvokeBrokerToResetOffset        int32 = 222 // INVOKE_BROKER_TO_RESET_OFFSET
	InvokeBrokerToGetConsumerStatus  int32 = 223 // INVOKE_BROKER_TO_GET_CONSUMER_STATUS
	GetTopicsByCluster               int32 = 224 // GET_TOPICS_BY_CLUSTER
	QueryTopicConsumeByWho           int32 = 300 // QUERY_TOPIC_CONSUME_BY_WHO
	RegisterFilterServer             int32 = 301 // REGISTER_FILTER_SERVER
	RegisterMessageFilterClass       int32 = 302 // REGISTER_MESSAGE_FILTER_CLASS
	QueryConsumeTimeSpan             int32 = 303 // QUERY_CONSUME_TIME_SPAN
	GetSystemTopicListFromNS         int32 = 304 // GET_SYSTEM_TOPIC_LIST_FROM_NS
	GetSystemTopicListFromBroker     int32 = 305 // GET_SYSTEM_TOPIC_LIST_FROM_BROKER
	CleanExpiredConsumeQueue         int32 = 306 // CLEAN_EXPIRED_CONSUMEQUEUE
	GetConsumerRunningInfo           int32 = 307 // GET_CONSUMER_RUNNING_INFO
	QueryCorrectionOffset            int32 = 308 // QUERY_CORRECTION_OFFSET
	ConsumeMessageDirectly           int32 = 309 // CONSUME_MESSAGE_DIRECTLY
	SendMessageV2                    int32 = 310 // SEND_MESSAGE_V2
	GetUnitTopicList                 int32 = 311 // GET_UNIT_TOPIC_LIST
	GetHasUnitSubTopicList           int32 = 312 // GET_HAS_UNIT_SUB_TOPIC_LIST
	GetHasUnitSubUnunitTopicList     int32 = 313 // GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
	CloneGroupOffset                 int32 = 314 // CLONE_GROUP_OFFSET
	ViewBrokerStatsData              int32 = 315 // VIEW_BROKER_STATS_DATA
	CleanUnusedTopic                 int32 = 316 // CLEAN_UNUSED_TOPIC
	GetBrokerConsumeStats            int32 = 317 // GET_BROKER_CONSUME_STATS
	UpdateNamesrvConfig              int32 = 318 // UPDATE_NAMESRV_CONFIG
	GetNamesrvConfig                 int32 = 319 // GET_NAMESRV_CONFIG
	SendBatchMessage                 int32 = 320 // SEND_BATCH_MESSAGE
	QueryConsumeQueue                int32 = 321 // QUERY_CONSUME_QUEUE
	QueryDataVersion                 int32 = 322 // QUERY_DATA_VERSION
	ResumeCheckHalfMessage           int32 = 323 // RESUME_CHECK_HALF_MESSAGE
	SendReplyMessage                 int32 = 324 // SEND_REPLY_MESSAGE
	SendReplyMessageV2               int32 = 325 // SEND_REPLY_MESSAGE_V2
	PushReplyMessageToClient         int32 = 326 // PUSH_REPLY_MESSAGE_TO_CLIENT
	AddWritePermOfBroker             int32 = 327 // ADD_WRITE_PERM_OF_BROKER
	GetAllProducerInfo               int32 = 328 // GET_ALL_PRODUCER_INFO
	DeleteExpiredCommitLog           int32 = 329 // DELETE_EXPIRED_COMMITLOG

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

// CodeName is a request code and its Java (or Quiver) name.
type CodeName struct {
	Code int32
	Name string
}

// JavaRequestCodes lists every request code of RocketMQ 4.9.x in code order.
var JavaRequestCodes = []CodeName{
	{SendMessage, "SEND_MESSAGE"},
	{PullMessage, "PULL_MESSAGE"},
	{QueryMessage, "QUERY_MESSAGE"},
	{QueryBrokerOffset, "QUERY_BROKER_OFFSET"},
	{QueryConsumerOffset, "QUERY_CONSUMER_OFFSET"},
	{UpdateConsumerOffset, "UPDATE_CONSUMER_OFFSET"},
	{UpdateAndCreateTopic, "UPDATE_AND_CREATE_TOPIC"},
	{GetAllTopicConfig, "GET_ALL_TOPIC_CONFIG"},
	{GetTopicConfigList, "GET_TOPIC_CONFIG_LIST"},
	{GetTopicNameList, "GET_TOPIC_NAME_LIST"},
	{UpdateBrokerConfig, "UPDATE_BROKER_CONFIG"},
	{GetBrokerConfig, "GET_BROKER_CONFIG"},
	{TriggerDeleteFiles, "TRIGGER_DELETE_FILES"},
	{GetBrokerRuntimeInfo, "GET_BROKER_RUNTIME_INFO"},
	{SearchOffsetByTimestamp, "SEARCH_OFFSET_BY_TIMESTAMP"},
	{GetMaxOffset, "GET_MAX_OFFSET"},
	{GetMinOffset, "GET_MIN_OFFSET"},
	{GetEarliestMsgStoreTime, "GET_EARLIEST_MSG_STORETIME"},
	{ViewMessageByID, "VIEW_MESSAGE_BY_ID"},
	{HeartBeat, "HEART_BEAT"},
	{UnregisterClient, "UNREGISTER_CLIENT"},
	{ConsumerSendMsgBack, "CONSUMER_SEND_MSG_BACK"},
	{EndTransaction, "END_TRANSACTION"},
	{GetConsumerListByGroup, "GET_CONSUMER_LIST_BY_GROUP"},
	{CheckTransactionState, "CHECK_TRANSACTION_STATE"},
	{NotifyConsumerIDsChanged, "NOTIFY_CONSUMER_IDS_CHANGED"},
	{LockBatchMQ, "LOCK_BATCH_MQ"},
	{UnlockBatchMQ, "UNLOCK_BATCH_MQ"},
	{GetAllConsumerOffset, "GET_ALL_CONSUMER_OFFSET"},
	{GetAllDelayOffset, "GET_ALL_DELAY_OFFSET"},
	{CheckClientConfig, "CHECK_CLIENT_CONFIG"},
	{UpdateAndCreateACLConfig, "UPDATE_AND_CREATE_ACL_CONFIG"},
	{DeleteACLConfig, "DELETE_ACL_CONFIG"},
	{GetBrokerClusterACLInfo, "GET_BROKER_CLUSTER_ACL_INFO"},
	{UpdateGlobalWhiteAddrsConfig, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG"},
	{GetBrokerClusterACLConfig, "GET_BROKER_CLUSTER_ACL_CONFIG"},
	{PutKVConfig, "PUT_KV_CONFIG"},
	{GetKVConfig, "GET_KV_CONFIG"},
	{DeleteKVConfig, "DELETE_KV_CONFIG"},
	{RegisterBroker, "REGISTER_BROKER"},
	{UnregisterBroker, "UNREGISTER_BROKER"},
	{GetRouteInfoByTopic, "GET_ROUTEINFO_BY_TOPIC"},
	{GetBrokerClusterInfo, "GET_BROKER_CLUSTER_INFO"},
	{UpdateAndCreateSubscriptionGroup, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP"},
	{GetAllSubscriptionGroupConfig, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"},
	{GetTopicStatsInfo, "GET_TOPIC_STATS_INFO"},
	{GetConsumerConnectionList, "GET_CONSUMER_CONNECTION_LIST"},
	{GetProducerConnectionList, "GET_PRODUCER_CONNECTION_LIST"},
	{WipeWritePermOfBroker, "WIPE_WRITE_PERM_OF_BROKER"},
	{GetAllTopicListFromNameServer, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"},
	{DeleteSubscriptionGroup, "DELETE_SUBSCRIPTIONGROUP"},
	{GetConsumeStats, "GET_CONSUME_STATS"},
	{SuspendConsumer, "SUSPEND_CONSUMER"},
	{ResumeConsumer, "RESUME_CONSUMER"},
	{ResetConsumerOffsetInConsumer, "RESET_CONSUMER_OFFSET_IN_CONSUMER"},
	{ResetConsumerOffsetInBroker, "RESET_CONSUMER_OFFSET_IN_BROKER"},
	{AdjustConsumerThreadPool, "ADJUST_CONSUMER_THREAD_POOL"},
	{WhoConsumeTheMessage, "WHO_CONSUME_THE_MESSAGE"},
	{DeleteTopicInBroker, "DELETE_TOPIC_IN_BROKER"},
	{DeleteTopicInNamesrv, "DELETE_TOPIC_IN_NAMESRV"},
	{GetKVListByNamespace, "GET_KVLIST_BY_NAMESPACE"},
	{ResetConsumerClientOffset, "RESET_CONSUMER_CLIENT_OFFSET"},
	{GetConsumerStatusFromClient, "GET_CONSUMER_STATUS_FROM_CLIENT"},
	{InvokeBrokerToResetOffset, "INVOKE_BROKER_TO_RESET_OFFSET"},
	{InvokeBrokerToGetConsumerStatus, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS"},
	{GetTopicsByCluster, "GET_TOPICS_BY_CLUSTER"},
	{QueryTopicConsumeByWho, "QUERY_TOPIC_CONSUME_BY_WHO"},
	{RegisterFilterServer, "REGISTER_FILTER_SERVER"},
	{RegisterMessageFilterClass, "REGISTER_MESSAGE_FILTER_CLASS"},
	{QueryConsumeTimeSpan, "QUERY_CONSUME_TIME_SPAN"},
	{GetSystemTopicListFromNS, "GET_SYSTEM_TOPIC_LIST_FROM_NS"},
	{GetSystemTopicListFromBroker, "GET_SYSTEM_TOPIC_LIST_FROM_BROKER"},
	{CleanExpiredConsumeQueue, "CLEAN_EXPIRED_CONSUMEQUEUE"},
	{GetConsumerRunningInfo, "GET_CONSUMER_RUNNING_INFO"},
	{QueryCorrectionOffset, "QUERY_CORRECTION_OFFSET"},
	{ConsumeMessageDirectly, "CONSUME_MESSAGE_DIRECTLY"},
	{SendMessageV2, "SEND_MESSAGE_V2"},
	{GetUnitTopicList, "GET_UNIT_TOPIC_LIST"},
	{GetHasUnitSubTopicList, "GET_HAS_UNIT_SUB_TOPIC_LIST"},
	{GetHasUnitSubUnunitTopicList, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST"},
	{CloneGroupOffset, "CLONE_GROUP_OFFSET"},
	{ViewBrokerStatsData, "VIEW_BROKER_STATS_DATA"},
	{CleanUnusedTopic, "CLEAN_UNUSED_TOPIC"},
	{GetBrokerConsumeStats, "GET_BROKER_CONSUME_STATS"},
	{UpdateNamesrvConfig, "UPDATE_NAMESRV_CONFIG"},
	{GetNamesrvConfig, "GET_NAMESRV_CONFIG"},
	{SendBatchMessage, "SEND_BATCH_MESSAGE"},
	{QueryConsumeQueue, "QUERY_CONSUME_QUEUE"},
	{QueryDataVersion, "QUERY_DATA_VERSION"},
	{ResumeCheckHalfMessage, "RESUME_CHECK_HALF_MESSAGE"},
	{SendReplyMessage, "SEND_REPLY_MESSAGE"},
	{SendReplyMessageV2, "SEND_REPLY_MESSAGE_V2"},
	{PushReplyMessageToClient, "PUSH_REPLY_MESSAGE_TO_CLIENT"},
	{AddWritePermOfBroker, "ADD_WRITE_PERM_OF_BROKER"},
	{GetAllProducerInfo, "GET_ALL_PRODUCER_INFO"},
	{DeleteExpiredCommitLog, "DELETE_EXPIRED_COMMITLOG"},
}

// QuiverRequestCodes lists Quiver's own request codes.
var QuiverRequestCodes = []CodeName{
	{ResendDLQ, "QUIVER_RESEND_DLQ"},
	{HAPull, "QUIVER_HA_PULL"},
	{ControllerHeartbeat, "QUIVER_CONTROLLER_HEARTBEAT"},
	{RegisterTopicInNamesrv, "REGISTER_TOPIC_IN_NAMESRV"},
	{GetTopicConfig, "GET_TOPIC_CONFIG"},
	{RecallMessage, "RECALL_MESSAGE"},
	{AuthCreateUser, "AUTH_CREATE_USER"},
	{AuthUpdateUser, "AUTH_UPDATE_USER"},
	{AuthDeleteUser, "AUTH_DELETE_USER"},
	{AuthGetUser, "AUTH_GET_USER"},
	{AuthListUser, "AUTH_LIST_USER"},
	{AuthCreateACL, "AUTH_CREATE_ACL"},
	{AuthUpdateACL, "AUTH_UPDATE_ACL"},
	{AuthDeleteACL, "AUTH_DELETE_ACL"},
	{AuthGetACL, "AUTH_GET_ACL"},
	{AuthListACL, "AUTH_LIST_ACL"},
}

// RequestCodeName returns the Java (or Quiver) name of a request code, or
// "UNKNOWN_<n>".
func RequestCodeName(code int32) string {
	for _, l := range [][]CodeName{JavaRequestCodes, QuiverRequestCodes} {
		for _, c := range l {
			if c.Code == code {
				return c.Name
			}
		}
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
