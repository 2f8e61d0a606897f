package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/protocol"
)

// topicFlags are the settings of topic create/update (and updateTopic).
type topicFlags struct {
	topic, broker, cluster string
	readQ, writeQ, perm    int
	order                  bool
	// attributes modifies RocketMQ 5's topic attributes (mqadmin -a).
	attributes string
}

func (f *topicFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	if short { // mqadmin's letters
		fs.StringVarP(&f.topic, "topic", "t", "", "topic (required)")
		fs.StringVarP(&f.broker, "broker", "b", "", "only this broker address (default: every master)")
		fs.StringVarP(&f.cluster, "cluster", "c", "", "only the masters of this cluster")
		fs.IntVarP(&f.readQ, "read-queues", "r", 8, "read queue count")
		fs.IntVarP(&f.writeQ, "write-queues", "w", 8, "write queue count")
		fs.IntVarP(&f.perm, "perm", "p", protocol.PermRead|protocol.PermWrite, "permission: 2 write, 4 read, 6 both")
		fs.BoolVarP(&f.order, "order", "o", false, "ordered topic")
		fs.StringVarP(&f.attributes, "attributes", "a", "", attributesUsage)
	} else {
		fs.StringVar(&f.topic, "topic", "", "topic (required)")
		fs.StringVar(&f.broker, "broker", "", "only this broker address (default: every master)")
		fs.StringVar(&f.cluster, "cluster", "", "only the masters of this cluster")
		fs.IntVar(&f.readQ, "read-queues", 8, "read queue count")
		fs.IntVar(&f.writeQ, "write-queues", 8, "write queue count")
		fs.IntVar(&f.perm, "perm", protocol.PermRead|protocol.PermWrite, "permission: 2 write, 4 read, 6 both")
		fs.BoolVar(&f.order, "order", false, "ordered topic")
		fs.StringVar(&f.attributes, "attributes", "", attributesUsage)
	}
	_ = c.MarkFlagRequired("topic")
}

// attributesUsage describes --attributes (mqadmin updateTopic -a).
const attributesUsage = "RocketMQ 5 topic attributes: +key=value adds or changes, -key deletes, comma-separated " +
	"(e.g. +message.type=FIFO; types NORMAL, FIFO, DELAY, TRANSACTION)"

// topicMode is what topic create/update do with an existing topic.
type topicMode int

const (
	topicCreate topicMode = iota // refuse an existing topic
	topicUpdate                  // refuse a missing topic; change only the flags given
	topicUpsert                  // mqadmin updateTopic: either
)

