package broker

import "github.com/quivermq/quiver/core/remoting"

// registerAdmin wires the admin codes of issue #21: broker configuration,
// producer connections, calls passed through to clients, offset tools,
// consume-queue and time-span queries, statistics and clean-ups.
func (b *Broker) registerAdmin() {
	b.stats = newBrokerStats()
	b.AddStoredListener(b.observeStoredStats)
	b.OnPulled(b.observePulledStats)
	r := b.router
	r.Register(remoting.GetBrokerConfig, b.handleGetBrokerConfig)
	r.Register(remoting.GetTopicConfig, b.handleGetTopicConfig) // admin_topicconfig.go
	r.Register(remoting.UpdateBrokerConfig, b.handleUpdateBrokerConfig)
	r.Register(remoting.GetProducerConnectionList, b.handleProducerConnections)
	r.Register(remoting.GetConsumerRunningInfo, b.handleConsumerRunningInfo)
	r.Register(remoting.ConsumeMessageDirectly, b.handleConsumeMessageDirectly)
	r.Register(remoting.InvokeBrokerToGetConsumerStatus, b.handleConsumerStatus)
	r.Register(remoting.CloneGroupOffset, b.handleCloneGroupOffset)
	r.Register(remoting.QueryCorrectionOffset, b.handleQueryCorrectionOffset)
	r.Register(remoting.QueryConsumeTimeSpan, b.handleQueryConsumeTimeSpan)
	r.Register(remoting.GetBrokerConsumeStats, b.handleBrokerConsumeStats)
	r.Register(remoting.QueryConsumeQueue, b.handleQueryConsumeQueue)
	r.Register(remoting.GetSystemTopicListFromBroker, b.handleSystemTopicList)
	r.Register(remoting.CleanExpiredConsumeQueue, b.handleCleanExpiredConsumeQueue)
	r.Register(remoting.CleanUnusedTopic, b.handleCleanUnusedTopic)
	r.Register(remoting.ResumeCheckHalfMessage, b.handleResumeCheckHalfMessage)
	r.Register(remoting.ViewBrokerStatsData, b.handleViewBrokerStatsData)
	r.Register(remoting.GetAllProducerInfo, b.handleAllProducerInfo)
	r.Register(remoting.QueryTopicConsumeByWho, b.handleTopicConsumeByWho)
	r.Register(remoting.DeleteExpiredCommitLog, b.handleDeleteExpiredCommitLog)
}
