package metrics

// rocketmq-exporter compatible series (metrics.rocketmq_exporter_compat).
//
// Apache rocketmq-exporter polls brokers over the admin protocol and
// serves rocketmq_* gauges; its Grafana dashboard (grafana.com 10477) and
// alert rules query those names. This collector serves the same names,
// label names and units from the broker's own counters, so the dashboard
// and rules work against a Quiver broker's /metrics with no exporter in
// between. Values are computed as the exporter computes them:
//
//   - rocketmq_producer_tps, _producer_message_size, _consumer_tps,
//     _consumer_message_size, _broker_tps, _broker_qps: the minute window
//     of VIEW_BROKER_STATS_DATA's statistics (TOPIC_PUT_NUMS/SIZE,
//     GROUP_GET_NUMS/SIZE, BROKER_PUT/GET_NUMS), per second, rounded to
//     two decimals (the exporter's Utils.getFixedDouble); a statistic never
//     counted has no series, as the exporter gets an error for it.
//   - offsets and diffs: sums over the topic's queues on this broker of
//     the max offset and the group's committed offset (0 where none), as
//     ConsumeStats and TopicStatsTable sum them.
//   - rocketmq_brokeruntime_*: the GET_BROKER_RUNTIME_INFO table parsed as
//     the exporter's BrokerRuntimeStats parses it.
//
// The exporter labels every series with the cluster it polls; each Quiver
// broker serves only its own, so a cluster-wide figure is a sum over the
// brokers' scrapes (rocketmq_group_diff has no broker label: sum it by
// (group, topic)). Cardinality: one series per topic for the topic
// families, one per (group, topic) pair the broker knows (committed
// offsets and online subscriptions) for the group families, one per
// online consumer group for rocketmq_group_count, one per producer group
// for rocketmq_producer_count, 63 broker-runtime series, and six per
// (online consumer client, topic) for rocketmq_client_* (at most
// compatClientCalls clients asked per scrape).
//
// rocketmq_client_* are the clients' own figures: as the exporter does,
// each online consumer is asked GET_CONSUMER_RUNNING_INFO and its
// statusTable reported. The calls run in parallel within the scrape,
// bounded in number (compatClientCalls) and time (compatClientTimeout); a
// client that does not answer in time has no series at that scrape and
// is not asked again for a minute (compatClientMute).
// Clients whose statusTable is empty (Quiver's Go client keeps none) have
// no client series.
//
// Not served: rocketmq_group_consume_total_offset and
// rocketmq_group_dlqdiff (the exporter declares them and never fills
// them), rocketmq_send_back_nums (the broker keeps no SNDBCK_PUT_NUMS
// statistic).

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// Label names, as RMQMetricsCollector declares them.
var (
	compatTopicLabels    = []string{"cluster", "broker", "topic"}
	compatDLQLabels      = []string{"cluster", "broker", "group"}
	compatGroupLabels    = []string{"cluster", "broker", "topic", "group"}
	compatDiffLabels     = []string{"group", "topic", "countOfOnlineConsumers", "msgModel"}
	compatCountLabels    = []string{"caddr", "localaddr", "group"}
	compatProducerLabels = []string{"cluster", "broker", "group"}
	compatBrokerLabels   = []string{"cluster", "brokerIP", "broker"}
	compatRuntimeLabels  = []string{"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}
	compatClientLabels   = []string{"clientAddr", "clientId", "group", "topic"}
)

// Bounds on the GET_CONSUMER_RUNNING_INFO calls of one scrape, and how
// long a client whose call failed is left out of them.
const (
	compatClientCalls   = 64
	compatClientTimeout = 3 * time.Second
	compatClientMute    = time.Minute
)

func compatDesc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help+" (rocketmq-exporter compatible).", labels, nil)
}

