package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
)

// groupBrokers maps every subscription group of the masters to the
// brokers that hold its config (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
func (a *adm) groupBrokers(ctx context.Context, ms []brokerInfo) (map[string][]string, map[string]json.RawMessage, error) {
	lib, err := a.library()
	if err != nil {
		return nil, nil, err
	}
	by := map[string][]string{}
	cfg := map[string]json.RawMessage{}
	for _, m := range ms {
		table, err := lib.SubscriptionGroups(ctx, m.Addr)
		if err != nil {
			return nil, nil, codeErr(err)
		}
		for g, raw := range table {
			by[g] = append(by[g], m.Name)
			cfg[g+"@"+m.Name] = raw
		}
	}
	return by, cfg, nil
}

// groupExists reports whether any master has group's subscription config
// or an online consumer of it.
func (a *adm) groupExists(ctx context.Context, group string) (bool, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return false, err
	}
	by, _, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return false, err
	}
	if len(by[group]) > 0 {
		return true, nil
	}
	lib, err := a.library()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		_, online, err := lib.ConsumerConnections(ctx, m.Addr, group)
		var be *client.BrokerError
		if errors.As(err, &be) {
			continue // as before: any refusal is "not here"
		}
		if err != nil {
			return false, err
		}
		if online {
			return true, nil
		}
	}
	return false, nil
}

// mustGroup is groupExists as an error naming the group.
func (a *adm) mustGroup(ctx context.Context, group string) error {
	ok, err := a.groupExists(ctx, group)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("consumer group %s does not exist (no broker has its subscription config or an online consumer)", group)
	}
	return nil
}

// groupFlags are the settings of group create/update (updateSubGroup).
type groupFlags struct {
	group, broker, cluster   string
	retryQueues, retryMax    int
	consumeEnable, broadcast bool
	fromMin, orderly         bool
	brokerID, slowBroker     int64
	// retryPolicy is RocketMQ 5's groupRetryPolicy as JSON (mqadmin -p).
	retryPolicy string
}

// retryPolicyUsage describes --retry-policy (mqadmin updateSubGroup -p).
const retryPolicyUsage = `RocketMQ 5 retry policy as JSON, e.g. {"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}} ` +
	`or {"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}}`

func (f *groupFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	if short {
		fs.StringVarP(&f.group, "group", "g", "", "consumer group (required)")
		fs.StringVarP(&f.broker, "broker", "b", "", "only this broker address")
		fs.StringVarP(&f.cluster, "cluster", "c", "", "only the masters of this cluster")
		fs.IntVarP(&f.retryQueues, "retry-queues", "q", 1, "retry queue count")
		fs.IntVarP(&f.retryMax, "retry-max", "r", 16, "deliveries before a message goes to the dead-letter queue")
		fs.BoolVarP(&f.consumeEnable, "consume-enable", "s", true, "consumption allowed")
		fs.BoolVarP(&f.fromMin, "consume-from-min", "m", true, "a new group may start from the queues' minimum offset")
		fs.BoolVarP(&f.broadcast, "broadcast", "d", true, "broadcast consumption allowed")
		fs.BoolVarP(&f.orderly, "orderly", "o", false, "orderly consumption")
		fs.Int64VarP(&f.brokerID, "broker-id", "i", 0, "broker id to consume from")
		fs.Int64VarP(&f.slowBroker, "slow-broker-id", "w", 1, "broker id to consume from when consumption is slow")
		fs.StringVarP(&f.retryPolicy, "retry-policy", "p", "", retryPolicyUsage)
	} else {
		fs.StringVar(&f.group, "group", "", "consumer group (required)")
		fs.StringVar(&f.broker, "broker", "", "only this broker address")
		fs.StringVar(&f.cluster, "cluster", "", "only the masters of this cluster")
		fs.IntVar(&f.retryQueues, "retry-queues", 1, "retry queue count")
		fs.IntVar(&f.retryMax, "retry-max", 16, "deliveries before a message goes to the dead-letter queue")
		fs.BoolVar(&f.consumeEnable, "consume-enable", true, "consumption allowed")
		fs.BoolVar(&f.fromMin, "consume-from-min", true, "a new group may start from the queues' minimum offset")
		fs.BoolVar(&f.broadcast, "broadcast", true, "broadcast consumption allowed")
		fs.BoolVar(&f.orderly, "orderly", false, "orderly consumption")
		fs.Int64Var(&f.brokerID, "broker-id", 0, "broker id to consume from")
		fs.Int64Var(&f.slowBroker, "slow-broker-id", 1, "broker id to consume from when consumption is slow")
		fs.StringVar(&f.retryPolicy, "retry-policy", "", retryPolicyUsage)
	}
	_ = c.MarkFlagRequired("group")
}

