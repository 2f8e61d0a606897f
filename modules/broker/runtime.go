package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
)

// PhysOffsetRanger is implemented by stores that know their commit-log
// range; GET_BROKER_RUNTIME_INFO then reports it exactly. Otherwise the
// broker reports the highest end it stored since it started.
type PhysOffsetRanger interface {
	PhysOffsets() (min, max int64)
}

// RuntimeInfo returns the broker's running figures, keyed as
// GET_BROKER_RUNTIME_INFO answers them: every key Java's
// AdminBrokerProcessor.prepareRuntimeInfo answers (with the store's
// StoreStatsService and DefaultMessageStore keys), in Java's string
// formats, so rocketmq-exporter's BrokerRuntimeStats and mqadmin
// brokerStatus parse it; plus quiver-prefixed keys for Quiver's own
// figures. Counts are since the broker started (Java's are since the
// store started: the same thing). Where Quiver has no equivalent the
// value is Java's idle value (0, or what Java answers for a disabled
// feature), as each line says.
func (b *Broker) RuntimeInfo() map[string]string {
	o := &b.obs
	now := time.Now()
	o.rt.rollDay(now, o.putMsgs.Load(), o.getMsgs.Load())
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	putMsgs, putBytes, getMsgs := o.putMsgs.Load(), o.putBytes.Load(), o.getMsgs.Load()
	fs := b.FlowStats()
	sec := now.Unix()
	// Java answers putMessageTimesTotal as 1 when nothing was put (it
	// divides by it for the average size).
	times := max(putMsgs, 1)
	dist := o.rt.lastMinute(now)
	t := map[string]string{
		// MQVersion: Quiver answers as a 4.9.8 broker.
		"brokerVersionDesc": "V4_9_8",
		// 4.x answered brokerVersion (MQVersion.CURRENT_VERSION) too, and
		// rocketmq-exporter parses it as an int.
		"brokerVersion": strconv.Itoa(codec.ServerVersion),
		// isSpecialServiceRunning: true on a master, as Java's.
		"brokerActive": strconv.FormatBool(!b.IsSlave()),

		// StoreStatsService.getRuntimeInfo.
		"bootTimestamp":            i(o.bootMs),
		"runtime":                  formatRuntime(now.UnixMilli() - o.bootMs),
		"putMessageEntireTimeMax":  i(o.rt.putMaxMs.Load()),
		"putMessageTimesTotal":     i(times),
		"putMessageFailedTimes":    i(fs.DiskFull + fs.StoreFailed), // sends the store refused
		"putMessageSizeTotal":      i(putBytes),
		"putMessageDistributeTime": formatDistribution(dist),
		"putMessageAverageSize":    javaDouble(float64(putBytes) / float64(times)),
		// dispatchMaxBuffer is the reput service's buffer high mark; Quiver
		// builds its queue index in the write path, with no such buffer.
		"dispatchMaxBuffer":       "0",
		"getMessageEntireTimeMax": i(o.rt.getMaxMs.Load()),
		"putTps":                  tpsTriple(&o.rt.put, nil, sec),
		"getFoundTps":             tpsTriple(&o.rt.getFound, nil, sec),
		"getMissTps":              tpsTriple(&o.rt.getMiss, nil, sec),
		"getTotalTps":             tpsTriple(&o.rt.getFound, &o.rt.getMiss, sec),
		"getTransferredTps":       tpsTriple(&o.rt.transferred, nil, sec),
		"putLatency99":            fmt.Sprintf("%.2f", percentileMs(dist, 0.99)),
		"putLatency999":           fmt.Sprintf("%.2f", percentileMs(dist, 0.999)),

		// BrokerStats: totals at the last two local midnights the broker
		// saw running (0 before it has seen one), and now.
		"msgPutTotalYesterdayMorning": i(o.rt.putYesterday.Load()),
		"msgPutTotalTodayMorning":     i(o.rt.putMorning.Load()),
		"msgPutTotalTodayNow":         i(putMsgs),
		"msgGetTotalYesterdayMorning": i(o.rt.getYesterday.Load()),
		"msgGetTotalTodayMorning":     i(o.rt.getMorning.Load()),
		"msgGetTotalTodayNow":         i(getMsgs),

		// No reput lag (the index is written with the message) and no
		// page-cache put lock to time.
		"dispatchBehindBytes":    "0",
		"pageCacheLockTimeMills": "0",
		// Store time of the first retained record (logFigures); -1, Java's
		// answer, when none can be read.
		"earliestMessageTimeStamp": "-1",
		// brokerConfig.startAcceptSendRequestTimeStamp: Java's default.
		"startAcceptSendRequestTimeStamp": "0",

		// The timer wheel (5.x delay-by-time) is reported as Java reports
		// it when timerWheelEnable is off.
		"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
		"timerEnqueueTps": "0.0", "timerDequeueTps": "0.0",

		// No transient store pool: Java answers Integer.MAX_VALUE then.
		"remainTransientStoreBufferNumbs": "2147483647",
		// Sends return once the store's flush mode is satisfied; Quiver
		// keeps no unflushed-bytes figure.
		"remainHowManyDataToFlush": humanBytes(0),

		// Thread-pool queues: Quiver runs requests on connection goroutines
		// with no queue in front of them. The send queue maps to the
		// flow-control window (sends admitted and not finished, and the
		// window's size); the other pools have no counterpart (0), and no
		// request waits at a queue head (0 ms).
		"sendThreadPoolQueueSize":                  i(fs.InFlight),
		"sendThreadPoolQueueCapacity":              strconv.Itoa(fs.Capacity),
		"pullThreadPoolQueueSize":                  "0",
		"pullThreadPoolQueueCapacity":              "0",
		"litePullThreadPoolQueueSize":              "0",
		"litePullThreadPoolQueueCapacity":          "0",
		"queryThreadPoolQueueSize":                 "0",
		"queryThreadPoolQueueCapacity":             "0",
		"ackThreadPoolQueueSize":                   "0",
		"ackThreadPoolQueueCapacity":               "0",
		"sendThreadPoolQueueHeadWaitTimeMills":     "0",
		"pullThreadPoolQueueHeadWaitTimeMills":     "0",
		"queryThreadPoolQueueHeadWaitTimeMills":    "0",
		"litePullThreadPoolQueueHeadWaitTimeMills": "0",
		"ackThreadPoolQueueHeadWaitTimeMills":      "0",
		"EndTransactionQueueSize":                  "0",
		"EndTransactionThreadPoolQueueCapacity":    "0",

		"commitLogMinOffset": "0",
		"commitLogMaxOffset": i(o.maxPhys.Load()),

		"quiverBytesPutTotal": i(putBytes),
		"quiverBytesGetTotal": i(o.getBytes.Load()),
		"quiverHeldPulls":     strconv.Itoa(b.holds.held()),
		"quiverConnections":   strconv.Itoa(len(b.Peers())),
	}
	if pr, ok := b.store.(PhysOffsetRanger); ok {
		min, max := pr.PhysOffsets()
		t["commitLogMinOffset"], t["commitLogMaxOffset"] = i(min), i(max)
	}
	b.logFigures(t)
	b.diskFigures(t)
	b.scheduleFigures(t)
	b.mirrorFigures(t) // mirror.go
	if b.server != nil {
		t["quiverConnectionsRefused"] = i(b.server.Refused())
	}
	for k, v := range b.flowFigures() {
		t[k] = v
	}
	return t
}

