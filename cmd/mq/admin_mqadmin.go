package main

// mqadmin's commands whose output scripts parse, printed as mqadmin
// prints them (clusterList with and without -m, topicList with and
// without -c, printMsg, printMsgByQueue, updateBrokerConfig), mqadmin's
// updateTopicPerm, mqadmin's long option names and case-insensitive
// command names (mqadmin compares names in upper case).

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
)

// mqadminLongNames are mqadmin's long option names by command, short name
// first, where they differ from the flag's name here; javaLongNames makes
// each an alias of the flag with that short name.
var mqadminLongNames = map[string][][2]string{
	"updateTopic":         {{"b", "brokerAddr"}, {"c", "clusterName"}, {"r", "readQueueNums"}, {"w", "writeQueueNums"}},
	"deleteTopic":         {{"c", "clusterName"}},
	"updateTopicPerm":     {{"b", "brokerAddr"}, {"c", "clusterName"}},
	"updateSubGroup":      {{"b", "brokerAddr"}, {"c", "clusterName"}, {"g", "groupName"}, {"s", "consumeEnable"}, {"m", "consumeFromMinEnable"}, {"d", "consumeBroadcastEnable"}, {"o", "consumeMessageOrderly"}, {"q", "retryQueueNums"}, {"r", "retryMaxTimes"}, {"p", "groupRetryPolicy"}, {"i", "brokerId"}, {"w", "whichBrokerWhenConsumeSlowly"}},
	"deleteSubGroup":      {{"b", "brokerAddr"}, {"c", "clusterName"}},
	"resetOffsetByTime":   {{"g", "group"}},
	"cloneGroupOffset":    {{"s", "srcGroup"}, {"d", "destGroup"}},
	"sendMessage":         {{"k", "key"}, {"i", "qid"}},
	"consumeMessage":      {{"b", "brokerName"}, {"i", "queueId"}, {"g", "consumerGroup"}, {"s", "beginTimestamp"}, {"e", "endTimestamp"}, {"c", "MessageNumber"}},
	"cleanExpiredCQ":      {{"c", "cluster"}},
	"cleanUnusedTopic":    {{"c", "cluster"}},
	"updateKvConfig":      {{"s", "namespace"}, {"k", "key"}, {"v", "value"}},
	"deleteKvConfig":      {{"s", "namespace"}, {"k", "key"}},
	"updateNamesrvConfig": {{"k", "key"}, {"v", "value"}},
	"queryMsgByKey":       {{"k", "msgKey"}},
}

// javaLongNames lets c's flags be named by mqadmin's long names too
// (--brokerAddr for -b), through the flag set's name normalisation.
func javaLongNames(c *cobra.Command) {
	names := map[string]string{}
	for _, sl := range mqadminLongNames[c.Name()] {
		f := c.Flags().ShorthandLookup(sl[0])
		if f == nil || f.Name == sl[1] || c.Flags().Lookup(sl[1]) != nil {
			continue
		}
		names[sl[1]] = f.Name
	}
	if len(names) == 0 {
		return
	}
	c.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := names[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
}

// updateTopicPermCmd is mqadmin's updateTopicPerm: a topic's permission on
// one broker (-b) or a cluster's masters (-c), every master by default.
func updateTopicPermCmd(run runner) *cobra.Command {
	return alias("updateTopicPerm", "Change a topic's permission (topic update --perm)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &topicFlags{}
		c.Flags().StringVarP(&f.topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&f.broker, "broker", "b", "", "only this broker address")
		c.Flags().StringVarP(&f.cluster, "cluster", "c", "", "only the masters of this cluster")
		c.Flags().IntVarP(&f.perm, "perm", "p", 0, "2 write, 4 read, 6 both (required)")
		_ = c.MarkFlagRequired("topic")
		_ = c.MarkFlagRequired("perm")
		return func(ctx context.Context, a *adm) error {
			switch f.perm {
			case protocol.PermWrite, protocol.PermRead, protocol.PermRead | protocol.PermWrite:
			default:
				return usagef("-p %d: want 2 (write), 4 (read) or 6 (both)", f.perm)
			}
			return a.upsertTopic(ctx, c, f, topicUpdate)
		}
	}, run)
}