var (
	cdProducerTPS     = compatDesc("rocketmq_producer_tps", "Messages per second put to the topic over the last minute", compatTopicLabels)
	cdProducerSize    = compatDesc("rocketmq_producer_message_size", "Bytes per second put to the topic over the last minute", compatTopicLabels)
	cdProducerOffset  = compatDesc("rocketmq_producer_offset", "Max offsets of the topic's queues, summed", compatTopicLabels)
	cdRetryOffset     = compatDesc("rocketmq_topic_retry_offset", "Max offsets of the retry topic's queues, summed", compatTopicLabels)
	cdDLQOffset       = compatDesc("rocketmq_topic_dlq_offset", "Max offsets of the group's dead-letter queues, summed", compatDLQLabels)
	cdProducerCount   = compatDesc("rocketmq_producer_count", "Producer instances of the group connected", compatProducerLabels)
	cdConsumerTPS     = compatDesc("rocketmq_consumer_tps", "Messages per second the group pulled from the topic over the last minute", compatGroupLabels)
	cdGroupTPS        = compatDesc("rocketmq_group_consume_tps", "The group's consume TPS on the topic (ConsumeStats.consumeTps: its pull rate over the last minute)", compatGroupLabels)
	cdConsumerSize    = compatDesc("rocketmq_consumer_message_size", "Bytes per second the group pulled from the topic over the last minute", compatGroupLabels)
	cdConsumerOffset  = compatDesc("rocketmq_consumer_offset", "The group's committed offsets on the topic's queues, summed", compatGroupLabels)
	cdLatency         = compatDesc("rocketmq_group_get_latency_by_storetime", "Milliseconds since the store time of the oldest message the group has yet to consume on the topic (max over queues; 0 when caught up)", compatGroupLabels)
	cdGroupDiff       = compatDesc("rocketmq_group_diff", "Messages the clustering group has yet to consume on the topic", compatDiffLabels)
	cdGroupRetryDiff  = compatDesc("rocketmq_group_retrydiff", "Messages the clustering group has yet to consume on its retry topic", compatDiffLabels)
	cdGroupCount      = compatDesc("rocketmq_group_count", "Consumer instances of the group online", compatCountLabels)
	cdBrokerTPS       = compatDesc("rocketmq_broker_tps", "Messages per second put to the broker over the last minute", compatBrokerLabels)
	cdBrokerQPS       = compatDesc("rocketmq_broker_qps", "Messages per second pulled from the broker over the last minute", compatBrokerLabels)
	cdCommitLogDiff   = compatDesc("rocketmq_broker_commitlog_diff", "On a slave: commit-log bytes it is behind its master", compatBrokerLabels)
	cdClientFailMsgs  = compatDesc("rocketmq_client_consume_fail_msg_count", "Messages the client failed to consume in the last hour (its statusTable consumeFailedMsgs)", compatClientLabels)
	cdClientFailTPS   = compatDesc("rocketmq_client_consume_fail_msg_tps", "Messages per second the client failed to consume (consumeFailedTPS)", compatClientLabels)
	cdClientOKTPS     = compatDesc("rocketmq_client_consume_ok_msg_tps", "Messages per second the client consumed (consumeOKTPS)", compatClientLabels)
	cdClientConsumeRT = compatDesc("rocketmq_client_consume_rt", "The client's average consume time in milliseconds (consumeRT)", compatClientLabels)
	cdClientPullRT    = compatDesc("rocketmq_client_consumer_pull_rt", "The client's average pull time in milliseconds (pullRT)", compatClientLabels)
	cdClientPullTPS   = compatDesc("rocketmq_client_consumer_pull_tps", "Messages per second the client pulled (pullTPS)", compatClientLabels)
	compatStaticDescs = []*prometheus.Desc{cdClientFailMsgs, cdClientFailTPS, cdClientOKTPS, cdClientConsumeRT, cdClientPullRT, cdClientPullTPS,
		cdProducerTPS, cdProducerSize, cdProducerOffset, cdRetryOffset, cdDLQOffset, cdProducerCount,
		cdConsumerTPS, cdGroupTPS, cdConsumerSize, cdConsumerOffset, cdLatency, cdGroupDiff, cdGroupRetryDiff, cdGroupCount,
		cdBrokerTPS, cdBrokerQPS, cdCommitLogDiff}
)