// logFigures adds, for a store with one commit log (store.LogReader),
// its retained range (commitLogMinOffset, commitLogMaxOffset) and the
// store time of its first record (earliestMessageTimeStamp, as Java's
// getEarliestMessageTime reads it).
func (b *Broker) logFigures(t map[string]string) {
	lr, ok := b.store.(store.LogReader)
	if !ok {
		return
	}
	min, max := lr.LogOffsets()
	t["commitLogMinOffset"], t["commitLogMaxOffset"] = strconv.FormatInt(min, 10), strconv.FormatInt(max, 10)
	if max <= min {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	recs, _, err := lr.ReadLog(ctx, min, 1)
	if err != nil || len(recs) == 0 {
		return
	}
	if h, err := message.PeekHeader(recs[0]); err == nil {
		t["earliestMessageTimeStamp"] = strconv.FormatInt(h.StoreTimestamp, 10)
	}
}

// diskFigures adds DefaultMessageStore's disk keys for the data
// directory: commitLogDiskRatio (and its per-path twin) and
// consumeQueueDiskRatio as the used share of its file system (Java's
// UtilAll.getDiskPartitionSpaceUsedPercent, retention.DiskUsage), and
// commitLogDirCapacity in Java's "Total : 1.0 GiB, Free : 512.0 MiB."
// format. A broker without a data directory (memory store) answers -1
// ratios, Java's answer for a missing path, and a zero capacity.
func (b *Broker) diskFigures(t map[string]string) {
	dir := b.DataDir()
	free, total, ok := uint64(0), uint64(0), false
	if dir != "" {
		free, total, ok = diskSpace(dir)
	}
	ratio := -1.0
	if ok && total > 0 {
		if r, err := retention.DiskUsage(dir); err == nil {
			ratio = r
		}
		t["commitLogDiskRatio_"+dir] = javaDouble(ratio)
	}
	t["commitLogDiskRatio"] = javaDouble(ratio)
	t["consumeQueueDiskRatio"] = javaDouble(ratio) // one directory holds both
	t["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.", humanBytes(int64(total)), humanBytes(int64(free)))
}

// scheduleFigures adds ScheduleMessageService.buildRunningStats'
// scheduleMessageOffset_<level> = "<delivered offset>,<max offset>" for
// every delay level the schedule module reports progress for.
func (b *Broker) scheduleFigures(t map[string]string) {
	req := remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil)
	if b.deps.Sign != nil {
		b.deps.Sign(req)
	}
	resp := b.router.Handle(context.Background(), nil, req)
	if resp == nil || resp.Code != remoting.Success {
		return
	}
	var doc struct {
		OffsetTable map[string]int64 `json:"offsetTable"`
	}
	if json.Unmarshal(resp.Body, &doc) != nil {
		return
	}
	for k, done := range doc.OffsetTable {
		level, err := strconv.Atoi(k)
		if err != nil || level < 1 {
			continue
		}
		_, max, err := b.store.Offsets(store.Queue{Topic: protocol.ScheduleTopic, ID: int32(level - 1)})
		if err != nil {
			max = 0
		}
		t["scheduleMessageOffset_"+k] = fmt.Sprintf("%d,%d", done, max)
	}
}

