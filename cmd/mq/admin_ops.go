package main

// mq admin kv, namesrv, producer, consumer, stats, offset clone and the
// broker's config, write-permission and cleaning commands: mqadmin's
// daily set beyond topics and groups, through client/admin.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/protocol"
)

// kvRow is one name-server KV entry.
type kvRow struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

type kvFlags struct{ namespace, key, value string }

func (f *kvFlags) bind(c *cobra.Command, short, value bool) {
	fs := c.Flags()
	if short {
		fs.StringVarP(&f.namespace, "namespace", "s", "", "namespace (required)")
		fs.StringVarP(&f.key, "key", "k", "", "key (required)")
		if value {
			fs.StringVarP(&f.value, "value", "v", "", "value (required)")
		}
	} else {
		fs.StringVar(&f.namespace, "namespace", "", "namespace (required)")
		fs.StringVar(&f.key, "key", "", "key (required)")
		if value {
			fs.StringVar(&f.value, "value", "", "value (required)")
		}
	}
	_ = c.MarkFlagRequired("namespace")
	_ = c.MarkFlagRequired("key")
	if value {
		_ = c.MarkFlagRequired("value")
	}
}

func (a *adm) kvPut(ctx context.Context, f *kvFlags) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	if err := lib.PutKVConfig(ctx, f.namespace, f.key, f.value); err != nil {
		return err
	}
	r := kvRow{f.namespace, f.key, f.value}
	return a.print(r, "NAMESPACE\tKEY\tVALUE", [][]string{{r.Namespace, r.Key, r.Value}})
}

func (a *adm) kvDelete(ctx context.Context, f *kvFlags) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	if _, found, err := lib.KVConfig(ctx, f.namespace, f.key); err != nil {
		return err
	} else if !found {
		return fmt.Errorf("kv config %s/%s not found", f.namespace, f.key)
	}
	if err := lib.DeleteKVConfig(ctx, f.namespace, f.key); err != nil {
		return err
	}
	return a.print(map[string]any{"namespace": f.namespace, "key": f.key, "deleted": true}, "NAMESPACE\tKEY\tDELETED", [][]string{{f.namespace, f.key, "true"}})
}

func kvCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "kv", Short: "Name-server KV config (ORDER_TOPIC_CONFIG and others)"}
	fp, fd, fg := &kvFlags{}, &kvFlags{}, &kvFlags{}
	put := &cobra.Command{Use: "put", Short: "Set namespace/key on every name server (PUT_KV_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.kvPut(ctx, fp) })}
	fp.bind(put, false, true)
	del := &cobra.Command{Use: "delete", Short: "Remove namespace/key on every name server (DELETE_KV_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.kvDelete(ctx, fd) })}
	fd.bind(del, false, false)
	get := &cobra.Command{Use: "get", Short: "Read namespace/key (GET_KV_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			lib, err := a.library()
			if err != nil {
				return err
			}
			v, found, err := lib.KVConfig(ctx, fg.namespace, fg.key)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("kv config %s/%s not found", fg.namespace, fg.key)
			}
			r := kvRow{fg.namespace, fg.key, v}
			return a.print(r, "NAMESPACE\tKEY\tVALUE", [][]string{{r.Namespace, r.Key, r.Value}})
		})}
	fg.bind(get, false, false)
	var ns string
	list := &cobra.Command{Use: "list", Short: "Every key of a namespace (GET_KVLIST_BY_NAMESPACE)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			lib, err := a.library()
			if err != nil {
				return err
			}
			t, found, err := lib.KVList(ctx, ns)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("kv namespace %s not found", ns)
			}
			out := []kvRow{}
			var rows [][]string
			for _, k := range sortedKeys(t) {
				out = append(out, kvRow{ns, k, t[k]})
				rows = append(rows, []string{ns, k, t[k]})
			}
			return a.print(out, "NAMESPACE\tKEY\tVALUE", rows)
		})}
	list.Flags().StringVar(&ns, "namespace", "", "namespace (required)")
	_ = list.MarkFlagRequired("namespace")
	cmd.AddCommand(put, get, del, list)
	return cmd
}

// settingRow is one key=value of a server's config.
type settingRow struct {
	Server string `json:"server"`
	Key    string `json:"key"`
	Value  string `json:"value"`
}