// sendMsgStatusCmd is mqadmin's sendMsgStatus: test sends to a broker's
// own topic (its name), each printed with its round trip as mqadmin does.
func sendMsgStatusCmd(run runner) *cobra.Command {
	return alias("sendMsgStatus", "Time test sends to one broker, as mqadmin prints them (stats send-rt to the broker's topic)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker string
		var size, count int
		c.Flags().StringVarP(&broker, "brokerName", "b", "", "broker name (required)")
		c.Flags().IntVarP(&size, "messageSize", "s", 128, "body size")
		c.Flags().IntVarP(&count, "count", "c", 50, "messages")
		_ = c.MarkFlagRequired("brokerName")
		return func(ctx context.Context, a *adm) error {
			if count <= 0 || size < 0 {
				return usagef("-c must be positive and -s not negative")
			}
			body := strings.Repeat("x", size)
			type sent struct {
				*sendResult
				RTms int64 `json:"rtMs"`
			}
			out := []sent{}
			for i := 0; i < count; i++ {
				start := time.Now()
				res, err := a.sendOne(ctx, sendSpec{topic: broker, body: body, group: "PID_SMSC", broker: broker, queue: -1})
				if err != nil {
					return err
				}
				s := sent{res, time.Since(start).Milliseconds()}
				out = append(out, s)
				if a.opts.output != "json" {
					fmt.Fprintf(a.w, "rt=%dms, SendResult=SendResult [sendStatus=SEND_OK, msgId=%s, offsetMsgId=%s, messageQueue=%s, queueOffset=%s]\n",
						s.RTms, res.MsgID, res.OffsetMsgID, mqTarget(res.Topic, broker, res.QueueID), res.QueueOffset)
				}
			}
			if a.opts.output == "json" {
				return a.print(out, "", nil)
			}
			return nil
		}
	}, run)
}

// javaRow prints one printf-formatted line, as mqadmin's System.out.printf.
func javaRow(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format+"\n", args...)
}

// clusterRow is one broker of clusterList.
type clusterRow struct {
	Cluster string `json:"cluster"`
	Broker  string `json:"brokerName"`
	ID      int64  `json:"brokerId"`
	Addr    string `json:"addr"`
	Version string `json:"version"`
	// The default view (mqadmin's base info).
	InTPS           float64 `json:"inTps"`
	OutTPS          float64 `json:"outTps"`
	SendQueue       string  `json:"sendThreadPoolQueueSize"`
	SendWaitMs      string  `json:"sendThreadPoolQueueHeadWaitTimeMills"`
	PullQueue       string  `json:"pullThreadPoolQueueSize"`
	PullWaitMs      string  `json:"pullThreadPoolQueueHeadWaitTimeMills"`
	AckQueue        string  `json:"ackThreadPoolQueueSize"`
	AckWaitMs       string  `json:"ackThreadPoolQueueHeadWaitTimeMills"`
	TimerReadBehind int64   `json:"timerReadBehind"`
	TimerOffBehind  int64   `json:"timerOffsetBehind"`
	TimerCongest    int64   `json:"timerCongestNum"`
	TimerEnqTPS     float64 `json:"timerEnqueueTps"`
	TimerDeqTPS     float64 `json:"timerDequeueTps"`
	PageCacheWaitMs string  `json:"pageCacheLockTimeMills"`
	Hours           float64 `json:"hours"`
	Space           float64 `json:"commitLogDiskRatio"`
	Active          bool    `json:"brokerActive"`
	// -m (moreStats).
	InTotalYest   int64 `json:"inTotalYest"`
	OutTotalYest  int64 `json:"outTotalYest"`
	InTotalToday  int64 `json:"inTotalToday"`
	OutTotalToday int64 `json:"outTotalToday"`
}

