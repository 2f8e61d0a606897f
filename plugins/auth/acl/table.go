package acl

import (
	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// Source constructors for the table.
func hTopic(key string, p auth.Action) Source { return Source{From: Header, Path: key, Perm: p} }
func hGroup(key string, p auth.Action) Source {
	return Source{From: Header, Path: key, Group: true, Perm: p}
}
func optional(s Source) Source  { s.Optional = true; return s }
func bTopic(path string) Source { return Source{From: Body, Path: path, Perm: auth.Sub} }
func bGroup(path string) Source { return Source{From: Body, Path: path, Group: true, Perm: auth.Sub} }
func stored(key string, p auth.Action) Source {
	return Source{From: Stored, Path: key, Perm: p}
}

func res(code int32, reason string, needs ...Source) Rule {
	return Rule{Code: code, Kind: Resources, Needs: needs, Reason: reason}
}

func kind(code int32, k Kind, reason string) Rule { return Rule{Code: code, Kind: k, Reason: reason} }

const (
	notServed   = "not served by Quiver; admin-only should it ever be"
	clientSide  = "a code clients serve (the broker sends it to them)"
	adminRead   = "cluster-wide data, read by admin tools"
	slaveCopies = "a slave copies it from its master; admin tools read it"
	acl2Admin   = "ACL 2.0 administration (auth.acl2, which also checks it: Cluster Update, or Get for reads); with ACL 1.0 on beside it during a migration, an ACL 1.0 admin account"
)

// table is THE permission table: every request code a Quiver broker or
// name server routes, and every other RocketMQ 4.9.x code, with who may
// send it when ACL is on. A code missing here is refused; a test fails
// when a router serves a code without a row (interop TestAuthzTable), and
// docs/SECURITY.md lists the rows (TestSecurityDoc).
//
// It extends Java 4.9.8's PlainAccessResource.parse and
// Permission.ADMIN_CODE (spec §8.2), which check only the signature for
// most codes. Differences:
//
//   - Every topic named %RETRY%<g> needs SUB on group g instead of the
//     topic's permission: sending a message back, pulling retries and
//     reading their offsets are all that group's consumption (Java reads
//     a "group" ext field SEND_MESSAGE never carries and checks the group
//     "null").
//   - SEND_BATCH_MESSAGE, QUERY_CONSUMER_OFFSET, the offset queries, the
//     lock codes, END_TRANSACTION, VIEW_MESSAGE_BY_ID and the consumer
//     information codes check their topic or group (Java: the signature
//     only).
//   - Cluster traffic (REGISTER_BROKER, UNREGISTER_BROKER, HA_PULL, the
//     controller's heartbeats, QUERY_DATA_VERSION) needs a cluster member,
//     and reads of cluster-wide data an admin (Java's name server checks
//     nothing).
//   - A resource a row needs but the request lacks refuses it (Java checks
//     a resource named "null"), except where a Source is Optional.
var table = func() map[int32]Rule {
	rows := []Rule{
		// Producers.
		res(remoting.SendMessage, "", hTopic("topic", auth.Pub)),
		res(remoting.SendMessageV2, "", hTopic("b", auth.Pub)),
		res(remoting.SendBatchMessage, "", hTopic("b", auth.Pub)),
		res(remoting.SendReplyMessage, "", hTopic("topic", auth.Pub)),
		res(remoting.SendReplyMessageV2, "", hTopic("b", auth.Pub)),
		res(remoting.EndTransaction, "the half message's real topic, so nobody ends another producer's transaction",
			hGroup("producerGroup", auth.Any), Source{From: Stored, Path: "commitLogOffset", Perm: auth.Pub, Real: true}),
		res(remoting.RecallMessage, "RocketMQ 5.3's rule (PUB on the topic); the broker recalls only a message of that topic, the one its recall handle names",
			hTopic("topic", auth.Pub)),

		// Consumers.
		res(remoting.PullMessage, "", hTopic("topic", auth.Sub), hGroup("consumerGroup", auth.Sub)),
		res(remoting.QueryMessage, "", hTopic("topic", auth.Sub)),
		res(remoting.ViewMessageByID, "the message's own topic, read from the store", stored("offset", auth.Sub)),
		res(remoting.HeartBeat, "as RocketMQ 4.9, producer groups are not checked; one the account holds neither PUB nor SUB on is left out "+
			"of the heartbeat the broker processes (its members get the group's transaction check-backs, half messages included)",
			bGroup("consumerDataSet[].groupName"), bTopic("consumerDataSet[].subscriptionDataSet[].topic")),
		res(remoting.UnregisterClient, "", optional(hGroup("consumerGroup", auth.Sub))),
		res(remoting.ConsumerSendMsgBack, "the message sent back is read from the store, so nobody copies another topic's message into its retry topic",
			hGroup("group", auth.Sub), stored("offset", auth.Sub)),
		res(remoting.GetConsumerListByGroup, "", hGroup("consumerGroup", auth.Sub)),
		res(remoting.QueryConsumerOffset, "", hGroup("consumerGroup", auth.Sub), hTopic("topic", auth.Sub)),
		res(remoting.UpdateConsumerOffset, "", hGroup("consumerGroup", auth.Sub), hTopic("topic", auth.Sub)),
		res(remoting.GetMaxOffset, "", hTopic("topic", auth.Sub)),
		res(remoting.GetMinOffset, "", hTopic("topic", auth.Sub)),
		res(remoting.SearchOffsetByTimestamp, "", hTopic("topic", auth.Sub)),
		res(remoting.GetEarliestMsgStoreTime, "", hTopic("topic", auth.Sub)),
		res(remoting.LockBatchMQ, "", bGroup("consumerGroup"), bTopic("mqSet[].topic")),
		res(remoting.UnlockBatchMQ, "", bGroup("consumerGroup"), bTopic("mqSet[].topic")),
		res(remoting.CheckClientConfig, "", bGroup("group")),
		res(remoting.ResendDLQ, "", hGroup("group", auth.Sub)),

		// Consumer and topic information.
		res(remoting.GetTopicStatsInfo, "", hTopic("topic", auth.Sub)),
		res(remoting.GetTopicConfig, "RocketMQ 5's code 351 (ACL 2.0: Get on the topic); the proxy and admin tools read a topic's queues and attributes (its message type) with it",
			hTopic("topic", auth.Any)),
		res(remoting.GetConsumerConnectionList, "", hGroup("consumerGroup", auth.Sub)),
		res(remoting.GetConsumeStats, "", hGroup("consumerGroup", auth.Sub), optional(hTopic("topic", auth.Sub))),
		res(remoting.GetConsumerRunningInfo, "", hGroup("consumerGroup", auth.Sub)),
		res(remoting.GetConsumerStatusFromClient, "", hGroup("group", auth.Sub), optional(hTopic("topic", auth.Sub))),
		res(remoting.InvokeBrokerToGetConsumerStatus, "", hGroup("group", auth.Sub), optional(hTopic("topic", auth.Sub))),
		res(remoting.QueryConsumeTimeSpan, "", hTopic("topic", auth.Sub), hGroup("group", auth.Sub)),

		// Routes.
		kind(remoting.GetRouteInfoByTopic, Public, "clients look up the topics they send to and consume, their retry, DLQ and trace topics; "+
			"a route names brokers and queue counts, which Java's name server serves to anybody"),

		// Cluster members.
		kind(remoting.RegisterBroker, ClusterOnly, "a fake broker would receive the topic's messages"),
		kind(remoting.UnregisterBroker, ClusterOnly, "it removes a broker's routes"),
		kind(remoting.RegisterTopicInNamesrv, ClusterOnly, "a fake route would send a topic's messages to another broker"),
		kind(remoting.QueryDataVersion, ClusterOnly, "brokers ask it before registering"),
		kind(remoting.RegisterFilterServer, ClusterOnly, notServed),
		kind(remoting.HAPull, ClusterOnly, "the whole commit log; a fake slave would make a SYNC_MASTER acknowledge what no replica holds"),
		kind(remoting.ControllerHeartbeat, ClusterOnly, "controllers elect masters from these"),

		// What a slave copies from its master.
		kind(remoting.GetAllTopicConfig, AdminOrCluster, slaveCopies),
		kind(remoting.GetAllConsumerOffset, AdminOrCluster, slaveCopies),
		kind(remoting.GetAllDelayOffset, AdminOrCluster, slaveCopies),
		kind(remoting.GetAllSubscriptionGroupConfig, AdminOrCluster, slaveCopies),
		kind(remoting.GetBrokerRuntimeInfo, AdminOrCluster, slaveCopies),
		kind(remoting.GetBrokerClusterInfo, AdminOrCluster, "slaves find their master in it; admin tools read it"),

		// Administration: writes.
		kind(remoting.UpdateAndCreateTopic, AdminOnly, ""),
		kind(remoting.DeleteTopicInBroker, AdminOnly, ""),
		kind(remoting.DeleteTopicInNamesrv, AdminOnly, ""),
		kind(remoting.UpdateAndCreateSubscriptionGroup, AdminOnly, ""),
		kind(remoting.DeleteSubscriptionGroup, AdminOnly, ""),
		kind(remoting.UpdateBrokerConfig, AdminOnly, ""),
		kind(remoting.UpdateNamesrvConfig, AdminOnly, ""),
		kind(remoting.PutKVConfig, AdminOnly, ""),
		kind(remoting.DeleteKVConfig, AdminOnly, ""),
		kind(remoting.WipeWritePermOfBroker, AdminOnly, ""),
		kind(remoting.AddWritePermOfBroker, AdminOnly, ""),
		kind(remoting.InvokeBrokerToResetOffset, AdminOnly, "rewinds any group"),
		kind(remoting.CloneGroupOffset, AdminOnly, "writes another group's offsets"),
		kind(remoting.CleanExpiredConsumeQueue, AdminOnly, ""),
		kind(remoting.CleanUnusedTopic, AdminOnly, ""),
		kind(remoting.DeleteExpiredCommitLog, AdminOnly, ""),
		kind(remoting.TriggerDeleteFiles, AdminOnly, ""),
		kind(remoting.ResumeCheckHalfMessage, AdminOnly, "by message id, any producer's"),
		kind(remoting.ConsumeMessageDirectly, AdminOnly, "pushes a message into a client"),
		kind(remoting.UpdateAndCreateACLConfig, AdminOnly, ""),
		kind(remoting.DeleteACLConfig, AdminOnly, ""),
		kind(remoting.UpdateGlobalWhiteAddrsConfig, AdminOnly, ""),
		kind(remoting.AuthCreateUser, AdminOnly, acl2Admin),
		kind(remoting.AuthUpdateUser, AdminOnly, acl2Admin),
		kind(remoting.AuthDeleteUser, AdminOnly, acl2Admin),
		kind(remoting.AuthGetUser, AdminOnly, acl2Admin),
		kind(remoting.AuthListUser, AdminOnly, acl2Admin),
		kind(remoting.AuthCreateACL, AdminOnly, acl2Admin),
		kind(remoting.AuthUpdateACL, AdminOnly, acl2Admin),
		kind(remoting.AuthDeleteACL, AdminOnly, acl2Admin),
		kind(remoting.AuthGetACL, AdminOnly, acl2Admin),
		kind(remoting.AuthListACL, AdminOnly, acl2Admin),

		// Administration: reads of cluster-wide data.
		kind(remoting.GetBrokerConfig, AdminOnly, adminRead),
		kind(remoting.GetNamesrvConfig, AdminOnly, adminRead),
		kind(remoting.GetKVConfig, AdminOnly, adminRead),
		kind(remoting.GetKVListByNamespace, AdminOnly, adminRead),
		kind(remoting.GetBrokerClusterACLInfo, AdminOnly, adminRead),
		kind(remoting.GetBrokerClusterACLConfig, AdminOnly, adminRead),
		kind(remoting.GetAllTopicListFromNameServer, Listed, ""),
		kind(remoting.GetTopicsByCluster, Listed, ""),
		kind(remoting.GetTopicConfigList, AdminOnly, "every topic"),
		kind(remoting.GetTopicNameList, AdminOnly, "every topic name"),
		kind(remoting.GetSystemTopicListFromNS, AdminOnly, adminRead),
		kind(remoting.GetSystemTopicListFromBroker, AdminOnly, adminRead),
		kind(remoting.GetUnitTopicList, Listed, ""),
		kind(remoting.GetHasUnitSubTopicList, Listed, ""),
		kind(remoting.GetHasUnitSubUnunitTopicList, Listed, ""),
		kind(remoting.GetProducerConnectionList, AdminOnly, "producer addresses of a group"),
		kind(remoting.GetAllProducerInfo, AdminOnly, adminRead),
		kind(remoting.GetBrokerConsumeStats, AdminOnly, "every group's progress"),
		kind(remoting.ViewBrokerStatsData, AdminOnly, adminRead),
		kind(remoting.QueryConsumeQueue, AdminOnly, "raw queue entries"),
		kind(remoting.QueryCorrectionOffset, AdminOnly, "compares several groups"),
		kind(remoting.QueryTopicConsumeByWho, AdminOnly, "every group of a topic"),
		kind(remoting.WhoConsumeTheMessage, AdminOnly, notServed),

		// Java codes Quiver does not serve.
		kind(remoting.QueryBrokerOffset, AdminOnly, notServed),
		kind(remoting.SuspendConsumer, AdminOnly, notServed),
		kind(remoting.ResumeConsumer, AdminOnly, notServed),
		kind(remoting.ResetConsumerOffsetInConsumer, AdminOnly, notServed),
		kind(remoting.ResetConsumerOffsetInBroker, AdminOnly, notServed),
		kind(remoting.AdjustConsumerThreadPool, AdminOnly, notServed),
		kind(remoting.RegisterMessageFilterClass, AdminOnly, notServed),

		// Codes clients serve.
		kind(remoting.CheckTransactionState, Refused, clientSide),
		kind(remoting.NotifyConsumerIDsChanged, Refused, clientSide),
		kind(remoting.ResetConsumerClientOffset, Refused, clientSide),
		kind(remoting.PushReplyMessageToClient, Refused, clientSide),
	}
	m := make(map[int32]Rule, len(rows))
	for _, r := range rows {
		if _, dup := m[r.Code]; dup {
			panic("acl: request code " + r.Name() + " has two rows")
		}
		m[r.Code] = r
	}
	return m
}()