func (a *adm) printSettings(by map[string]map[string]string) error {
	out := []settingRow{}
	var rows [][]string
	for _, s := range sortedKeys(by) {
		for _, k := range sortedKeys(by[s]) {
			out = append(out, settingRow{s, k, by[s][k]})
			rows = append(rows, []string{s, k, by[s][k]})
		}
	}
	return a.print(out, "SERVER\tKEY\tVALUE", rows)
}

func (a *adm) namesrvConfig(ctx context.Context) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	by, err := lib.NamesrvConfig(ctx)
	if err != nil {
		return err
	}
	return a.printSettings(by)
}

func (a *adm) updateNamesrvConfig(ctx context.Context, key, value string) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	if err := lib.UpdateNamesrvConfig(ctx, map[string]string{key: value}); err != nil {
		return err
	}
	return a.namesrvConfig(ctx)
}

func namesrvCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "namesrv", Short: "Name-server settings"}
	get := &cobra.Command{Use: "config", Short: "Every name server's settings (GET_NAMESRV_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.namesrvConfig(ctx) })}
	var key, value string
	set := &cobra.Command{Use: "set-config", Short: "Change a setting on every name server (UPDATE_NAMESRV_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.updateNamesrvConfig(ctx, key, value) })}
	set.Flags().StringVar(&key, "key", "", "setting (required)")
	set.Flags().StringVar(&value, "value", "", "new value (required)")
	_ = set.MarkFlagRequired("key")
	_ = set.MarkFlagRequired("value")
	cmd.AddCommand(get, set)
	return cmd
}

// brokerAddrs are --broker's address or every master's.
func (a *adm) brokerAddrs(ctx context.Context, broker, cluster string) ([]string, error) {
	if broker != "" && cluster == "" && strings.Contains(broker, ":") {
		return []string{broker}, nil
	}
	ms, err := a.targetMasters(ctx, broker, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Addr)
	}
	return out, nil
}

func (a *adm) brokerConfig(ctx context.Context, broker, cluster string) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	by := map[string]map[string]string{}
	for _, ad := range addrs {
		if by[ad], err = lib.BrokerConfig(ctx, ad); err != nil {
			return err
		}
	}
	return a.printSettings(by)
}

func (a *adm) updateBrokerConfig(ctx context.Context, broker, cluster, key, value string) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []settingRow{}
	var rows [][]string
	for _, ad := range addrs {
		if err := lib.UpdateBrokerConfig(ctx, ad, map[string]string{key: value}); err != nil {
			return err
		}
		cfg, err := lib.BrokerConfig(ctx, ad)
		if err != nil {
			return err
		}
		out = append(out, settingRow{ad, key, cfg[key]})
		rows = append(rows, []string{ad, key, cfg[key]})
	}
	return a.print(out, "SERVER\tKEY\tVALUE", rows)
}

// writePerm wipes or restores a broker's write permission on every name
// server (graceful decommission).
func (a *adm) writePerm(ctx context.Context, brokerName string, wipe bool) error {
	bs, err := a.brokers(ctx)
	if err != nil {
		return err
	}
	known := false
	for _, b := range bs {
		known = known || b.Name == brokerName
	}
	if !known {
		return fmt.Errorf("broker %s is not registered with the name server", brokerName)
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	var counts map[string]int
	if wipe {
		counts, err = lib.WipeWritePerm(ctx, brokerName)
	} else {
		counts, err = lib.AddWritePerm(ctx, brokerName)
	}
	if err != nil {
		return err
	}
	type row struct {
		Namesrv string `json:"namesrv"`
		Broker  string `json:"brokerName"`
		Topics  int    `json:"topics"`
	}
	out := []row{}
	var rows [][]string
	for _, ns := range sortedKeys(counts) {
		out = append(out, row{ns, brokerName, counts[ns]})
		rows = append(rows, []string{ns, brokerName, strconv.Itoa(counts[ns])})
	}
	return a.print(out, "NAMESRV\tBROKER\tTOPICS CHANGED", rows)
}

func (a *adm) clean(ctx context.Context, broker, cluster string, unusedTopics bool) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []map[string]any{}
	var rows [][]string
	for _, ad := range addrs {
		if unusedTopics {
			err = lib.CleanUnusedTopic(ctx, ad)
		} else {
			err = lib.CleanExpiredConsumeQueue(ctx, ad)
		}
		if err != nil {
			return err
		}
		out = append(out, map[string]any{"broker": ad, "cleaned": true})
		rows = append(rows, []string{ad, "true"})
	}
	return a.print(out, "BROKER\tCLEANED", rows)
}