// runtimeSeries maps each rocketmq_brokeruntime_* name to its value in
// the parsed runtime table (parseRuntimeStats' keys).
var runtimeSeries = [][2]string{
	{"msg_put_total_today_now", "msgPutTotalTodayNow"}, {"msg_gettotal_today_now", "msgGetTotalTodayNow"},
	{"msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning"}, {"msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning"},
	{"msg_gettotal_todaymorning", "msgGetTotalTodayMorning"}, {"msg_puttotal_todaymorning", "msgPutTotalTodayMorning"},
	{"dispatch_behind_bytes", "dispatchBehindBytes"}, {"put_message_size_total", "putMessageSizeTotal"},
	{"put_message_average_size", "putMessageAverageSize"}, {"query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity"},
	{"remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs"}, {"earliest_message_timestamp", "earliestMessageTimeStamp"},
	{"putmessage_entire_time_max", "putMessageEntireTimeMax"}, {"start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp"},
	{"send_threadpool_queue_size", "sendThreadPoolQueueSize"}, {"putmessage_times_total", "putMessageTimesTotal"},
	{"getmessage_entire_time_max", "getMessageEntireTimeMax"}, {"pagecache_lock_time_mills", "pageCacheLockTimeMills"},
	{"commitlog_disk_ratio", "commitLogDiskRatio"}, {"consumequeue_disk_ratio", "consumeQueueDiskRatio"},
	{"getfound_tps600", "getFoundTps600"}, {"getfound_tps60", "getFoundTps60"}, {"getfound_tps10", "getFoundTps10"},
	{"gettotal_tps600", "getTotalTps600"}, {"gettotal_tps60", "getTotalTps60"}, {"gettotal_tps10", "getTotalTps10"},
	{"gettransfered_tps600", "getTransferredTps600"}, {"gettransfered_tps60", "getTransferredTps60"}, {"gettransfered_tps10", "getTransferredTps10"},
	{"getmiss_tps600", "getMissTps600"}, {"getmiss_tps60", "getMissTps60"}, {"getmiss_tps10", "getMissTps10"},
	{"put_tps600", "putTps600"}, {"put_tps60", "putTps60"}, {"put_tps10", "putTps10"},
	{"dispatch_maxbuffer", "dispatchMaxBuffer"},
	{"pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity"}, {"send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity"},
	{"pull_threadpoolqueue_size", "pullThreadPoolQueueSize"}, {"query_threadpoolqueue_size", "queryThreadPoolQueueSize"},
	{"pull_threadpoolqueue_headwait_timemills", "pullThreadPoolQueueHeadWaitTimeMills"},
	{"query_threadpoolqueue_headwait_timemills", "queryThreadPoolQueueHeadWaitTimeMills"},
	{"send_threadpoolqueue_headwait_timemills", "sendThreadPoolQueueHeadWaitTimeMills"},
	{"commitlogdir_capacity_free", "commitLogDirCapacityFree"}, {"commitlogdir_capacity_total", "commitLogDirCapacityTotal"},
	{"commitlog_maxoffset", "commitLogMaxOffset"}, {"commitlog_minoffset", "commitLogMinOffset"},
	{"remain_howmanydata_toflush", "remainHowManyDataToFlush"},
	{"put_latency_99", "putLatency99"}, {"put_latency_999", "putLatency999"},
	{"pmdt_0ms", "pmdt<=0ms"}, {"pmdt_0to10ms", "pmdt0~10ms"}, {"pmdt_10to50ms", "pmdt10~50ms"}, {"pmdt_50to100ms", "pmdt50~100ms"},
	{"pmdt_100to200ms", "pmdt100~200ms"}, {"pmdt_200to500ms", "pmdt200~500ms"}, {"pmdt_500to1s", "pmdt500ms~1s"},
	{"pmdt_1to2s", "pmdt1~2s"}, {"pmdt_2to3s", "pmdt2~3s"}, {"pmdt_3to4s", "pmdt3~4s"}, {"pmdt_4to5s", "pmdt4~5s"},
	{"pmdt_5to10s", "pmdt5~10s"}, {"pmdt_10stomore", "pmdt10s~"},
}