// topicRow is one broker's config of a topic after create/update.
type topicRow struct {
	Topic          string `json:"topic"`
	Broker         string `json:"broker"`
	Addr           string `json:"addr"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	Order          bool   `json:"order"`
	// Attributes are the topic's attributes on the broker after the
	// change (message.type, ...).
	Attributes map[string]string `json:"attributes,omitempty"`
	Created    bool              `json:"created"`
}

// topicConfigs reads every master's config of topic (GET_ALL_TOPIC_CONFIG):
// the broker's own view, current even before its next registration.
func (a *adm) topicConfigs(ctx context.Context, ms []brokerInfo, topic string) (map[string]*protocol.TopicConfig, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	out := map[string]*protocol.TopicConfig{}
	for _, m := range ms {
		table, err := lib.TopicConfigs(ctx, m.Addr)
		if err != nil {
			return nil, codeErr(err)
		}
		if tc := table[topic]; tc != nil {
			out[m.Addr] = tc
		}
	}
	return out, nil
}

// targetMasters are the masters a command addresses: --broker, the
// masters of --cluster, or every master.
func (a *adm) targetMasters(ctx context.Context, broker, cluster string) ([]brokerInfo, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	var out []brokerInfo
	for _, m := range ms {
		if (broker == "" || m.Addr == broker || m.Name == broker) && (cluster == "" || m.Cluster == cluster) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		switch {
		case broker != "":
			return nil, fmt.Errorf("broker %s is not a registered master", broker)
		default:
			return nil, fmt.Errorf("cluster %s has no registered master", cluster)
		}
	}
	return out, nil
}

// upsertTopic creates or changes a topic on the target masters. On a
// broker that has it, only the flags the user set change.
func (a *adm) upsertTopic(ctx context.Context, c *cobra.Command, f *topicFlags, mode topicMode) error {
	if err := protocol.ValidateTopic(f.topic); err != nil {
		return usageError{err}
	}
	if f.perm&^(protocol.PermRead|protocol.PermWrite|protocol.PermInherit) != 0 {
		return usagef("--perm %d: want 2 (write), 4 (read) or 6 (both)", f.perm)
	}
	if _, err := protocol.ParseAttributeMods(f.attributes); err != nil {
		return usagef("--attributes %q: %v", f.attributes, err)
	}
	ms, err := a.targetMasters(ctx, f.broker, f.cluster)
	if err != nil {
		return err
	}
	cur, err := a.topicConfigs(ctx, ms, f.topic)
	if err != nil {
		return err
	}
	switch {
	case mode == topicCreate && len(cur) > 0:
		return fmt.Errorf("topic %s already exists (change it with topic update)", f.topic)
	case mode == topicUpdate && len(cur) == 0:
		return fmt.Errorf("topic %s does not exist", f.topic)
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	changed := func(name string) bool { return c.Flags().Changed(name) }
	out := []topicRow{}
	for _, m := range ms {
		r := topicRow{Topic: f.topic, Broker: m.Name, Addr: m.Addr, ReadQueueNums: f.readQ, WriteQueueNums: f.writeQ, Perm: f.perm, Order: f.order, Created: true}
		if tc := cur[m.Addr]; tc != nil {
			r.Created = false
			if !changed("read-queues") {
				r.ReadQueueNums = int(tc.ReadQueueNums)
			}
			if !changed("write-queues") {
				r.WriteQueueNums = int(tc.WriteQueueNums)
			}
			if !changed("perm") {
				r.Perm = int(tc.Perm)
			}
			if !changed("order") {
				r.Order = tc.Order
			}
		} else if mode == topicUpdate {
			continue // update touches only the brokers that have it
		}
		if r.ReadQueueNums <= 0 || r.WriteQueueNums <= 0 {
			return usagef("queue counts must be positive (read %d, write %d)", r.ReadQueueNums, r.WriteQueueNums)
		}
		err := lib.CreateTopic(ctx, clientadmin.TopicConfig{Topic: f.topic, ReadQueueNums: r.ReadQueueNums, WriteQueueNums: r.WriteQueueNums,
			Perm: r.Perm, Order: r.Order, Attributes: f.attributes, Brokers: []string{m.Addr}})
		if err != nil {
			return err
		}
		out = append(out, r)
	}
	if err := putOrderConf(ctx, lib, f.topic, out); err != nil {
		return err
	}
	// The attributes as each broker applied the modification.
	after, err := a.topicConfigs(ctx, ms, f.topic)
	if err != nil {
		return err
	}
	var rows [][]string
	for i := range out {
		r := &out[i]
		if tc := after[r.Addr]; tc != nil {
			r.Attributes = tc.Attributes
		}
		rows = append(rows, []string{r.Topic, r.Broker, strconv.Itoa(r.ReadQueueNums), strconv.Itoa(r.WriteQueueNums), strconv.Itoa(r.Perm), strconv.FormatBool(r.Order),
			r.Attributes[protocol.AttrMessageType], createdWord(r.Created)})
	}
	return a.print(out, "TOPIC\tBROKER\tREAD QUEUES\tWRITE QUEUES\tPERM\tORDER\tMESSAGE TYPE\tACTION", rows)
}

// putOrderConf does what mqadmin updateTopic -o true does beside the
// topic config: the name server's ORDER_TOPIC_CONFIG entry for the topic,
// "brokerName:writeQueueNums" per broker joined by ';', which routes carry
// as orderTopicConf and clients follow for ordered topics. Brokers of the
// entry that this change did not touch keep their part (Java's
// createOrUpdateOrderConf merging for one broker).
func putOrderConf(ctx context.Context, lib *clientadmin.Admin, topic string, rows []topicRow) error {
	parts := map[string]string{}
	ordered := false
	for _, r := range rows {
		if r.Order {
			ordered = true
		}
	}
	if !ordered {
		return nil
	}
	old, found, err := lib.KVConfig(ctx, clientadmin.OrderTopicConfigNamespace, topic)
	if err != nil {
		return fmt.Errorf("order conf of %s: %w", topic, err)
	}
	if found {
		for _, p := range strings.Split(old, ";") {
			if name, n, ok := strings.Cut(p, ":"); ok && name != "" {
				parts[name] = n
			}
		}
	}
	for _, r := range rows {
		if r.Order {
			parts[r.Broker] = strconv.Itoa(r.WriteQueueNums)
		} else {
			delete(parts, r.Broker)
		}
	}
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	conf := make([]string, len(names))
	for i, name := range names {
		conf[i] = name + ":" + parts[name]
	}
	if err := lib.PutKVConfig(ctx, clientadmin.OrderTopicConfigNamespace, topic, strings.Join(conf, ";")); err != nil {
		return fmt.Errorf("order conf of %s: %w", topic, err)
	}
	return nil
}

func createdWord(created bool) string {
	if created {
		return "created"
	}
	return "updated"
}

// deleteTopic deletes a topic on its brokers and the name servers; a
// topic neither knows is an error.
func (a *adm) deleteTopic(ctx context.Context, c *cobra.Command, topic, cluster string, yes bool) error {
	ms, err := a.targetMasters(ctx, "", cluster)
	if err != nil {
		return err
	}
	cur, err := a.topicConfigs(ctx, ms, topic)
	if err != nil {
		return err
	}
	_, routed, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if len(cur) == 0 && !routed {
		return fmt.Errorf("topic %s not found", topic)
	}
	if err := confirm(c, yes, "delete topic "+topic+" and its messages"); err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	if err := lib.DeleteTopic(ctx, topic); err != nil {
		return err
	}
	var brokers []string
	for _, m := range ms {
		if cur[m.Addr] != nil {
			brokers = append(brokers, m.Name)
		}
	}
	return a.print(map[string]any{"topic": topic, "deleted": true, "brokers": brokers}, "TOPIC\tDELETED\tBROKERS",
		[][]string{{topic, "true", strings.Join(brokers, ",")}})
}

func topicCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, update, delete and inspect topics"}
	mk := func(use, short string, mode topicMode) *cobra.Command {
		f := &topicFlags{}
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
		c.RunE = run(func(ctx context.Context, a *adm) error { return a.upsertTopic(ctx, c, f, mode) })
		f.bind(c, false)
		return c
	}
	var topic, cluster string
	var yes bool
	del := &cobra.Command{Use: "delete", Short: "Delete a topic on its brokers and the name servers (asks; --yes in scripts)", Args: cobra.NoArgs}
	del.RunE = run(func(ctx context.Context, a *adm) error { return a.deleteTopic(ctx, del, topic, cluster, yes) })
	del.Flags().StringVar(&topic, "topic", "", "topic (required)")
	del.Flags().StringVar(&cluster, "cluster", "", "only the masters of this cluster")
	del.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	_ = del.MarkFlagRequired("topic")
	var system bool
	list := &cobra.Command{
		Use: "list", Short: "List the topics the name server knows", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.topicList(ctx, system, cluster) }),
	}
	list.Flags().BoolVar(&system, "system", false, "include system, retry and dead-letter topics")
	list.Flags().StringVar(&cluster, "cluster", "", "only the topics of this cluster (GET_TOPICS_BY_CLUSTER)")
	route := &cobra.Command{
		Use: "route", Short: "A topic's route (GET_ROUTEINFO_BY_TOPIC)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.topicRoute(ctx, topic) }),
	}
	status := &cobra.Command{
		Use: "status", Short: "Per-queue min/max offsets and last update (GET_TOPIC_STATS_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.printTopicStatus(ctx, topic) }),
	}
	clusters := &cobra.Command{
		Use: "clusters", Short: "The clusters a topic is served by (mqadmin topicClusterList)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.topicClusters(ctx, topic) }),
	}
	for _, c := range []*cobra.Command{route, status, clusters} {
		c.Flags().StringVar(&topic, "topic", "", "topic (required)")
		_ = c.MarkFlagRequired("topic")
	}
	cmd.AddCommand(mk("create", "Create a topic (UPDATE_AND_CREATE_TOPIC) on every master, --cluster's or --broker; refuses an existing topic", topicCreate),
		mk("update", "Change an existing topic: only the flags given change", topicUpdate), del, list, route, status, clusters)
	return cmd
}

func (a *adm) topicList(ctx context.Context, system bool, cluster string) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	var all []string
	if cluster != "" {
		all, err = lib.TopicsByCluster(ctx, cluster)
	} else {
		all, err = lib.Topics(ctx)
	}
	if err != nil {
		return err
	}
	names := map[string]bool{}
	if !system {
		bs, err := a.brokers(ctx)
		if err != nil {
			return err
		}
		for _, b := range bs {
			names[b.Name], names[b.Cluster] = true, true
		}
	}
	sort.Strings(all)
	out := []string{}
	var rows [][]string
	for _, t := range all {
		if !system && (isInternalTopic(t) || names[t]) {
			continue
		}
		out = append(out, t)
		rows = append(rows, []string{t})
	}
	return a.print(out, "TOPIC", rows)
}

// mustRoute is a topic's route from the name server; a missing topic is
// an error.
func (a *adm) mustRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	rd, ok, err := a.routeData(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	return rd, nil
}

// routeView is topic route's JSON: the name server's route and, by broker
// name, the topic's attributes on each master that has any (read from
// the brokers: routes carry none).
type routeView struct {
	*protocol.TopicRouteData
	TopicAttributes map[string]map[string]string `json:"topicAttributes,omitempty"`
}

func (a *adm) topicRoute(ctx context.Context, topic string) error {
	rd, err := a.mustRoute(ctx, topic)
	if err != nil {
		return err
	}
	addrs := map[string]string{}
	for _, bd := range rd.BrokerDatas {
		addrs[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
	}
	view := routeView{TopicRouteData: rd}
	var ms []brokerInfo
	for name, addr := range addrs {
		if addr != "" {
			ms = append(ms, brokerInfo{Name: name, Addr: addr})
		}
	}
	// Best effort: a broker that does not answer leaves its attributes
	// out rather than the route.
	if cfgs, err := a.topicConfigs(ctx, ms, topic); err == nil {
		for _, m := range ms {
			if tc := cfgs[m.Addr]; tc != nil && len(tc.Attributes) > 0 {
				if view.TopicAttributes == nil {
					view.TopicAttributes = map[string]map[string]string{}
				}
				view.TopicAttributes[m.Name] = tc.Attributes
			}
		}
	}
	var rows [][]string
	for _, q := range rd.QueueDatas {
		rows = append(rows, []string{q.BrokerName, addrs[q.BrokerName], strconv.Itoa(int(q.ReadQueueNums)), strconv.Itoa(int(q.WriteQueueNums)), strconv.Itoa(int(q.Perm)),
			view.TopicAttributes[q.BrokerName][protocol.AttrMessageType]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return a.print(view, "BROKER\tADDR\tREAD QUEUES\tWRITE QUEUES\tPERM\tMESSAGE TYPE", rows)
}

func (a *adm) printTopicStatus(ctx context.Context, topic string) error {
	out, err := a.topicStatus(ctx, topic)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, q := range out {
		rows = append(rows, []string{q.BrokerName, strconv.Itoa(int(q.QueueID)), i64(q.MinOffset), i64(q.MaxOffset), fmtMs(q.LastUpdateTimestamp)})
	}
	return a.print(out, "BROKER\tQUEUE\tMIN OFFSET\tMAX OFFSET\tLAST UPDATED", rows)
}

// topicClusters lists the clusters whose brokers serve topic.
func (a *adm) topicClusters(ctx context.Context, topic string) error {
	out, err := a.clustersOf(ctx, topic)
	if err != nil {
		return err
	}
	rows := make([][]string, 0, len(out))
	for _, c := range out {
		rows = append(rows, []string{c})
	}
	return a.print(out, "CLUSTER", rows)
}

// clustersOf names the clusters whose brokers serve topic, sorted.
func (a *adm) clustersOf(ctx context.Context, topic string) ([]string, error) {
	rd, err := a.mustRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	bs, err := a.brokers(ctx)
	if err != nil {
		return nil, err
	}
	clusterOf := map[string]string{}
	for _, b := range bs {
		clusterOf[b.Name] = b.Cluster
	}
	set := map[string]bool{}
	for _, bd := range rd.BrokerDatas {
		c := bd.Cluster
		if c == "" {
			c = clusterOf[bd.BrokerName]
		}
		set[c] = true
	}
	return sortedKeys(set), nil
}

// topicStatus gathers a topic's per-queue offsets from its brokers.
func (a *adm) topicStatus(ctx context.Context, topic string) ([]queueStats, error) {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	out := []queueStats{}
	for _, bq := range brokers {
		tbl, err := lib.TopicStats(ctx, bq.addr, topic)
		if err != nil {
			return nil, codeErr(err)
		}
		for mq, o := range tbl {
			out = append(out, queueStats{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID,
				MinOffset: o.MinOffset, MaxOffset: o.MaxOffset, LastUpdateTimestamp: o.LastUpdateTimestamp})
		}
	}
	sortQueues(out)
	return out, nil
}