// groupConfigJSON is a SubscriptionGroupConfig as the broker stores it.
type groupConfigJSON struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int    `json:"retryQueueNums"`
	RetryMaxTimes                  int    `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	// GroupRetryPolicy is RocketMQ 5's retry policy; absent, the broker's
	// default (customized levels 1s…2h).
	GroupRetryPolicy json.RawMessage `json:"groupRetryPolicy,omitempty"`
}

// upsertGroup creates or changes a subscription group; on a broker that
// has it only the flags given change. mode as for topics.
func (a *adm) upsertGroup(ctx context.Context, c *cobra.Command, f *groupFlags, mode topicMode) error {
	if err := protocol.ValidateGroup(f.group); err != nil {
		return usageError{err}
	}
	var policy json.RawMessage
	if f.retryPolicy != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(f.retryPolicy), &obj); err != nil {
			return usagef("--retry-policy: not a JSON object: %v", err)
		}
		policy = json.RawMessage(f.retryPolicy)
	}
	ms, err := a.targetMasters(ctx, f.broker, f.cluster)
	if err != nil {
		return err
	}
	by, cfgs, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return err
	}
	switch {
	case mode == topicCreate && len(by[f.group]) > 0:
		return fmt.Errorf("consumer group %s already exists on %s (change it with group update)", f.group, strings.Join(by[f.group], ","))
	case mode == topicUpdate && len(by[f.group]) == 0:
		return fmt.Errorf("consumer group %s does not exist", f.group)
	}
	changed := c.Flags().Changed
	// groupRow is one broker's config of the group, as the table shows it.
	type groupRow struct {
		groupConfigJSON
		Broker  string `json:"broker"`
		Created bool   `json:"created"`
	}
	out := []groupRow{}
	var rows [][]string
	for _, m := range ms {
		gc := groupConfigJSON{GroupName: f.group, ConsumeEnable: f.consumeEnable, ConsumeFromMinEnable: f.fromMin, ConsumeBroadcastEnable: f.broadcast,
			ConsumeMessageOrderly: f.orderly, RetryQueueNums: f.retryQueues, RetryMaxTimes: f.retryMax, BrokerID: f.brokerID,
			WhichBrokerWhenConsumeSlowly: f.slowBroker, NotifyConsumerIdsChangedEnable: true, GroupRetryPolicy: policy}
		body, _ := json.Marshal(gc)
		action := "created"
		if raw, ok := cfgs[f.group+"@"+m.Name]; ok {
			action = "updated"
			// Start from what the broker has (keeping fields this tool
			// does not know) and overlay the flags given.
			var cur map[string]any
			if err := json.Unmarshal(raw, &cur); err != nil {
				return fmt.Errorf("group config of %s on %s: %w", f.group, m.Name, err)
			}
			var given map[string]any
			_ = json.Unmarshal(body, &given)
			for flag, key := range map[string]string{"retry-queues": "retryQueueNums", "retry-max": "retryMaxTimes", "consume-enable": "consumeEnable",
				"consume-from-min": "consumeFromMinEnable", "broadcast": "consumeBroadcastEnable", "orderly": "consumeMessageOrderly",
				"broker-id": "brokerId", "slow-broker-id": "whichBrokerWhenConsumeSlowly", "retry-policy": "groupRetryPolicy"} {
				if changed(flag) {
					cur[key] = given[key]
				}
			}
			body, _ = json.Marshal(cur)
			_ = json.Unmarshal(body, &gc)
		} else if mode == topicUpdate {
			continue
		}
		lib, err := a.library()
		if err != nil {
			return err
		}
		if err := lib.PutSubscriptionGroup(ctx, m.Addr, body); err != nil {
			return codeErr(err)
		}
		out = append(out, groupRow{gc, m.Name, action == "created"})
		rows = append(rows, []string{f.group, m.Name, strconv.Itoa(gc.RetryQueueNums), strconv.Itoa(gc.RetryMaxTimes), strconv.FormatBool(gc.ConsumeEnable), strconv.FormatBool(gc.ConsumeMessageOrderly),
			retryPolicyType(gc.GroupRetryPolicy), action})
	}
	return a.print(out, "GROUP\tBROKER\tRETRY QUEUES\tRETRY MAX\tCONSUME ENABLED\tORDERLY\tRETRY POLICY\tACTION", rows)
}

// deleteGroup deletes a subscription group on the masters holding it.
func (a *adm) deleteGroup(ctx context.Context, c *cobra.Command, group, cluster string, yes bool) error {
	ms, err := a.targetMasters(ctx, "", cluster)
	if err != nil {
		return err
	}
	by, _, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return err
	}
	if len(by[group]) == 0 {
		return fmt.Errorf("consumer group %s not found", group)
	}
	if err := confirm(c, yes, "delete consumer group "+group); err != nil {
		return err
	}
	has := map[string]bool{}
	for _, n := range by[group] {
		has[n] = true
	}
	var rows [][]string
	var names []string
	for _, m := range ms {
		if !has[m.Name] {
			continue
		}
		lib, err := a.library()
		if err != nil {
			return err
		}
		if err := lib.DeleteSubscriptionGroup(ctx, m.Addr, group); err != nil {
			return codeErr(err)
		}
		rows = append(rows, []string{group, m.Name, "true"})
		names = append(names, m.Name)
	}
	return a.print(map[string]any{"group": group, "deleted": true, "brokers": names}, "GROUP\tBROKER\tDELETED", rows)
}

func groupCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "Create, update, delete and inspect consumer groups"}
	mk := func(use, short string, mode topicMode) *cobra.Command {
		f := &groupFlags{}
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
		c.RunE = run(func(ctx context.Context, a *adm) error { return a.upsertGroup(ctx, c, f, mode) })
		f.bind(c, false)
		return c
	}
	var group, cluster string
	var yes bool
	del := &cobra.Command{Use: "delete", Short: "Delete a subscription group on the masters holding it (asks; --yes in scripts)", Args: cobra.NoArgs}
	del.RunE = run(func(ctx context.Context, a *adm) error { return a.deleteGroup(ctx, del, group, cluster, yes) })
	del.Flags().StringVar(&cluster, "cluster", "", "only the masters of this cluster")
	del.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	var system bool
	list := &cobra.Command{
		Use: "list", Short: "List subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			ms, err := a.masters(ctx)
			if err != nil {
				return err
			}
			type groupRow struct {
				Group   string   `json:"group"`
				Brokers []string `json:"brokers"`
			}
			by, _, err := a.groupBrokers(ctx, ms)
			if err != nil {
				return err
			}
			out := []groupRow{}
			var rows [][]string
			for _, g := range sortedKeys(by) {
				if !system && isSystemGroup(g) {
					continue
				}
				out = append(out, groupRow{g, by[g]})
				rows = append(rows, []string{g, strings.Join(by[g], ",")})
			}
			return a.print(out, "GROUP\tBROKERS", rows)
		}),
	}
	list.Flags().BoolVar(&system, "system", false, "include the brokers' own groups")
	status := &cobra.Command{
		Use: "status", Short: "Consumer progress per queue and online clients (GET_CONSUME_STATS, GET_CONSUMER_CONNECTION_LIST)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.groupStatus(ctx, group) }),
	}
	for _, c := range []*cobra.Command{del, status} {
		c.Flags().StringVar(&group, "group", "", "consumer group (required)")
		_ = c.MarkFlagRequired("group")
	}
	cmd.AddCommand(mk("create", "Create a subscription group on every master, --cluster's or --broker; refuses an existing group", topicCreate),
		mk("update", "Change an existing subscription group: only the flags given change", topicUpdate), del, list, status)
	return cmd
}

type groupProgress struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Lag            int64  `json:"lag"`
	LastTimestamp  int64  `json:"lastTimestamp"`
}

type groupClient struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
	Broker     string `json:"broker"`
}

type groupStatus struct {
	Group        string          `json:"group"`
	Lag          int64           `json:"lag"`
	Queues       []groupProgress `json:"queues"`
	Clients      []groupClient   `json:"clients"`
	MessageModel string          `json:"messageModel,omitempty"`
	ConsumeType  string          `json:"consumeType,omitempty"`
	// ConsumeTps is the brokers' consume TPS of the group, summed.
	ConsumeTps float64 `json:"consumeTps"`
}

func (a *adm) groupStatus(ctx context.Context, group string) error {
	st, err := a.groupStatusOf(ctx, group)
	if err != nil {
		return err
	}
	if a.opts.output == "json" {
		return a.print(st, "", nil)
	}
	var rows [][]string
	for _, q := range st.Queues {
		rows = append(rows, []string{q.Topic, q.BrokerName, strconv.Itoa(int(q.QueueID)), i64(q.BrokerOffset), i64(q.ConsumerOffset), i64(q.Lag), fmtMs(q.LastTimestamp)})
	}
	if err := a.print(nil, "TOPIC\tBROKER\tQUEUE\tBROKER OFFSET\tCONSUMER OFFSET\tLAG\tLAST CONSUMED", rows); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "total lag %d\n\n", st.Lag)
	rows = rows[:0]
	for _, c := range st.Clients {
		rows = append(rows, []string{c.ClientID, c.ClientAddr, c.Language, strconv.Itoa(int(c.Version)), c.Broker})
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.w, "no client online")
		return nil
	}
	return a.print(nil, "CLIENT ID\tADDR\tLANGUAGE\tVERSION\tBROKER", rows)
}

// groupStatusOf gathers a group's progress and clients from every master.
func (a *adm) groupStatusOf(ctx context.Context, group string) (*groupStatus, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.mustGroup(ctx, group); err != nil {
		return nil, err
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	st := &groupStatus{Group: group, Queues: []groupProgress{}, Clients: []groupClient{}}
	for _, m := range ms {
		cs, err := lib.ConsumeStats(ctx, m.Addr, group, "")
		if err != nil {
			return nil, codeErr(err)
		}
		st.ConsumeTps += cs.ConsumeTps
		qs := make([]queueStats, 0, len(cs.OffsetTable))
		for mq, o := range cs.OffsetTable {
			qs = append(qs, queueStats{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID,
				BrokerOffset: o.BrokerOffset, ConsumerOffset: o.ConsumerOffset, LastTimestamp: o.LastTimestamp})
		}
		sortQueues(qs)
		for _, q := range qs {
			lag := max(q.BrokerOffset-q.ConsumerOffset, 0)
			st.Lag += lag
			st.Queues = append(st.Queues, groupProgress{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID,
				BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Lag: lag, LastTimestamp: q.LastTimestamp})
		}
		cc, online, err := lib.ConsumerConnections(ctx, m.Addr, group)
		if err != nil {
			return nil, codeErr(err)
		}
		if !online {
			continue
		}
		st.MessageModel, st.ConsumeType = cc.MessageModel, cc.ConsumeType
		for _, c := range cc.ConnectionSet {
			st.Clients = append(st.Clients, groupClient{ClientID: c.ClientID, ClientAddr: c.ClientAddr, Language: c.Language, Version: c.Version, Broker: m.Name})
		}
	}
	return st, nil
}

// retryPolicyType is a groupRetryPolicy's type ("" for none).
func retryPolicyType(raw json.RawMessage) string {
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &p) //nolint:errcheck // none or not ours: no type to show
	return p.Type
}