var runtimeDescs = func() []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(runtimeSeries))
	for i, s := range runtimeSeries {
		out[i] = compatDesc("rocketmq_brokeruntime_"+s[0], "GET_BROKER_RUNTIME_INFO "+s[1], compatRuntimeLabels)
	}
	return out
}()

// compatCollector serves the rocketmq-exporter compatible series.
type compatCollector struct {
	s *Service
	// timeout bounds one scrape's client calls (compatClientTimeout).
	timeout time.Duration

	// mute holds, by group and client id, until when a client whose
	// running-info call failed (no answer in time, or an error) is not
	// asked again: one wedged consumer must not slow every scrape.
	muteMu sync.Mutex
	mute   map[string]time.Time
}

// Describe sends every family's description (all are fixed).
func (c *compatCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range compatStaticDescs {
		ch <- d
	}
	for _, d := range runtimeDescs {
		ch <- d
	}
}

// compatGauge sends one gauge.
func compatGauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// fixed2 is the exporter's Utils.getFixedDouble: two decimals.
func fixed2(v float64) float64 { return math.Round(v*100) / 100 }

// Collect computes, at scrape time: the broker's rates and, on a slave,
// its replication lag; each topic's max offsets and put rates; the
// consumer-group families; producer counts; the online consumers'
// running info; and the runtime table.
func (c *compatCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.s.deps.Broker
	cfg := b.Config()
	cluster, name, ip := cfg.Cluster, cfg.Name, cfg.AdvertiseAddr()
	st := b.Store()
	offsets := b.ConsumerOffsets()

	stat := func(d *prometheus.Desc, stat, key string, labels ...string) {
		if m, _, _, ok := b.BrokerStatsData(stat, key); ok {
			compatGauge(ch, d, fixed2(m.Tps), labels...)
		}
	}
	stat(cdBrokerTPS, broker.StatsBrokerPutNums, cluster, cluster, ip, name)
	stat(cdBrokerQPS, broker.StatsBrokerGetNums, cluster, cluster, ip, name)
	if r := c.s.deps.Replica; r != nil && b.IsSlave() {
		compatGauge(ch, cdCommitLogDiff, float64(r.Lag()), cluster, ip, name)
	}

	// Topics: max offsets, put rates.
	for _, topic := range b.Topics() {
		var sum int64
		for id := int32(0); id < b.QueueCount(topic); id++ {
			if _, max, ok := queueOffsets(st, topic, id); ok {
				sum += max
			}
		}
		switch {
		case protocol.IsRetryTopic(topic):
			compatGauge(ch, cdRetryOffset, float64(sum), cluster, name, topic)
		case strings.HasPrefix(topic, protocol.DLQGroupPrefix):
			compatGauge(ch, cdDLQOffset, float64(sum), cluster, name, strings.TrimPrefix(topic, protocol.DLQGroupPrefix))
		default:
			compatGauge(ch, cdProducerOffset, float64(sum), cluster, name, topic)
			stat(cdProducerTPS, broker.StatsTopicPutNums, topic, cluster, name, topic)
			stat(cdProducerSize, broker.StatsTopicPutSize, topic, cluster, name, topic)
		}
	}

	online := onlineGroups(b)
	c.collectGroups(ch, st, offsets, online, cluster, name)
	c.collectProducers(ch, cluster, name)
	c.collectClients(ch, online)
	c.collectRuntime(ch, b.RuntimeInfo(), cluster, ip)
}

