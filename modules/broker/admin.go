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
	r.RegisterFunc(remoting.GetBrokerConfig, b.handleGetBrokerConfig)
	r.RegisterFunc(remoting.GetTopicConfig, b.handleGetTopicConfig) // admin_topicconfig.go
	r.RegisterFunc(remoting.UpdateBrokerConfig, b.handleUpdateBrokerConfig)
	r.RegisterFunc(remoting.GetProducerConnectionList, b.handleProducerConnections)
	r.RegisterFunc(remoting.GetConsumerRunningInfo, b.handleConsumerRunningInfo)
	r.RegisterFunc(remoting.ConsumeMessageDirectly, b.handleConsumeMessageDirectly)
	r.RegisterFunc(remoting.InvokeBrokerToGetConsumerStatus, b.handleConsumerStatus)
	r.RegisterFunc(remoting.CloneGroupOffset, b.handleCloneGroupOffset)
	r.RegisterFunc(remoting.QueryCorrectionOffset, b.handleQueryCorrectionOffset)
	r.RegisterFunc(remoting.QueryConsumeTimeSpan, b.handleQueryConsumeTimeSpan)
	r.RegisterFunc(remoting.GetBrokerConsumeStats, b.handleBrokerConsumeStats)
	r.RegisterFunc(remoting.QueryConsumeQueue, b.handleQueryConsumeQueue)
	r.RegisterFunc(remoting.GetSystemTopicListFromBroker, b.handleSystemTopicList)
	r.RegisterFunc(remoting.CleanExpiredConsumeQueue, b.handleCleanExpiredConsumeQueue)
	r.RegisterFunc(remoting.CleanUnusedTopic, b.handleCleanUnusedTopic)
	r.RegisterFunc(remoting.ResumeCheckHalfMessage, b.handleResumeCheckHalfMessage)
	r.RegisterFunc(remoting.ViewBrokerStatsData, b.handleViewBrokerStatsData)
	r.RegisterFunc(remoting.GetAllProducerInfo, b.handleAllProducerInfo)
	r.RegisterFunc(remoting.QueryTopicConsumeByWho, b.handleTopicConsumeByWho)
	r.RegisterFunc(remoting.DeleteExpiredCommitLog, b.handleDeleteExpiredCommitLog)
}