// brokerOpsCmds are `broker config`, `broker set-config`, `broker
// wipe-write-perm`, `broker add-write-perm`, `broker clean-expired-cq`,
// `broker clean-unused-topics`, `broker consume-stats`.
func brokerOpsCmds(run runner) []*cobra.Command {
	var broker, cluster, key, value, name string
	var isOrder bool
	cfg := &cobra.Command{Use: "config", Short: "A broker's settings (GET_BROKER_CONFIG); every master without --broker", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.brokerConfig(ctx, broker, cluster) })}
	set := &cobra.Command{Use: "set-config", Short: "Change a setting of running brokers (UPDATE_BROKER_CONFIG); every master without --broker", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.updateBrokerConfig(ctx, broker, cluster, key, value) })}
	set.Flags().StringVar(&key, "key", "", "setting (required)")
	set.Flags().StringVar(&value, "value", "", "new value (required)")
	_ = set.MarkFlagRequired("key")
	_ = set.MarkFlagRequired("value")
	wipe := &cobra.Command{Use: "wipe-write-perm", Short: "Stop producers sending to a broker (WIPE_WRITE_PERM_OF_BROKER on every name server): graceful decommission", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.writePerm(ctx, name, true) })}
	add := &cobra.Command{Use: "add-write-perm", Short: "Let producers send to a broker again (ADD_WRITE_PERM_OF_BROKER)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.writePerm(ctx, name, false) })}
	for _, c := range []*cobra.Command{wipe, add} {
		c.Flags().StringVar(&name, "broker-name", "", "broker name (required)")
		_ = c.MarkFlagRequired("broker-name")
	}
	cq := &cobra.Command{Use: "clean-expired-cq", Short: "Drop consume queues of deleted data (CLEAN_EXPIRED_CONSUMEQUEUE)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.clean(ctx, broker, cluster, false) })}
	unused := &cobra.Command{Use: "clean-unused-topics", Short: "Drop queues of topics the broker no longer has (CLEAN_UNUSED_TOPIC)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.clean(ctx, broker, cluster, true) })}
	stats := &cobra.Command{Use: "consume-stats", Short: "Every group's lag on a broker (GET_BROKER_CONSUME_STATS)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.brokerConsumeStats(ctx, broker, isOrder) })}
	stats.Flags().BoolVar(&isOrder, "order", false, "only ordered topics")
	for _, c := range []*cobra.Command{cfg, set, cq, unused, stats} {
		c.Flags().StringVar(&broker, "broker", "", "broker address (default: every master)")
		c.Flags().StringVar(&cluster, "cluster", "", "the masters of this cluster")
	}
	return []*cobra.Command{cfg, set, wipe, add, cq, unused, stats}
}

// groupLag is one group's consumption of one topic on a broker.
type groupLag struct {
	Broker     string  `json:"broker"`
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	ConsumeTps float64 `json:"consumeTps"`
	Lag        int64   `json:"lag"`
}

func (a *adm) brokerConsumeStats(ctx context.Context, broker string, isOrder bool) error {
	addrs, err := a.brokerAddrs(ctx, broker, "")
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []groupLag{}
	var rows [][]string
	for _, ad := range addrs {
		body, err := lib.BrokerConsumeStats(ctx, ad, isOrder)
		if err != nil {
			return err
		}
		// {"brokerAddr":..,"consumeStatsList":[{"G":[{consumeTps, offsetTable{..}}]}],"totalDiff":N}
		// Each ConsumeStats's offsetTable is keyed by MessageQueue objects.
		var list struct {
			ConsumeStatsList []map[string][]struct {
				OffsetTable protocol.MQTable[queueStats] `json:"offsetTable"`
			} `json:"consumeStatsList"`
		}
		if err := protocol.UnmarshalFastjson(body, &list); err != nil {
			return fmt.Errorf("consume stats from %s: %w", ad, err)
		}
		for _, groups := range list.ConsumeStatsList {
			for _, group := range sortedKeys(groups) {
				byTopic := map[string]int64{}
				for _, cs := range groups[group] {
					for _, q := range mqTableRows(cs.OffsetTable) {
						byTopic[q.Topic] += max(q.BrokerOffset-q.ConsumerOffset, 0)
					}
				}
				for _, t := range sortedKeys(byTopic) {
					out = append(out, groupLag{Broker: ad, Group: group, Topic: t, Lag: byTopic[t]})
					rows = append(rows, []string{ad, group, t, i64(byTopic[t])})
				}
			}
		}
	}
	return a.print(out, "BROKER\tGROUP\tTOPIC\tLAG", rows)
}

func producerCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "producer", Short: "Producer groups"}
	var group, topic string
	conns := &cobra.Command{Use: "connections", Short: "A producer group's connections on the brokers of a topic (GET_PRODUCER_CONNECTION_LIST)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.producerConnections(ctx, group, topic) })}
	conns.Flags().StringVar(&group, "group", "", "producer group (required)")
	conns.Flags().StringVar(&topic, "topic", "", "a topic it sends to (required)")
	_ = conns.MarkFlagRequired("group")
	_ = conns.MarkFlagRequired("topic")
	cmd.AddCommand(conns)
	return cmd
}

// clientRow is one client connection seen by a broker.
type clientRow struct {
	Broker string `json:"broker"`
	clientadmin.Connection
}

func (a *adm) producerConnections(ctx context.Context, group, topic string) error {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []clientRow{}
	var rows [][]string
	for _, bq := range brokers {
		conns, _, err := lib.ProducerConnections(ctx, bq.addr, group)
		if err != nil {
			return err
		}
		for _, c := range conns {
			out = append(out, clientRow{bq.name, c})
			rows = append(rows, []string{bq.name, c.ClientID, c.ClientAddr, c.Language, strconv.Itoa(int(c.Version))})
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("producer group %s has no connection on the brokers of %s", group, topic)
	}
	return a.print(out, "BROKER\tCLIENT ID\tADDR\tLANGUAGE\tVERSION", rows)
}

func consumerCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "consumer", Short: "Online consumers of a group"}
	var group, clientID string
	var jstack bool
	conns := &cobra.Command{Use: "connections", Short: "A group's online consumers and subscriptions (GET_CONSUMER_CONNECTION_LIST)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.consumerConnections(ctx, group) })}
	status := &cobra.Command{Use: "status", Short: "Running info of a group's consumers, asked of each client (GET_CONSUMER_RUNNING_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.consumerStatus(ctx, group, clientID, jstack) })}
	status.Flags().StringVar(&clientID, "client", "", "only this client id")
	status.Flags().BoolVar(&jstack, "jstack", false, "ask Java clients for their thread stacks")
	cfg := &cobra.Command{Use: "config", Short: "A group's subscription config on each broker (mqadmin getConsumerConfig)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.consumerConfig(ctx, group) })}
	for _, c := range []*cobra.Command{conns, status, cfg} {
		c.Flags().StringVar(&group, "group", "", "consumer group (required)")
		_ = c.MarkFlagRequired("group")
	}
	cmd.AddCommand(conns, status, cfg)
	return cmd
}

func (a *adm) consumerConnections(ctx context.Context, group string) error {
	st, err := a.groupStatusOf(ctx, group)
	if err != nil {
		return err
	}
	if len(st.Clients) == 0 {
		return fmt.Errorf("consumer group %s has no consumer online", group)
	}
	var rows [][]string
	for _, c := range st.Clients {
		rows = append(rows, []string{c.ClientID, c.ClientAddr, c.Language, strconv.Itoa(int(c.Version)), c.Broker})
	}
	v := map[string]any{"group": group, "clients": st.Clients, "messageModel": st.MessageModel, "consumeType": st.ConsumeType}
	return a.print(v, "CLIENT ID\tADDR\tLANGUAGE\tVERSION\tBROKER", rows)
}

// clientInfo is one consumer's running info.
type clientInfo struct {
	ClientID   string            `json:"clientId"`
	Broker     string            `json:"broker"`
	Properties map[string]string `json:"properties"`
	Raw        string            `json:"runningInfo"`
}

// runningProps reads the properties object of a ConsumerRunningInfo.
func runningProps(body []byte) map[string]string {
	out := map[string]string{}
	i := strings.Index(string(body), `"properties":{`)
	if i < 0 {
		return out
	}
	var props map[string]any
	dec := json.NewDecoder(strings.NewReader(string(body[i+len(`"properties":`):])))
	if dec.Decode(&props) == nil {
		for k, v := range props {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

func (a *adm) consumerStatus(ctx context.Context, group, only string, jstack bool) error {
	st, err := a.groupStatusOf(ctx, group)
	if err != nil {
		return err
	}
	if len(st.Clients) == 0 {
		return fmt.Errorf("consumer group %s has no consumer online", group)
	}
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	addrOf := map[string]string{}
	for _, m := range ms {
		addrOf[m.Name] = m.Addr
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []clientInfo{}
	var rows [][]string
	seen := map[string]bool{}
	for _, c := range st.Clients {
		if seen[c.ClientID] || (only != "" && c.ClientID != only) {
			continue
		}
		seen[c.ClientID] = true
		body, err := lib.ConsumerRunningInfo(ctx, addrOf[c.Broker], group, c.ClientID, jstack)
		if err != nil {
			return err
		}
		props := runningProps(body)
		out = append(out, clientInfo{ClientID: c.ClientID, Broker: c.Broker, Properties: props, Raw: string(body)})
		rows = append(rows, []string{c.ClientID, c.Broker, props["PROP_CONSUME_TYPE"], props["PROP_THREADPOOL_CORE_SIZE"], props["PROP_CLIENT_VERSION"]})
	}
	if only != "" && len(out) == 0 {
		return fmt.Errorf("client %s is not an online consumer of %s", only, group)
	}
	return a.print(out, "CLIENT ID\tBROKER\tCONSUME TYPE\tTHREADS\tVERSION", rows)
}

func (a *adm) consumerConfig(ctx context.Context, group string) error {
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	by, cfgs, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return err
	}
	if len(by[group]) == 0 {
		return fmt.Errorf("consumer group %s does not exist", group)
	}
	out := []map[string]any{}
	var rows [][]string
	for _, b := range by[group] {
		var gc map[string]any
		if err := json.Unmarshal(cfgs[group+"@"+b], &gc); err != nil {
			return fmt.Errorf("group config of %s on %s: %w", group, b, err)
		}
		gc["broker"] = b
		out = append(out, gc)
		for _, k := range sortedKeys(gc) {
			if k != "broker" {
				rows = append(rows, []string{b, k, fmt.Sprint(gc[k])})
			}
		}
	}
	return a.print(out, "BROKER\tKEY\tVALUE", rows)
}

// cloneOffsetCmd is `offset clone` (and mqadmin cloneGroupOffset).
func cloneOffsetCmd(run runner, short bool) *cobra.Command {
	var src, dst, topic string
	var offline bool
	c := &cobra.Command{Use: "clone", Short: "Copy a group's committed offsets to another group (CLONE_GROUP_OFFSET)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.cloneOffsets(ctx, src, dst, topic, offline) })}
	fs := c.Flags()
	if short {
		c.Use = "cloneGroupOffset"
		fs.StringVarP(&src, "src", "s", "", "source group (required)")
		fs.StringVarP(&dst, "dest", "d", "", "destination group (required)")
		fs.StringVarP(&topic, "topic", "t", "", "topic (required)")
		fs.BoolVarP(&offline, "offline", "o", false, "the source group is offline")
	} else {
		fs.StringVar(&src, "src", "", "source group (required)")
		fs.StringVar(&dst, "dest", "", "destination group (required)")
		fs.StringVar(&topic, "topic", "", "topic (required)")
		fs.BoolVar(&offline, "offline", false, "the source group is offline")
	}
	for _, n := range []string{"src", "dest", "topic"} {
		_ = c.MarkFlagRequired(n)
	}
	return c
}

func (a *adm) cloneOffsets(ctx context.Context, src, dst, topic string, offline bool) error {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	if err := a.mustGroup(ctx, src); err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	var rows [][]string
	var names []string
	for _, bq := range brokers {
		if err := lib.CloneGroupOffset(ctx, bq.addr, src, dst, topic, offline); err != nil {
			return err
		}
		names = append(names, bq.name)
		rows = append(rows, []string{src, dst, topic, bq.name})
	}
	return a.print(map[string]any{"src": src, "dest": dst, "topic": topic, "brokers": names}, "SOURCE\tDESTINATION\tTOPIC\tBROKER", rows)
}

func statsCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "stats", Short: "Traffic statistics"}
	var topic string
	var active bool
	all := &cobra.Command{Use: "all", Short: "Per topic and group: messages in/out in the last minute and today (VIEW_BROKER_STATS_DATA)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.statsAll(ctx, topic, active) })}
	all.Flags().StringVar(&topic, "topic", "", "only this topic")
	all.Flags().BoolVar(&active, "active", false, "only topics with traffic")
	var amount, size int
	rt := &cobra.Command{Use: "send-rt", Short: "Send test messages to a topic and time each (mqadmin checkMsgSendRT)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.sendRT(ctx, topic, amount, size) })}
	rt.Flags().StringVar(&topic, "topic", "", "topic (required)")
	rt.Flags().IntVar(&amount, "amount", 100, "messages to send")
	rt.Flags().IntVar(&size, "size", 128, "body size in bytes")
	_ = rt.MarkFlagRequired("topic")
	cmd.AddCommand(all, rt)
	return cmd
}

// statsRow is one topic's (and group's) traffic.
type statsRow struct {
	Topic        string  `json:"topic"`
	Group        string  `json:"group,omitempty"`
	InTps        float64 `json:"inTps"`
	OutTps       float64 `json:"outTps"`
	InMsgMinute  int64   `json:"inMsgMinute"`
	OutMsgMinute int64   `json:"outMsgMinute"`
	InMsgDay     int64   `json:"inMsgDay"`
	OutMsgDay    int64   `json:"outMsgDay"`
}

func (a *adm) statsAll(ctx context.Context, only string, active bool) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	topics := []string{only}
	if only == "" {
		if topics, err = lib.Topics(ctx); err != nil {
			return err
		}
	}
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	by, _, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return err
	}
	out := []statsRow{}
	var rows [][]string
	for _, t := range topics {
		if only == "" && isInternalTopic(t) {
			continue
		}
		brokers, ok, err := a.route(ctx, t)
		if err != nil {
			return err
		}
		if !ok {
			if only != "" {
				return fmt.Errorf("topic %s does not exist", t)
			}
			continue
		}
		var in clientadmin.StatsItem
		for _, bq := range brokers {
			if it, ok, err := lib.BrokerStats(ctx, bq.addr, "TOPIC_PUT_NUMS", t); err != nil {
				return err
			} else if ok {
				in.StatsMinute.Sum += it.StatsMinute.Sum
				in.StatsMinute.Tps += it.StatsMinute.Tps
				in.StatsDay.Sum += it.StatsDay.Sum
			}
		}
		added := false
		for _, g := range sortedKeys(by) {
			var outIt clientadmin.StatsItem
			any := false
			for _, bq := range brokers {
				if it, ok, err := lib.BrokerStats(ctx, bq.addr, "GROUP_GET_NUMS", t+"@"+g); err != nil {
					return err
				} else if ok {
					any = true
					outIt.StatsMinute.Sum += it.StatsMinute.Sum
					outIt.StatsMinute.Tps += it.StatsMinute.Tps
					outIt.StatsDay.Sum += it.StatsDay.Sum
				}
			}
			if !any || outIt.StatsDay.Sum == 0 {
				continue
			}
			added = true
			r := statsRow{Topic: t, Group: g, InTps: in.StatsMinute.Tps, OutTps: outIt.StatsMinute.Tps, InMsgMinute: in.StatsMinute.Sum,
				OutMsgMinute: outIt.StatsMinute.Sum, InMsgDay: in.StatsDay.Sum, OutMsgDay: outIt.StatsDay.Sum}
			out = append(out, r)
		}
		if !added && (!active || in.StatsDay.Sum > 0) {
			out = append(out, statsRow{Topic: t, InTps: in.StatsMinute.Tps, InMsgMinute: in.StatsMinute.Sum, InMsgDay: in.StatsDay.Sum})
		}
	}
	for _, r := range out {
		rows = append(rows, []string{r.Topic, r.Group, fmt.Sprintf("%.2f", r.InTps), fmt.Sprintf("%.2f", r.OutTps), i64(r.InMsgMinute), i64(r.OutMsgMinute), i64(r.InMsgDay), i64(r.OutMsgDay)})
	}
	return a.print(out, "TOPIC\tGROUP\tIN TPS\tOUT TPS\tIN MSG 1M\tOUT MSG 1M\tIN MSG TODAY\tOUT MSG TODAY", rows)
}

// rtRow is one timed send.
type rtRow struct {
	Broker  string  `json:"broker"`
	QueueID int32   `json:"queueId"`
	OK      bool    `json:"ok"`
	RTms    float64 `json:"rtMs"`
}

func (a *adm) sendRT(ctx context.Context, topic string, amount, size int) error {
	if amount <= 0 || size < 0 {
		return usagef("--amount must be positive and --size not negative")
	}
	body := strings.Repeat("x", size)
	out := []rtRow{}
	var total time.Duration
	okN := 0
	for i := 0; i < amount; i++ {
		start := time.Now()
		res, err := a.sendOne(ctx, sendSpec{topic: topic, body: body, group: "TOOLS_PRODUCER", queue: -1})
		d := time.Since(start)
		r := rtRow{OK: err == nil, RTms: float64(d.Microseconds()) / 1000}
		if err == nil {
			r.Broker, r.QueueID = res.Broker, res.QueueID
			okN++
			total += d
		} else if i == 0 {
			return err
		}
		out = append(out, r)
	}
	if a.opts.output == "json" {
		return a.print(map[string]any{"topic": topic, "sends": out, "ok": okN, "avgRtMs": avgMs(total, okN)}, "", nil)
	}
	rows := make([][]string, 0, len(out))
	for _, r := range out {
		rows = append(rows, []string{r.Broker, strconv.Itoa(int(r.QueueID)), strconv.FormatBool(r.OK), fmt.Sprintf("%.3f", r.RTms)})
	}
	if err := a.print(nil, "BROKER\tQUEUE\tOK\tRT MS", rows); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "%d of %d sent, average %.3f ms\n", okN, amount, avgMs(total, okN))
	return nil
}

func avgMs(total time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(total.Microseconds()) / 1000 / float64(n)
}

// clusterRT times sends to each master's own topic (named after the
// broker, as Java's clusterRT does with its broker-name topics).
func (a *adm) clusterRT(ctx context.Context, cluster string, amount, size int) error {
	if amount <= 0 || size < 0 {
		return usagef("--amount must be positive and --size not negative")
	}
	ms, err := a.targetMasters(ctx, "", cluster)
	if err != nil {
		return err
	}
	type row struct {
		Cluster string  `json:"cluster"`
		Broker  string  `json:"brokerName"`
		Sent    int     `json:"sent"`
		Failed  int     `json:"failed"`
		AvgRTms float64 `json:"avgRtMs"`
	}
	out := []row{}
	var rows [][]string
	body := strings.Repeat("x", size)
	for _, m := range ms {
		r := row{Cluster: m.Cluster, Broker: m.Name}
		var total time.Duration
		for i := 0; i < amount; i++ {
			start := time.Now()
			_, err := a.sendOne(ctx, sendSpec{topic: m.Name, body: body, group: "TOOLS_PRODUCER", broker: m.Name, queue: -1})
			if err != nil {
				r.Failed++
				continue
			}
			r.Sent++
			total += time.Since(start)
		}
		r.AvgRTms = avgMs(total, r.Sent)
		out = append(out, r)
		rows = append(rows, []string{r.Cluster, r.Broker, strconv.Itoa(r.Sent), strconv.Itoa(r.Failed), fmt.Sprintf("%.3f", r.AvgRTms)})
	}
	return a.print(out, "CLUSTER\tBROKER\tSENT\tFAILED\tAVG RT MS", rows)
}