// onlineGroups snapshots the connections of every online consumer group.
func onlineGroups(b *broker.Broker) map[string]broker.ConsumerConnection {
	out := map[string]broker.ConsumerConnection{}
	for _, group := range b.ConsumerGroups() {
		if cc, ok := b.ConsumerConnections(group); ok {
			out[group] = cc
		}
	}
	return out
}

// groupPairs are the (group, topic) pairs the broker knows of: committed
// offsets and online subscriptions (the exporter asks
// queryTopicConsumeByWho, which answers both), dead-letter topics aside.
func groupPairs(offsets groupOffsets, online map[string]broker.ConsumerConnection) map[[2]string]bool {
	pairs := map[[2]string]bool{}
	for group, topics := range offsets {
		for topic := range topics {
			pairs[[2]string{group, topic}] = true
		}
	}
	for group, cc := range online {
		for topic := range cc.SubscriptionTable {
			pairs[[2]string{group, topic}] = true
		}
	}
	for p := range pairs {
		if strings.HasPrefix(p[1], protocol.DLQGroupPrefix) {
			delete(pairs, p)
		}
	}
	return pairs
}

// collectGroups serves the consumer-group families: diffs and counts per
// group, offsets, rates and latency per (group, topic).
func (c *compatCollector) collectGroups(ch chan<- prometheus.Metric, st store.Store, offsets groupOffsets, conns map[string]broker.ConsumerConnection, cluster, name string) {
	b := c.s.deps.Broker
	for group, cc := range conns {
		addrs := make([]string, 0, len(cc.ConnectionSet))
		ids := make([]string, 0, len(cc.ConnectionSet))
		for _, conn := range cc.ConnectionSet {
			addrs, ids = append(addrs, conn.ClientAddr), append(ids, conn.ClientID)
		}
		compatGauge(ch, cdGroupCount, float64(len(cc.ConnectionSet)), strings.Join(addrs, ","), strings.Join(ids, ","), group)
	}
	dm := c.s.delay.begin(st)
	defer dm.end()
	for p := range groupPairs(offsets, conns) {
		group, topic := p[0], p[1]
		online, broadcasting := 0, false
		if cc, ok := conns[group]; ok {
			online, broadcasting = len(cc.ConnectionSet), cc.MessageModel == "BROADCASTING"
		}
		var diff, consumed int64
		var latency time.Duration
		for id := int32(0); id < b.QueueCount(topic); id++ {
			min, max, ok := queueOffsets(st, topic, id)
			if !ok {
				continue
			}
			off := offsets[group][topic][id] // 0 where never committed, as ConsumeStats
			consumed += off
			diff += max64(max-off, 0)
			if d, ok := dm.delay(store.Queue{Topic: topic, ID: id}, max64(off, min), max); ok && d > latency {
				latency = d
			}
		}
		// The exporter reports diffs and latency for clustering groups
		// only (msgModel is MessageModel.CLUSTERING's ordinal).
		if !broadcasting {
			d := cdGroupDiff
			if protocol.IsRetryTopic(topic) {
				d = cdGroupRetryDiff
			}
			compatGauge(ch, d, float64(diff), group, topic, strconv.Itoa(online), "1")
		}
		if protocol.IsRetryTopic(topic) {
			continue
		}
		compatGauge(ch, cdConsumerOffset, float64(consumed), cluster, name, topic, group)
		if !broadcasting {
			compatGauge(ch, cdLatency, float64(latency.Milliseconds()), cluster, name, topic, group)
		}
		if m, _, _, ok := b.BrokerStatsData(broker.StatsGroupGetNums, topic+"@"+group); ok {
			compatGauge(ch, cdConsumerTPS, fixed2(m.Tps), cluster, name, topic, group)
			compatGauge(ch, cdGroupTPS, fixed2(m.Tps), cluster, name, topic, group)
		}
		if m, _, _, ok := b.BrokerStatsData(broker.StatsGroupGetSize, topic+"@"+group); ok {
			compatGauge(ch, cdConsumerSize, fixed2(m.Tps), cluster, name, topic, group)
		}
	}
}