// flowFigures are the flow-control counters (busy answers by reason).
func (b *Broker) flowFigures() map[string]string {
	fs := b.FlowStats()
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	return map[string]string{
		"quiverFlowBusyQueue": i(fs.BusyQueue), "quiverFlowBusyStore": i(fs.BusyStore), "quiverFlowBusyQuota": i(fs.BusyQuota),
		"quiverFlowInFlight": i(fs.InFlight), "quiverFlowCapacity": strconv.Itoa(fs.Capacity), "quiverStoreDiskFull": i(fs.DiskFull),
		"quiverStoreWriteFailed": i(fs.StoreFailed),
	}
}

func (b *Broker) handleRuntimeInfo(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(map[string]any{"table": b.RuntimeInfo()})
	return resp
}

// registerRuntime feeds the runtime figures the hooks do not: send and
// pull timings and pulls that found nothing, from the router.
func (b *Broker) registerRuntime() {
	b.router.Observe(b.obs.rt.observe)
}

func nowMs() int64 { return time.Now().UnixMilli() }

// ringSecs is how many seconds of per-second counts a secondRing keeps:
// Java's largest TPS window (600 s) and the second being filled.
const ringSecs = 601

// secondRing counts events per wall-clock second over the last ringSecs
// seconds, for Java's 10/60/600-second TPS figures.
type secondRing struct {
	mu  sync.Mutex
	sec [ringSecs]int64
	n   [ringSecs]int64
}

func (r *secondRing) add(sec, n int64) {
	i := sec % ringSecs
	r.mu.Lock()
	if r.sec[i] != sec {
		r.sec[i], r.n[i] = sec, 0
	}
	r.n[i] += n
	r.mu.Unlock()
}

// sum is the count over the window full seconds before now.
func (r *secondRing) sum(now, window int64) int64 {
	var total int64
	r.mu.Lock()
	for s := now - window; s < now; s++ {
		if i := s % ringSecs; r.sec[i] == s {
			total += r.n[i]
		}
	}
	r.mu.Unlock()
	return total
}

// tpsTriple is Java's "<10s> <60s> <600s>" TPS string (per second, over
// the last 10, 60 and 600 full seconds) of a, plus b when given.
func tpsTriple(a, b *secondRing, now int64) string {
	parts := make([]string, 0, 3)
	for _, w := range []int64{10, 60, 600} {
		n := a.sum(now, w)
		if b != nil {
			n += b.sum(now, w)
		}
		parts = append(parts, javaDouble(float64(n)/float64(w)))
	}
	return strings.Join(parts, " ")
}

// distributionDesc are Java's putMessageDistributeTime buckets.
var distributionDesc = [...]string{"[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]"}

// distributionUpperMs is each bucket's upper bound in milliseconds.
var distributionUpperMs = [...]float64{0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000, 10000}

func distributionBucket(ms int64) int {
	for i, up := range distributionUpperMs[:len(distributionUpperMs)-1] {
		if i == 0 && ms <= 0 || i > 0 && float64(ms) < up {
			return i
		}
	}
	return len(distributionUpperMs) - 1
}

type distribution [len(distributionDesc)]int64

func formatDistribution(d distribution) string {
	var sb strings.Builder
	for i, n := range d {
		fmt.Fprintf(&sb, "%s:%d ", distributionDesc[i], n)
	}
	return sb.String()
}