// firstField reads the first number of a "a b c" triple (putTps).
func firstField(s string) float64 {
	f, _ := strconv.ParseFloat(strings.Fields(s + " 0")[0], 64)
	return f
}

func parseI64(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

// clusterRowOf fills a row from a broker's runtime info, as
// ClusterListSubCommand reads it; a broker that does not answer keeps
// zeros, as there.
func clusterRowOf(b brokerInfo, rt map[string]string, now time.Time) clusterRow {
	r := clusterRow{Cluster: b.Cluster, Broker: b.Name, ID: b.ID, Addr: b.Addr}
	if rt == nil {
		return r
	}
	or := func(k, d string) string {
		if v, ok := rt[k]; ok {
			return v
		}
		return d
	}
	r.Version = rt["brokerVersionDesc"]
	r.Active, _ = strconv.ParseBool(rt["brokerActive"])
	r.InTPS, r.OutTPS = firstField(rt["putTps"]), firstField(rt["getTransferredTps"])
	r.SendQueue, r.SendWaitMs = rt["sendThreadPoolQueueSize"], rt["sendThreadPoolQueueHeadWaitTimeMills"]
	r.PullQueue, r.PullWaitMs = rt["pullThreadPoolQueueSize"], rt["pullThreadPoolQueueHeadWaitTimeMills"]
	r.AckQueue, r.AckWaitMs = or("ackThreadPoolQueueSize", "N"), or("ackThreadPoolQueueHeadWaitTimeMills", "N")
	r.TimerReadBehind, r.TimerOffBehind, r.TimerCongest = parseI64(rt["timerReadBehind"]), parseI64(rt["timerOffsetBehind"]), parseI64(rt["timerCongestNum"])
	r.TimerEnqTPS, _ = strconv.ParseFloat(rt["timerEnqueueTps"], 64)
	r.TimerDeqTPS, _ = strconv.ParseFloat(rt["timerDequeueTps"], 64)
	r.PageCacheWaitMs = rt["pageCacheLockTimeMills"]
	if ts := parseI64(rt["earliestMessageTimeStamp"]); ts > 0 {
		r.Hours = float64(now.UnixMilli()-ts) / 1000 / 60 / 60
	}
	r.Space, _ = strconv.ParseFloat(rt["commitLogDiskRatio"], 64)
	putYest, putMorning, putNow := parseI64(rt["msgPutTotalYesterdayMorning"]), parseI64(rt["msgPutTotalTodayMorning"]), parseI64(rt["msgPutTotalTodayNow"])
	getYest, getMorning, getNow := parseI64(rt["msgGetTotalYesterdayMorning"]), parseI64(rt["msgGetTotalTodayMorning"]), parseI64(rt["msgGetTotalTodayNow"])
	r.InTotalYest, r.OutTotalYest = putMorning-putYest, getMorning-getYest
	r.InTotalToday, r.OutTotalToday = putNow-putMorning, getNow-getMorning
	return r
}

// The header and row formats of ClusterListSubCommand (5.x).
const (
	clusterBaseHead = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s"
	clusterBaseRow  = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s"
	clusterMoreHead = "%-16s  %-32s %14s %14s %14s %14s"
	clusterMoreRow  = "%-16s  %-32s %14d %14d %14d %14d"
)

// mqadminClusterList is clusterList: mqadmin's base view (TPS, queue
// waits, timer, page-cache wait, hours of data, disk ratio, active) or,
// with -m, message totals of yesterday and today.
func (a *adm) mqadminClusterList(ctx context.Context, cluster string, more bool) error {
	all, err := a.brokers(ctx)
	if err != nil {
		return err
	}
	var bs []brokerInfo
	for _, b := range all {
		if cluster == "" || b.Cluster == cluster {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 && cluster != "" {
		return fmt.Errorf("cluster %s has no registered broker", cluster)
	}
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].Cluster < bs[j].Cluster })
	now := time.Now()
	rows := make([]clusterRow, 0, len(bs))
	for _, b := range bs {
		rt, err := a.runtimeInfo(ctx, b.Addr)
		if err != nil {
			rt = nil // as mqadmin: the row stays, with zeros
		}
		rows = append(rows, clusterRowOf(b, rt, now))
	}
	if a.opts.output == "json" {
		return a.print(rows, "", nil)
	}
	if more {
		javaRow(a.w, clusterMoreHead, "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
		for _, r := range rows {
			javaRow(a.w, clusterMoreRow, r.Cluster, r.Broker, r.InTotalYest, r.OutTotalYest, r.InTotalToday, r.OutTotalToday)
		}
		return nil
	}
	javaRow(a.w, clusterBaseHead, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
	for _, r := range rows {
		javaRow(a.w, clusterBaseRow, r.Cluster, r.Broker, strconv.FormatInt(r.ID, 10), r.Addr, r.Version,
			fmt.Sprintf("%9.2f(%s,%sms)", r.InTPS, r.SendQueue, r.SendWaitMs),
			fmt.Sprintf("%9.2f(%s,%sms|%s,%sms)", r.OutTPS, r.PullQueue, r.PullWaitMs, r.AckQueue, r.AckWaitMs),
			fmt.Sprintf("%d-%d(%.1fw, %.1f, %.1f)", r.TimerReadBehind, r.TimerOffBehind, float64(r.TimerCongest)/10000, r.TimerEnqTPS, r.TimerDeqTPS),
			r.PageCacheWaitMs, fmt.Sprintf("%2.2f", r.Hours), fmt.Sprintf("%.4f", r.Space), strconv.FormatBool(r.Active))
	}
	return nil
}

// frontAtLeast is UtilAll.frontStringAtLeast: at most n characters.
func frontAtLeast(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// topicGroupRow is one row of topicList -c.
type topicGroupRow struct {
	Cluster string `json:"cluster"`
	Topic   string `json:"topic"`
	Group   string `json:"consumerGroup"`
}

// mqadminTopicList is topicList: every topic the name server knows, one a
// line (system topics too, as mqadmin); with -c a row per topic and
// consuming group under mqadmin's header, retry and dead-letter topics
// left out.
func (a *adm) mqadminTopicList(ctx context.Context, withCluster bool) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	topics, err := lib.Topics(ctx)
	if err != nil {
		return err
	}
	sort.Strings(topics)
	if !withCluster {
		if a.opts.output == "json" {
			return a.print(topics, "", nil)
		}
		for _, t := range topics {
			fmt.Fprintln(a.w, t)
		}
		return nil
	}
	bs, err := a.brokers(ctx)
	if err != nil {
		return err
	}
	clusterOf := map[string]string{}
	for _, b := range bs {
		clusterOf[b.Name] = b.Cluster
	}
	rows := []topicGroupRow{}
	for _, t := range topics {
		if protocol.IsRetryTopic(t) || strings.HasPrefix(t, protocol.DLQGroupPrefix) {
			continue
		}
		cluster := ""
		set := map[string]bool{}
		// As mqadmin: a topic whose route or groups cannot be read is
		// listed with empty cells.
		if brokers, ok, err := a.route(ctx, t); err == nil && ok {
			cluster = clusterOf[brokers[0].name]
			for _, bq := range brokers {
				gs, err := lib.TopicConsumers(ctx, bq.addr, t)
				if err != nil {
					continue
				}
				for _, g := range gs {
					set[g] = true
				}
			}
		}
		groups := sortedKeys(set)
		if len(groups) == 0 {
			groups = []string{""}
		}
		for _, g := range groups {
			rows = append(rows, topicGroupRow{Cluster: cluster, Topic: t, Group: g})
		}
	}
	if a.opts.output == "json" {
		return a.print(rows, "", nil)
	}
	javaRow(a.w, "%-20s  %-48s  %-48s", "#Cluster Name", "#Topic", "#Consumer Group")
	for _, r := range rows {
		javaRow(a.w, "%-20s  %-64s  %-64s", frontAtLeast(r.Cluster, 20), frontAtLeast(r.Topic, 64), frontAtLeast(r.Group, 64))
	}
	return nil
}

// mqadminUpdateBrokerConfig is updateBrokerConfig: -b one broker, or -c a
// cluster's masters (with -a its slaves too); each success is printed as
// mqadmin prints it. A broker's refusal fails the command (exit 1), where
// mqadmin prints a stack trace for that broker and goes on: the brokers
// before it were changed, the ones after it were not.
func (a *adm) mqadminUpdateBrokerConfig(ctx context.Context, broker, cluster string, all bool, key, value string) error {
	var addrs []string
	if broker != "" {
		addrs = []string{broker}
	} else {
		bs, err := a.brokers(ctx)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.Cluster == cluster && (all || b.ID == protocol.MasterID) {
				addrs = append(addrs, b.Addr)
			}
		}
		if len(addrs) == 0 {
			return fmt.Errorf("cluster %s has no registered broker", cluster)
		}
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	type result struct {
		Broker string `json:"broker"`
		Key    string `json:"key"`
		Value  string `json:"value"`
	}
	out := []result{}
	for _, ad := range addrs {
		if err := lib.UpdateBrokerConfig(ctx, ad, map[string]string{key: strings.TrimSpace(value)}); err != nil {
			return codeErr(err)
		}
		out = append(out, result{ad, key, strings.TrimSpace(value)})
		if a.opts.output != "json" {
			fmt.Fprintf(a.w, "update broker config success, %s\n", ad)
		}
	}
	if a.opts.output == "json" {
		return a.print(out, "", nil)
	}
	return nil
}

// printSpec says what printMsg and printMsgByQueue read and print.
type printSpec struct {
	topic, broker string // broker: only this broker name (printMsgByQueue)
	queue         int    // -1: every queue
	sub           string // TAG expression, "*" by default
	begin, end    string // mqadmin timestamps: epoch ms or yyyy-MM-dd#HH:mm:ss:SSS
	printMsg      bool   // print each message (printMsgByQueue -p)
	printBody     bool
	byQueue       bool // printMsgByQueue's output: no per-queue lines
	calcByTag     bool
}

// printedQueue is one queue of printMsg's JSON answer.
type printedQueue struct {
	Topic      string        `json:"topic"`
	BrokerName string        `json:"brokerName"`
	QueueID    int32         `json:"queueId"`
	MinOffset  int64         `json:"minOffset"`
	MaxOffset  int64         `json:"maxOffset"`
	Status     string        `json:"status"`
	NextOffset int64         `json:"nextOffset"`
	Messages   []messageView `json:"messages"`
}

// mqTarget prints a queue as Java's MessageQueue.toString.
func mqTarget(topic, broker string, q int32) string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", topic, broker, q)
}

// javaMessageExt prints a message as Java's MessageExt.toString does
// (the body as its length: printMsg prints it after BODY:).
func javaMessageExt(m *message.Ext, broker string) string {
	props := make([]string, 0, len(m.Properties))
	for _, k := range sortedKeys(m.Properties) {
		props = append(props, k+"="+m.Properties[k])
	}
	return fmt.Sprintf("MessageExt [brokerName=%s, queueId=%d, storeSize=%d, queueOffset=%d, sysFlag=%d, bornTimestamp=%d, bornHost=/%s, storeTimestamp=%d, storeHost=/%s, msgId=%s, commitLogOffset=%d, bodyCRC=%d, reconsumeTimes=%d, preparedTransactionOffset=%d, toString()=Message{topic='%s', flag=%d, properties={%s}, body=[%d bytes], transactionId='null'}]",
		broker, m.QueueID, m.StoreSize, m.QueueOffset, m.SysFlag, m.BornTimestamp, m.BornHost, m.StoreTimestamp, m.StoreHost, m.MsgID(), m.CommitLogOffset, m.BodyCRC, m.ReconsumeTimes, m.PreparedTransactionOffset,
		m.Topic, m.Flag, strings.Join(props, ", "), len(m.Body))
}

// printMessages reads the queues of spec from their first offset (or -b's
// time) to their last (or -e's) and prints what mqadmin prints.
func (a *adm) printMsgs(ctx context.Context, s printSpec) error {
	now := time.Now()
	var begin, end int64 = -1, -1
	var err error
	if s.begin != "" {
		if begin, err = parseAdminTime(s.begin, now); err != nil {
			return usageError{err}
		}
	}
	if s.end != "" {
		if end, err = parseAdminTime(s.end, now); err != nil {
			return usageError{err}
		}
	}
	brokers, ok, err := a.route(ctx, s.topic)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("topic %s does not exist", s.topic)
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	js := a.opts.output == "json"
	out := []printedQueue{}
	tags := map[string]int{}
	matched := false
	for _, bq := range brokers {
		if s.broker != "" && s.broker != bq.name {
			continue
		}
		matched = true
		if s.queue >= int(bq.readQueues) {
			return fmt.Errorf("topic %s has no queue %d on %s (%d read queues)", s.topic, s.queue, bq.name, bq.readQueues)
		}
		for q := int32(0); q < bq.readQueues; q++ {
			if s.queue >= 0 && int(q) != s.queue {
				continue
			}
			pq := printedQueue{Topic: s.topic, BrokerName: bq.name, QueueID: q, Messages: []messageView{}}
			if pq.MinOffset, err = lib.MinOffset(ctx, bq.addr, s.topic, int(q)); err != nil {
				return codeErr(err)
			}
			if pq.MaxOffset, err = lib.MaxOffset(ctx, bq.addr, s.topic, int(q)); err != nil {
				return codeErr(err)
			}
			if begin >= 0 {
				if pq.MinOffset, err = lib.SearchOffset(ctx, bq.addr, s.topic, int(q), begin); err != nil {
					return codeErr(err)
				}
			}
			if end >= 0 {
				if pq.MaxOffset, err = lib.SearchOffset(ctx, bq.addr, s.topic, int(q), end); err != nil {
					return codeErr(err)
				}
			}
			target := mqTarget(s.topic, bq.name, q)
			if !js && !s.byQueue {
				fmt.Fprintf(a.w, "minOffset=%d, maxOffset=%d, %s\n", pq.MinOffset, pq.MaxOffset, target)
			}
			pq.Status = clientadmin.PullNoNewMsg.String()
			off := pq.MinOffset
		read:
			for off < pq.MaxOffset {
				res, err := lib.Pull(ctx, bq.addr, clientadmin.PullRequest{Topic: s.topic, QueueID: int(q), Offset: off, MaxNums: 32, ExpressionType: "TAG", Expression: s.sub})
				if err != nil {
					return codeErr(err)
				}
				next := res.NextBeginOffset
				pq.Status = res.Status.String()
				switch res.Status {
				case clientadmin.PullFound:
					msgs, err := res.Messages()
					if err != nil {
						return fmt.Errorf("decode pull from %s: %w", bq.addr, err)
					}
					for _, m := range msgs {
						if m.Tags() != "" {
							tags[m.Tags()]++
						}
						pq.Messages = append(pq.Messages, viewOf(m, bq.name))
						if js || (s.byQueue && !s.printMsg) {
							continue
						}
						body := "NOT PRINT BODY"
						if s.printBody {
							b, err := m.UncompressedBody()
							if err != nil {
								b = m.Body
							}
							body = string(b)
						}
						fmt.Fprintf(a.w, "MSGID: %s %s BODY: %s\n", m.UniqKey(), javaMessageExt(m, bq.name), body)
					}
				case clientadmin.PullNoMatchedMsg:
					if !js && !s.byQueue {
						fmt.Fprintf(a.w, "%s no matched msg. status=%s, offset=%d\n", target, res.Status, max(next, off))
					}
					if s.byQueue {
						break read
					}
				default:
					if !js && !s.byQueue {
						fmt.Fprintf(a.w, "%s print msg finished. status=%s, offset=%d\n", target, res.Status, max(next, off))
					}
					break read
				}
				if next <= off {
					break
				}
				off = next
			}
			pq.NextOffset = off
			if !js && !s.byQueue {
				fmt.Fprintln(a.w, "--------------------------------------------------------")
			}
			out = append(out, pq)
		}
	}
	if !matched {
		return fmt.Errorf("topic %s is not served by broker %s", s.topic, s.broker)
	}
	if js {
		return a.print(out, "", nil)
	}
	if s.calcByTag {
		names := sortedKeys(tags)
		sort.SliceStable(names, func(i, j int) bool { return tags[names[i]] > tags[names[j]] })
		for _, t := range names {
			fmt.Fprintf(a.w, "Tag: %-30s Count: %d\n", t, tags[t])
		}
	}
	return nil
}

// javaBool reads an mqadmin true|false option as Boolean.parseBoolean:
// "true" in any case is true, anything else false.
func javaBool(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "true") }