// collectProducers serves rocketmq_producer_count from
// GET_ALL_PRODUCER_INFO, asked in process.
func (c *compatCollector) collectProducers(ch chan<- prometheus.Metric, cluster, name string) {
	body := c.s.ask(remoting.GetAllProducerInfo)
	if body == nil {
		return
	}
	var doc struct {
		Data map[string][]json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return
	}
	groups := make([]string, 0, len(doc.Data))
	for g := range doc.Data {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		compatGauge(ch, cdProducerCount, float64(len(doc.Data[g])), cluster, name, g)
	}
}

// clientStatus is one topic's row of a ConsumerRunningInfo statusTable
// (Java ConsumeStatus).
type clientStatus struct {
	PullRT            float64 `json:"pullRT"`
	PullTPS           float64 `json:"pullTPS"`
	ConsumeRT         float64 `json:"consumeRT"`
	ConsumeOKTPS      float64 `json:"consumeOKTPS"`
	ConsumeFailedTPS  float64 `json:"consumeFailedTPS"`
	ConsumeFailedMsgs float64 `json:"consumeFailedMsgs"`
}

// collectClients asks every online consumer (up to compatClientCalls)
// for its running info, in parallel, and serves its statusTable.
func (c *compatCollector) collectClients(ch chan<- prometheus.Metric, conns map[string]broker.ConsumerConnection) {
	type target struct{ group, addr, id string }
	var targets []target
	groups := make([]string, 0, len(conns))
	for g := range conns {
		groups = append(groups, g)
	}
	sort.Strings(groups) // the same clients are asked at every scrape
	now := time.Now()
	c.muteMu.Lock()
	for k, until := range c.mute {
		if now.After(until) {
			delete(c.mute, k)
		}
	}
	for _, group := range groups {
		for _, conn := range conns[group].ConnectionSet {
			if _, muted := c.mute[group+"\x00"+conn.ClientID]; !muted && len(targets) < compatClientCalls {
				targets = append(targets, target{group, conn.ClientAddr, conn.ClientID})
			}
		}
	}
	c.muteMu.Unlock()
	if len(targets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	results := make([]map[string]clientStatus, len(targets))
	failed := make([]bool, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], failed[i] = c.s.clientStatus(ctx, t.group, t.id)
		}()
	}
	wg.Wait()
	c.muteMu.Lock()
	for i, t := range targets {
		if failed[i] {
			c.mute[t.group+"\x00"+t.id] = time.Now().Add(compatClientMute)
		}
	}
	c.muteMu.Unlock()
	for i, t := range targets {
		for topic, st := range results[i] {
			l := []string{t.addr, t.id, t.group, topic}
			compatGauge(ch, cdClientFailMsgs, st.ConsumeFailedMsgs, l...)
			compatGauge(ch, cdClientFailTPS, st.ConsumeFailedTPS, l...)
			compatGauge(ch, cdClientOKTPS, st.ConsumeOKTPS, l...)
			compatGauge(ch, cdClientConsumeRT, st.ConsumeRT, l...)
			compatGauge(ch, cdClientPullRT, st.PullRT, l...)
			compatGauge(ch, cdClientPullTPS, st.PullTPS, l...)
		}
	}
}