// percentileMs is the upper bound of the bucket holding the p-th share
// of d (Java's findPutMessageEntireTimePX, on its coarser buckets).
func percentileMs(d distribution, p float64) float64 {
	var total int64
	for _, n := range d {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := int64(math.Ceil(float64(total) * p))
	var seen int64
	for i, n := range d {
		if seen += n; seen >= want {
			return distributionUpperMs[i]
		}
	}
	return distributionUpperMs[len(distributionUpperMs)-1]
}

// runtimeStats are the sampled figures of Java's StoreStatsService and
// BrokerStats that Quiver's plain counters do not give.
type runtimeStats struct {
	put, getFound, getMiss, transferred secondRing
	putMaxMs, getMaxMs                  atomic.Int64

	// Put-time distribution: the minute being filled and the last full
	// one (Java reports the last full minute).
	distMu            sync.Mutex
	distMin           int64
	distCur, distLast distribution

	// Day roll (BrokerStats' morning totals), local time.
	day                        atomic.Int64 // yyyymmdd of the last roll
	nextRollMs                 atomic.Int64 // the local midnight after it (the hot path's check)
	dayMu                      sync.Mutex
	putMorning, getMorning     atomic.Int64
	putYesterday, getYesterday atomic.Int64
}

func dayKey(t time.Time) int64 {
	y, m, d := t.Date()
	return int64(y)*10000 + int64(m)*100 + int64(d)
}

// rollDay moves the morning totals when a local midnight has passed
// since the last roll; put and get are the totals before now's events.
// The first call only notes the day (the broker saw no midnight yet).
func (r *runtimeStats) rollDay(now time.Time, put, get int64) {
	if now.UnixMilli() < r.nextRollMs.Load() {
		return
	}
	today := dayKey(now)
	r.dayMu.Lock()
	defer r.dayMu.Unlock()
	y, m, d := now.Date()
	r.nextRollMs.Store(time.Date(y, m, d+1, 0, 0, 0, 0, now.Location()).UnixMilli())
	last := r.day.Load()
	switch {
	case last == today:
		return
	case last == 0:
		// Started today: nothing was counted before this morning.
	case last == dayKey(now.AddDate(0, 0, -1)):
		r.putYesterday.Store(r.putMorning.Load())
		r.getYesterday.Store(r.getMorning.Load())
		r.putMorning.Store(put)
		r.getMorning.Store(get)
	default: // idle across more than one midnight
		r.putYesterday.Store(put)
		r.getYesterday.Store(get)
		r.putMorning.Store(put)
		r.getMorning.Store(get)
	}
	r.day.Store(today)
}

// observe is the router observer: send times feed the put distribution
// and maximum, pull times the get maximum, and pulls answered with
// nothing found count as misses (held pulls answered later are not seen
// here; found pulls are counted where their records are handed over).
func (r *runtimeStats) observe(code int32, d time.Duration, rc int32) {
	ms := d.Milliseconds()
	switch code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		if rc != remoting.Success {
			return
		}
		atomicMax(&r.putMaxMs, ms)
		min := time.Now().Unix() / 60
		r.distMu.Lock()
		r.rollDistLocked(min)
		r.distCur[distributionBucket(ms)]++
		r.distMu.Unlock()
	case remoting.PullMessage:
		switch rc {
		case remoting.Success:
			atomicMax(&r.getMaxMs, ms)
		case remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
			r.getMiss.add(time.Now().Unix(), 1)
		}
	}
}

func (r *runtimeStats) rollDistLocked(min int64) {
	if min == r.distMin {
		return
	}
	if min == r.distMin+1 {
		r.distLast = r.distCur
	} else {
		r.distLast = distribution{}
	}
	r.distCur, r.distMin = distribution{}, min
}

// lastMinute is the put-time distribution of the last full minute.
func (r *runtimeStats) lastMinute(now time.Time) distribution {
	r.distMu.Lock()
	defer r.distMu.Unlock()
	r.rollDistLocked(now.Unix() / 60)
	return r.distLast
}

func atomicMax(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// formatRuntime is StoreStatsService.getFormatRuntime.
func formatRuntime(ms int64) string {
	const sec, minute, hour, day = 1000, 60 * 1000, 3600 * 1000, 24 * 3600 * 1000
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", ms/day, ms%day/hour, ms%hour/minute, ms%minute/sec)
}

// humanBytes is MixAll.humanReadableByteCount(n, false): "512 B",
// "1.5 KiB", "2.0 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	exp := int(math.Log(float64(n)) / math.Log(1024))
	return fmt.Sprintf("%.1f %ciB", float64(n)/math.Pow(1024, float64(exp)), "KMGTPE"[exp-1])
}
