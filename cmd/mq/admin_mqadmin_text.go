package main

// The text of mqadmin's inspection commands, as the Java commands print it
// (topicRoute, topicStatus, topicClusterList, brokerStatus,
// getBrokerConfig, consumerProgress, consumerConnection). With --output
// json they answer what the Quiver-named commands do.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/protocol"
)

// javaTime2 is UtilAll.timeMillisToHumanString2 (local time).
func javaTime2(ms int64) string { return time.UnixMilli(ms).Format("2006-01-02 15:04:05,000") }

// javaDate is UtilAll.formatDate(YYYY_MM_DD_HH_MM_SS) (local time).
func javaDate(ms int64) string { return time.UnixMilli(ms).Format("2006-01-02 15:04:05") }

// javaAddrMap prints a broker's addresses as Java's HashMap.toString.
func javaAddrMap(m map[int64]string) string {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%d=%s", id, m[id]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// mqadminTopicRoute is topicRoute: the route as JSON, or with -l a row per
// broker and a total.
func (a *adm) mqadminTopicRoute(ctx context.Context, topic string, list bool) error {
	if a.opts.output == "json" {
		return a.topicRoute(ctx, topic)
	}
	rd, err := a.mustRoute(ctx, topic)
	if err != nil {
		return err
	}
	if !list {
		b, err := json.MarshalIndent(rd, "", "\t")
		if err != nil {
			return fmt.Errorf("encode route of %s: %w", topic, err)
		}
		fmt.Fprintln(a.w, string(b))
		return nil
	}
	const format = "%-45s %-32s %-50s %-10s %-11s %-5s"
	queues := map[string]protocol.QueueData{}
	for _, q := range rd.QueueDatas {
		queues[q.BrokerName] = q
	}
	bds := append([]protocol.BrokerData(nil), rd.BrokerDatas...)
	sort.Slice(bds, func(i, j int) bool { return bds[i].BrokerName < bds[j].BrokerName })
	javaRow(a.w, format, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
	var read, write int
	for _, bd := range bds {
		q, ok := queues[bd.BrokerName]
		if !ok {
			continue
		}
		read += int(q.ReadQueueNums)
		write += int(q.WriteQueueNums)
		javaRow(a.w, format, bd.Cluster, bd.BrokerName, javaAddrMap(bd.BrokerAddrs), strconv.Itoa(int(q.ReadQueueNums)), strconv.Itoa(int(q.WriteQueueNums)), strconv.Itoa(int(q.Perm)))
	}
	fmt.Fprintln(a.w, strings.Repeat("-", 158))
	javaRow(a.w, format, "Total:", strconv.Itoa(len(queues)), "", strconv.Itoa(read), strconv.Itoa(write), "")
	return nil
}

// mqadminTopicStatus is topicStatus: a row per queue.
func (a *adm) mqadminTopicStatus(ctx context.Context, topic string) error {
	if a.opts.output == "json" {
		return a.printTopicStatus(ctx, topic)
	}
	qs, err := a.topicStatus(ctx, topic)
	if err != nil {
		return err
	}
	javaRow(a.w, "%-32s  %-4s  %-20s  %-20s    %s", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
	for _, q := range qs {
		last := ""
		if q.LastUpdateTimestamp > 0 {
			last = javaTime2(q.LastUpdateTimestamp)
		}
		javaRow(a.w, "%-32s  %-4d  %-20d  %-20d    %s", frontAtLeast(q.BrokerName, 32), q.QueueID, q.MinOffset, q.MaxOffset, last)
	}
	return nil
}

// mqadminTopicClusters is topicClusterList: one cluster a line.
func (a *adm) mqadminTopicClusters(ctx context.Context, topic string) error {
	if a.opts.output == "json" {
		return a.topicClusters(ctx, topic)
	}
	cs, err := a.clustersOf(ctx, topic)
	if err != nil {
		return err
	}
	for _, c := range cs {
		fmt.Fprintln(a.w, c)
	}
	return nil
}

// selectedBrokers is -b's address, or every broker of -c's cluster
// (masters and slaves), or every registered broker.
func (a *adm) selectedBrokers(ctx context.Context, broker, cluster string) ([]brokerInfo, error) {
	if broker != "" {
		return []brokerInfo{{Addr: broker}}, nil
	}
	all, err := a.brokers(ctx)
	if err != nil {
		return nil, err
	}
	var out []brokerInfo
	for _, b := range all {
		if cluster == "" || b.Cluster == cluster {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		if cluster != "" {
			return nil, fmt.Errorf("cluster %s has no registered broker", cluster)
		}
		return nil, fmt.Errorf("no broker registered")
	}
	return out, nil
}

// mqadminBrokerStatus is brokerStatus: "key: value" lines of one broker
// (-b), or of every broker of a cluster (-c) with its address first.
func (a *adm) mqadminBrokerStatus(ctx context.Context, broker, cluster string) error {
	if a.opts.output == "json" {
		return a.brokerStatus(ctx, broker, cluster)
	}
	bs, err := a.selectedBrokers(ctx, broker, cluster)
	if err != nil {
		return err
	}
	for _, b := range bs {
		rt, err := a.runtimeInfo(ctx, b.Addr)
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(rt) {
			if broker != "" {
				javaRow(a.w, "%-32s: %s", k, rt[k])
			} else {
				javaRow(a.w, "%-24s %-32s: %s", b.Addr, k, rt[k])
			}
		}
	}
	return nil
}

// mqadminBrokerConfig is getBrokerConfig: a "====addr====" line, then
// "key=  value" lines, per broker; with -c each master, then its slaves.
func (a *adm) mqadminBrokerConfig(ctx context.Context, broker, cluster string) error {
	if a.opts.output == "json" {
		return a.brokerConfig(ctx, broker, cluster)
	}
	bs, err := a.selectedBrokers(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	show := func(title, addr string) error {
		fmt.Fprint(a.w, title)
		props, err := lib.BrokerConfig(ctx, addr)
		if err != nil {
			return codeErr(err)
		}
		for _, k := range sortedKeys(props) {
			fmt.Fprintf(a.w, "%-50s=  %s\n", k, props[k])
		}
		fmt.Fprintln(a.w)
		return nil
	}
	if broker != "" {
		return show(fmt.Sprintf("============%s============\n", broker), broker)
	}
	for _, b := range bs {
		if b.ID != protocol.MasterID {
			continue
		}
		if err := show(fmt.Sprintf("============Master: %s============\n", b.Addr), b.Addr); err != nil {
			return err
		}
		for _, s := range bs {
			if s.Name == b.Name && s.ID != protocol.MasterID {
				if err := show(fmt.Sprintf("============My Master: %s=====Slave: %s============\n", b.Addr, s.Addr), s.Addr); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// mqadminConsumerProgress is consumerProgress: with -g a row per queue and
// the group's totals; without, a row per group.
func (a *adm) mqadminConsumerProgress(ctx context.Context, group, topic string, showIP bool) error {
	if group == "" {
		return a.mqadminAllGroups(ctx)
	}
	st, err := a.groupStatusOf(ctx, group)
	if err != nil {
		return err
	}
	if topic != "" {
		qs := st.Queues[:0:0]
		st.Lag = 0
		for _, q := range st.Queues {
			if q.Topic == topic {
				qs = append(qs, q)
				st.Lag += q.Lag
			}
		}
		st.Queues = qs
	}
	if a.opts.output == "json" {
		return a.print(st, "", nil)
	}
	if showIP {
		javaRow(a.w, "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s", "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#Inflight", "#LastTime")
	} else {
		javaRow(a.w, "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s", "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LastTime")
	}
	var diffTotal int64
	for _, q := range st.Queues {
		diff := q.BrokerOffset - q.ConsumerOffset
		diffTotal += diff
		last := "N/A"
		if q.LastTimestamp > 0 {
			last = javaDate(q.LastTimestamp)
		}
		// Inflight (pulled, not committed) needs the pull offset, which
		// GET_CONSUME_STATS does not carry here: 0.
		if showIP {
			javaRow(a.w, "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s", frontAtLeast(q.Topic, 64), frontAtLeast(q.BrokerName, 32), q.QueueID, q.BrokerOffset, q.ConsumerOffset, "N/A", diff, 0, last)
		} else {
			javaRow(a.w, "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s", frontAtLeast(q.Topic, 64), frontAtLeast(q.BrokerName, 32), q.QueueID, q.BrokerOffset, q.ConsumerOffset, diff, 0, last)
		}
	}
	fmt.Fprintln(a.w)
	fmt.Fprintf(a.w, "Consume TPS: %.2f\n", st.ConsumeTps)
	fmt.Fprintf(a.w, "Consume Diff Total: %d\n", diffTotal)
	fmt.Fprintf(a.w, "Consume Inflight Total: %d\n", 0)
	return nil
}

// groupConsumeRow is one group of consumerProgress without -g (Java's
// GroupConsumeInfo).
type groupConsumeRow struct {
	Group     string `json:"group"`
	Count     int    `json:"count"`
	Version   string `json:"version"`
	Type      string `json:"consumeType"`
	Model     string `json:"messageModel"`
	TPS       int    `json:"consumeTps"`
	DiffTotal int64  `json:"diffTotal"`
}

func (a *adm) mqadminAllGroups(ctx context.Context) error {
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	by, _, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return err
	}
	rows := []groupConsumeRow{}
	for _, g := range sortedKeys(by) {
		if isSystemGroup(g) {
			continue
		}
		st, err := a.groupStatusOf(ctx, g)
		if err != nil {
			return err
		}
		r := groupConsumeRow{Group: g, Count: len(st.Clients), Version: "OFFLINE", TPS: int(st.ConsumeTps), DiffTotal: st.Lag}
		if r.Count > 0 {
			v := st.Clients[0].Version
			for _, c := range st.Clients {
				v = min(v, c.Version)
			}
			r.Version = mqVersionDesc(v)
			r.Type = "PUSH"
			if st.ConsumeType == "CONSUME_ACTIVELY" {
				r.Type = "PULL"
			} else {
				r.Model = st.MessageModel
			}
		}
		rows = append(rows, r)
	}
	if a.opts.output == "json" {
		return a.print(rows, "", nil)
	}
	javaRow(a.w, "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s", "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
	for _, r := range rows {
		javaRow(a.w, "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d", frontAtLeast(r.Group, 64), r.Count, r.Version, r.Type, r.Model, r.TPS, r.DiffTotal)
	}
	return nil
}

// mqadminConsumerConnection is consumerConnection: the group's clients,
// its subscriptions and settings.
func (a *adm) mqadminConsumerConnection(ctx context.Context, group string) error {
	if a.opts.output == "json" {
		return a.consumerConnections(ctx, group)
	}
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	if err := a.mustGroup(ctx, group); err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var conns []string
	subs := map[string]string{}
	var consumeType, model, from string
	for _, m := range ms {
		cc, online, err := lib.ConsumerConnections(ctx, m.Addr, group)
		if err != nil {
			return codeErr(err)
		}
		if !online {
			continue
		}
		consumeType, model, from = cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere
		for _, c := range cc.ConnectionSet {
			if !seen[c.ClientID] {
				seen[c.ClientID] = true
				conns = append(conns, fmt.Sprintf("%-36s %-22s %-10s %s", c.ClientID, c.ClientAddr, c.Language, mqVersionDesc(c.Version)))
			}
		}
		for t, sd := range cc.SubscriptionTable {
			subs[t] = sd.SubString
		}
	}
	if len(conns) == 0 {
		return fmt.Errorf("consumer group %s has no consumer online", group)
	}
	javaRow(a.w, "%-36s %-22s %-10s %s", "#ClientId", "#ClientAddr", "#Language", "#Version")
	for _, c := range conns {
		fmt.Fprintln(a.w, c)
	}
	fmt.Fprint(a.w, "\nBelow is subscription:\n")
	javaRow(a.w, "%-20s %s", "#Topic", "#SubExpression")
	for _, t := range sortedKeys(subs) {
		javaRow(a.w, "%-20s %s", t, subs[t])
	}
	fmt.Fprintln(a.w)
	fmt.Fprintf(a.w, "ConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n", consumeType, model, from)
	return nil
}