// clientStatus asks one consumer for its ConsumerRunningInfo through the
// broker (GET_CONSUMER_RUNNING_INFO, in process) and returns its
// statusTable (nil when it has none); failed is true when the call did
// not succeed.
func (s *Service) clientStatus(ctx context.Context, group, clientID string) (_ map[string]clientStatus, failed bool) {
	req := remoting.NewRequest(remoting.GetConsumerRunningInfo, map[string]string{
		"consumerGroup": group, "clientId": clientID, "jstackEnable": "false"}, nil)
	if s.deps.Sign != nil {
		s.deps.Sign(req)
	}
	resp := s.deps.Broker.Router().Handle(ctx, nil, req)
	if resp == nil || resp.Code != remoting.Success {
		return nil, true
	}
	// fastjson writes mqTable with object keys; only statusTable is read.
	var doc map[string]json.RawMessage
	if protocol.UnmarshalFastjson(resp.Body, &doc) != nil {
		return nil, false
	}
	var out map[string]clientStatus
	if raw, ok := doc["statusTable"]; !ok || json.Unmarshal(raw, &out) != nil {
		return nil, false
	}
	return out, false
}

// collectRuntime serves rocketmq_brokeruntime_* from the runtime table.
// brokerHost is empty, as the exporter sets it.
func (c *compatCollector) collectRuntime(ch chan<- prometheus.Metric, table map[string]string, cluster, ip string) {
	v := parseRuntimeStats(table)
	labels := []string{cluster, ip, "", table["brokerVersionDesc"], table["bootTimestamp"], table["brokerVersion"]}
	for i, s := range runtimeSeries {
		if x, ok := v[s[1]]; ok {
			compatGauge(ch, runtimeDescs[i], x, labels...)
		}
	}
}

// parseRuntimeStats reads a runtime table as rocketmq-exporter's
// BrokerRuntimeStats does: numbers as they are, the TPS triples split into
// <key>10/60/600, remainHowManyDataToFlush's number (unit dropped, as the
// exporter drops it), commitLogDirCapacity into bytes, and the put-time
// distribution into pmdt<bucket>. Unparsable values are left out.
func parseRuntimeStats(table map[string]string) map[string]float64 {
	out := map[string]float64{}
	for k, s := range table {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			out[k] = f
		}
	}
	for _, k := range []string{"putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferredTps"} {
		for i, part := range strings.Split(table[k], " ") {
			if f, err := strconv.ParseFloat(part, 64); err == nil && i < 3 {
				out[k+[]string{"10", "60", "600"}[i]] = f
			}
		}
	}
	if f, err := strconv.ParseFloat(strings.Split(table["remainHowManyDataToFlush"], " ")[0], 64); err == nil {
		out["remainHowManyDataToFlush"] = f
	}
	if arr := strings.Split(table["commitLogDirCapacity"], " "); len(arr) >= 8 {
		if f, ok := readableBytes(arr[2], strings.TrimSuffix(arr[3], ",")); ok {
			out["commitLogDirCapacityTotal"] = f
		}
		if f, ok := readableBytes(arr[6], strings.TrimSuffix(arr[7], ".")); ok {
			out["commitLogDirCapacityFree"] = f
		}
	}
	for _, ar := range strings.Fields(table["putMessageDistributeTime"]) {
		if k, n, ok := strings.Cut(ar, ":"); ok {
			if f, err := strconv.ParseFloat(n, 64); err == nil {
				out["pmdt"+strings.Trim(k, "[]")] = f
			}
		}
	}
	return out
}

// readableBytes is the exporter's Utils.machineReadableByteCount: "1.5
// GiB" is 1.5 * 1024^3.
func readableBytes(num, unit string) (float64, bool) {
	base, err := strconv.ParseFloat(num, 64)
	if err != nil || unit == "" {
		return 0, false
	}
	if unit == "B" {
		return base, true
	}
	exp := strings.IndexByte("KMGTPE", unit[0]) + 1
	return base * math.Pow(1024, float64(exp)), true
}

// ask sends code to the broker's router in process (signed when ACL is
// on) and returns the answer's body; nil when it did not succeed.
func (s *Service) ask(code int32) []byte {
	req := remoting.NewRequest(code, nil, nil)
	if s.deps.Sign != nil {
		s.deps.Sign(req)
	}
	resp := s.deps.Broker.Router().Handle(context.Background(), nil, req)
	if resp == nil || resp.Code != remoting.Success {
		return nil
	}
	return resp.Body
}
