package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// javaRuntimeKeys are the fixed keys of Java's GET_BROKER_RUNTIME_INFO
// table, written out from Apache RocketMQ's sources:
// AdminBrokerProcessor.prepareRuntimeInfo, DefaultMessageStore.getRuntimeInfo
// and StoreStatsService.getRuntimeInfo (5.x), plus brokerVersion, which
// 4.x answered and rocketmq-exporter's BrokerRuntimeStats still parses.
// Left out: remainHowManyDataToCommit (only with transientStorePoolEnable)
// and the keys Java builds from names (scheduleMessageOffset_<level>,
// commitLogDiskRatio_<path>), checked apart.
var javaRuntimeKeys = []string{
	// StoreStatsService.getRuntimeInfo
	"bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
	"putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
	"getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferredTps",
	"putLatency99", "putLatency999",
	// DefaultMessageStore.getRuntimeInfo
	"commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
	// AdminBrokerProcessor.prepareRuntimeInfo
	"brokerActive", "brokerVersionDesc", "brokerVersion",
	"msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow",
	"msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
	"dispatchBehindBytes", "pageCacheLockTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
	"timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps",
	"remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity",
	"sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity",
	"litePullThreadPoolQueueSize", "litePullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
	"ackThreadPoolQueueSize", "ackThreadPoolQueueCapacity",
	"sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
	"litePullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueHeadWaitTimeMills",
	"EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity",
}

// exporterStats parses a runtime table as rocketmq-exporter's
// BrokerRuntimeStats constructor does (Long.parseLong, Double.parseDouble,
// the TPS triples, the distribution and the capacity string), failing
// where Java would throw.
func exporterStats(t *testing.T, tb map[string]string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	long := func(k string) {
		n, err := strconv.ParseInt(tb[k], 10, 64)
		require.NoError(t, err, "Long.parseLong(%s=%q)", k, tb[k])
		out[k] = float64(n)
	}
	double := func(k, v string) {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "Double.parseDouble(%s=%q)", k, v)
		out[k] = f
	}
	for _, k := range []string{"msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
		"msgGetTotalTodayNow", "queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning",
		"pullThreadPoolQueueSize", "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer",
		"pageCacheLockTimeMills", "commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal",
		"msgGetTotalTodayMorning", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax",
		"earliestMessageTimeStamp", "remainTransientStoreBufferNumbs", "queryThreadPoolQueueCapacity", "dispatchBehindBytes",
		"putMessageSizeTotal", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity"} {
		long(k)
	}
	n, err := strconv.Atoi(tb["brokerVersion"]) // Integer.parseInt
	require.NoError(t, err)
	out["brokerVersion"] = float64(n)
	for _, k := range []string{"consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize", "putLatency99", "putLatency999"} {
		double(k, tb[k])
	}
	double("remainHowManyDataToFlush", strings.Split(tb["remainHowManyDataToFlush"], " ")[0])
	for _, k := range []string{"putTps", "getMissTps", "getTransferredTps", "getTotalTps", "getFoundTps"} {
		arr := strings.Split(tb[k], " ")
		require.Len(t, arr, 3, k)
		for i, w := range []string{"10", "60", "600"} {
			double(k+w, arr[i])
		}
	}
	// loadCommitLogDirCapacity and Utils.machineReadableByteCount.
	arr := strings.Split(tb["commitLogDirCapacity"], " ")
	require.GreaterOrEqual(t, len(arr), 8, tb["commitLogDirCapacity"])
	readable := func(num, unit string) float64 {
		base, err := strconv.ParseFloat(num, 64)
		require.NoError(t, err)
		if unit == "B" {
			return base
		}
		return base * math.Pow(1024, float64(strings.IndexByte("KMGTPE", unit[0])+1))
	}
	out["commitLogDirCapacityTotal"] = readable(arr[2], arr[3][:len(arr[3])-1])
	out["commitLogDirCapacityFree"] = readable(arr[6], arr[7][:len(arr[7])-1])
	// loadPutMessageDistributeTime.
	for _, ar := range strings.Fields(tb["putMessageDistributeTime"]) {
		tarr := strings.Split(ar, ":")
		require.Len(t, tarr, 2, ar)
		v, err := strconv.Atoi(tarr[1])
		require.NoError(t, err)
		out["pmdt"+strings.NewReplacer("[", "", "]", "").Replace(tarr[0])] = float64(v)
	}
	// loadScheduleMessageOffsets.
	for k, v := range tb {
		if strings.HasPrefix(k, "scheduleMessageOffset") {
			arr := strings.Split(v, ",")
			require.Len(t, arr, 2, k)
			for _, s := range arr {
				_, err := strconv.ParseInt(s, 10, 64)
				require.NoError(t, err, k)
			}
		}
	}
	return out
}