// printMsgCmd is mqadmin's printMsg: every queue of a topic, between
// offsets or times, a block per queue.
func printMsgCmd(run runner) *cobra.Command {
	return alias("printMsg", "Print a topic's messages, a block per queue, as mqadmin prints them (message consume)", func(c *cobra.Command) func(context.Context, *adm) error {
		s := printSpec{queue: -1}
		var charset, body string
		c.Flags().StringVarP(&s.topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&charset, "charsetName", "c", "UTF-8", "accepted; bodies are printed as UTF-8")
		c.Flags().StringVarP(&s.sub, "subExpression", "s", "*", "tag expression (TagA || TagB)")
		c.Flags().StringVarP(&s.begin, "beginTimestamp", "b", "", "from this store time: epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
		c.Flags().StringVarP(&s.end, "endTimestamp", "e", "", "to this store time")
		c.Flags().StringVarP(&body, "printBody", "d", "true", "print bodies (true|false)")
		ignored(c, "l", "lmqParentTopic", "LMQ parent topics are not supported")
		_ = c.MarkFlagRequired("topic")
		return func(ctx context.Context, a *adm) error {
			s.printMsg, s.printBody = true, javaBool(body)
			return a.printMsgs(ctx, s)
		}
	}, run)
}

// printMsgByQueueCmd is mqadmin's printMsgByQueue: one queue; messages
// only with -p true, bodies only with -d true, a count per tag with -f true.
func printMsgByQueueCmd(run runner) *cobra.Command {
	return alias("printMsgByQueue", "Print one queue's messages as mqadmin prints them (message consume --broker --queue)", func(c *cobra.Command) func(context.Context, *adm) error {
		s := printSpec{byQueue: true}
		var charset, pm, body, calc string
		c.Flags().StringVarP(&s.topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&s.broker, "brokerName", "a", "", "broker name (required)")
		c.Flags().IntVarP(&s.queue, "queueId", "i", 0, "queue id (required)")
		c.Flags().StringVarP(&charset, "charsetName", "c", "UTF-8", "accepted; bodies are printed as UTF-8")
		c.Flags().StringVarP(&s.sub, "subExpression", "s", "*", "tag expression (TagA || TagB)")
		c.Flags().StringVarP(&s.begin, "beginTimestamp", "b", "", "from this store time: epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
		c.Flags().StringVarP(&s.end, "endTimestamp", "e", "", "to this store time")
		c.Flags().StringVarP(&pm, "printMsg", "p", "false", "print each message (true|false)")
		c.Flags().StringVarP(&body, "printBody", "d", "false", "print bodies (true|false)")
		c.Flags().StringVarP(&calc, "calculate", "f", "false", "count messages per tag (true|false)")
		for _, n := range []string{"topic", "brokerName", "queueId"} {
			_ = c.MarkFlagRequired(n)
		}
		return func(ctx context.Context, a *adm) error {
			if s.queue < 0 {
				return usagef("-i %d: want a queue id", s.queue)
			}
			s.printMsg, s.printBody, s.calcByTag = javaBool(pm), javaBool(body), javaBool(calc)
			return a.printMsgs(ctx, s)
		}
	}, run)
}