// GET_BROKER_RUNTIME_INFO answers every key Java does, in formats
// rocketmq-exporter parses, from the broker's traffic.
func TestRuntimeInfoJavaKeys(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for i := 0; i < 4; i++ {
		require.Equal(t, remoting.Success, h.send("RtTopic", 0, fmt.Sprintf("m%d", i), nil).Code)
	}
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "RG", "RtTopic", "*")).Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.PullMessage, pullExt("RG", "RtTopic", 0, 0, 0, 0), nil).Code)
	// A pull at the end finds nothing: a miss.
	require.Equal(t, remoting.PullNotFound, h.invoke(remoting.PullMessage, pullExt("RG", "RtTopic", 0, 4, 0, 0), nil).Code)

	// The TPS rings saw the puts, the found pull (4 messages) and the miss.
	next := time.Now().Unix() + 1
	assert.EqualValues(t, 4, h.b.obs.rt.put.sum(next, 10))
	assert.EqualValues(t, 1, h.b.obs.rt.getFound.sum(next, 10))
	assert.EqualValues(t, 4, h.b.obs.rt.transferred.sum(next, 10))
	assert.EqualValues(t, 1, h.b.obs.rt.getMiss.sum(next, 10))

	resp := h.invoke(remoting.GetBrokerRuntimeInfo, nil, nil)
	require.Equal(t, remoting.Success, resp.Code)
	var rt struct {
		Table map[string]string `json:"table"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &rt))
	var missing []string
	for _, k := range javaRuntimeKeys {
		if _, ok := rt.Table[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "keys Java answers and Quiver does not")
	for k := range rt.Table {
		if !strings.HasPrefix(k, "quiver") && !strings.HasPrefix(k, "commitLogDiskRatio_") && !strings.HasPrefix(k, "scheduleMessageOffset_") {
			assert.Contains(t, javaRuntimeKeys, k, "key Java does not answer should be quiver-prefixed")
		}
	}

	st := exporterStats(t, rt.Table)
	assert.EqualValues(t, 4, st["msgPutTotalTodayNow"])
	assert.EqualValues(t, 4, st["putMessageTimesTotal"])
	assert.EqualValues(t, 4, st["msgGetTotalTodayNow"])
	assert.Positive(t, st["putMessageSizeTotal"])
	assert.InDelta(t, st["putMessageSizeTotal"]/4, st["putMessageAverageSize"], 1e-9)
	assert.Positive(t, st["commitLogDirCapacityTotal"])
	assert.Positive(t, st["commitLogDiskRatio"])
	assert.LessOrEqual(t, st["commitLogDiskRatio"], 1.0)
	assert.Contains(t, st, "pmdt<=0ms")
	assert.Contains(t, st, "pmdt10s~")
	assert.Equal(t, float64(codec.ServerVersion), st["brokerVersion"])
	assert.Equal(t, "true", rt.Table["brokerActive"])
	// The commit log's range and its first record's store time.
	assert.Zero(t, st["commitLogMinOffset"])
	assert.Positive(t, st["commitLogMaxOffset"])
	assert.InDelta(t, float64(time.Now().UnixMilli()), st["earliestMessageTimeStamp"], float64(time.Minute.Milliseconds()))
	assert.Regexp(t, `^\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]$`, rt.Table["runtime"])
}

// The TPS windows count whole seconds before now: 10 s, 60 s, 600 s.
func TestSecondRingWindows(t *testing.T) {
	var put, miss secondRing
	now := int64(1_000_000)
	for s := now - 700; s < now; s++ {
		put.add(s, 2) // 2 per second for 700 s
	}
	put.add(now, 1000) // the second being filled is not counted
	miss.add(now-5, 30)
	assert.Equal(t, "2.0 2.0 2.0", tpsTriple(&put, nil, now))
	assert.Equal(t, "5.0 2.5 2.05", tpsTriple(&put, &miss, now))
	// Slots older than the ring are not read back as new ones.
	var old secondRing
	old.add(now-ringSecs, 7)
	assert.Equal(t, "0.0 0.0 0.0", tpsTriple(&old, nil, now))
}

// Morning totals move at local midnight: yesterday's morning takes
// today's, today's takes the count at the roll.
func TestRuntimeDayRoll(t *testing.T) {
	var r runtimeStats
	d0 := time.Date(2026, 3, 1, 15, 0, 0, 0, time.Local)
	r.rollDay(d0, 10, 5)
	assert.Zero(t, r.putMorning.Load(), "started today: no morning seen")
	r.rollDay(d0.Add(2*time.Hour), 20, 6)
	assert.Zero(t, r.putMorning.Load())
	d1 := time.Date(2026, 3, 2, 0, 0, 1, 0, time.Local)
	r.rollDay(d1, 30, 7)
	assert.EqualValues(t, 30, r.putMorning.Load())
	assert.EqualValues(t, 7, r.getMorning.Load())
	assert.Zero(t, r.putYesterday.Load())
	r.rollDay(d1.AddDate(0, 0, 1), 45, 9)
	assert.EqualValues(t, 30, r.putYesterday.Load())
	assert.EqualValues(t, 7, r.getYesterday.Load())
	assert.EqualValues(t, 45, r.putMorning.Load())
	r.rollDay(d1.AddDate(0, 0, 5), 50, 9) // idle over several midnights
	assert.EqualValues(t, 50, r.putYesterday.Load())
	assert.EqualValues(t, 50, r.putMorning.Load())
}

// The put-time distribution and percentiles are those of the last full
// minute, in Java's buckets.
func TestRuntimePutDistribution(t *testing.T) {
	assert.Equal(t, 0, distributionBucket(0))
	assert.Equal(t, 1, distributionBucket(9))
	assert.Equal(t, 2, distributionBucket(10))
	assert.Equal(t, 6, distributionBucket(999))
	assert.Equal(t, 12, distributionBucket(10_000))
	d := distribution{0: 990, 2: 9, 7: 1}
	assert.Equal(t, 0.0, percentileMs(d, 0.99))
	assert.Equal(t, 50.0, percentileMs(d, 0.999))
	assert.Equal(t, "[<=0ms]:990 [0~10ms]:0 [10~50ms]:9 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 [1~2s]:1 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0 ", formatDistribution(d))
	assert.Equal(t, "512 B", humanBytes(512))
	assert.Equal(t, "1.5 KiB", humanBytes(1536))
	assert.Equal(t, "2.0 GiB", humanBytes(2<<30))
}
