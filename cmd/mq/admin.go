package main

// mq admin: cluster, broker, topic, group, message and acl commands. They
// build on admin_dlq.go's admin type (name-server routes, broker calls)
// and reuse client/admin where it already has the call (cluster info,
// topic create/delete/list).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// adminCmd is `mq admin`: admin_dlq.go's dlq and offset commands plus the
// rest. Every command prints an aligned table, or JSON with --output json.
func adminCmd() *cobra.Command {
	cmd := adminDLQCmd()
	o := &adminOpts{}
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "table | json")
	cmd.PersistentFlags().StringVar(&o.accessKey, "access-key", "", "ACL access key: sign every request (with --secret-key)")
	cmd.PersistentFlags().StringVar(&o.secretKey, "secret-key", "", "ACL secret key")
	run := func(f func(ctx context.Context, a *adm) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("--output %q: want table or json", o.output)
			}
			ns, _ := c.Flags().GetString("namesrv")
			timeout, _ := c.Flags().GetDuration("timeout")
			a := &adm{admin: newAdmin(ns, timeout), opts: o, w: c.OutOrStdout()}
			a.admin.sign = signer(cmd)
			defer a.Close()
			return f(c.Context(), a)
		}
	}
	cmd.AddCommand(clusterCmd(run), brokerStatusCmd(run), topicCmd(run), groupCmd(run), messageCmd(run), aclCmd(o, run))
	return cmd
}

type adminOpts struct {
	output               string
	accessKey, secretKey string
}

type runner func(func(ctx context.Context, a *adm) error) func(*cobra.Command, []string) error

// adm is one command's connection to the cluster.
type adm struct {
	*admin
	opts *adminOpts
	w    io.Writer
	lib  *clientadmin.Admin
	cl   *client.Client
}

func (a *adm) Close() error {
	if a.cl != nil {
		a.cl.Close()
	}
	return a.admin.Close()
}

// library returns client/admin on a client of the same name server.
func (a *adm) library() (*clientadmin.Admin, error) {
	if a.lib != nil {
		return a.lib, nil
	}
	opts := []client.Option{client.WithNameServers(a.namesrv), client.WithRequestTimeout(a.timeout), transports.WithDialer()}
	if a.opts.accessKey != "" {
		opts = append(opts, client.WithCredentials(a.opts.accessKey, a.opts.secretKey, ""))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, err
	}
	a.cl, a.lib = c, clientadmin.New(c)
	return a.lib, nil
}

// signer returns the ACL signing of admin's --access-key/--secret-key
// (persistent flags of the admin command), or nil when none is given.
func signer(admin *cobra.Command) func(ext map[string]string, body []byte) {
	ak, sk := admin.PersistentFlags().Lookup("access-key"), admin.PersistentFlags().Lookup("secret-key")
	if ak == nil || sk == nil || ak.Value.String() == "" {
		return nil
	}
	return func(ext map[string]string, body []byte) {
		acl.Sign(ext, body, ak.Value.String(), sk.Value.String(), "")
	}
}

// call sends one request (signed with --access-key) and returns the answer.
func (a *adm) call(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if ext == nil {
		ext = map[string]string{}
	}
	if a.sign != nil {
		a.sign(ext, body)
	}
	return a.c.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
}

// callOK is call with a non-success answer turned into an error.
func (a *adm) callOK(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	resp, err := a.call(ctx, addr, code, ext, body)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("%s: code %d %s", addr, resp.Code, strings.TrimSpace(resp.Remark))
	}
	return resp, nil
}

// print writes v as JSON, or the table rows under header.
func (a *adm) print(v any, header string, rows [][]string) error {
	if a.opts.output == "json" {
		enc := json.NewEncoder(a.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := table(a.w)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		for i := range r {
			if r[i] == "" {
				r[i] = "-" // keeps columns apart for readers splitting on spaces
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// brokerInfo is one registered broker.
type brokerInfo struct {
	Cluster string `json:"cluster"`
	Name    string `json:"brokerName"`
	ID      int64  `json:"brokerId"`
	Addr    string `json:"addr"`
}

// brokers lists every registered broker from the cluster info.
func (a *adm) brokers(ctx context.Context) ([]brokerInfo, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	ci, err := lib.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	clusterOf := map[string]string{}
	for c, names := range ci.Clusters {
		for _, n := range names {
			clusterOf[n] = c
		}
	}
	var out []brokerInfo
	for name, ids := range ci.Brokers {
		for id, addr := range ids {
			out = append(out, brokerInfo{Cluster: clusterOf[name], Name: name, ID: id, Addr: addr})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// masters are the brokers with id 0.
func (a *adm) masters(ctx context.Context) ([]brokerInfo, error) {
	all, err := a.brokers(ctx)
	if err != nil {
		return nil, err
	}
	var out []brokerInfo
	for _, b := range all {
		if b.ID == protocol.MasterID {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no master broker registered")
	}
	return out, nil
}

func (a *adm) runtimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.callOK(ctx, addr, remoting.GetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("runtime info of %s: %w", addr, err)
	}
	return kv.Table, nil
}

func clusterCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Clusters and their brokers"}
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List clusters, brokers and their traffic (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			bs, err := a.brokers(ctx)
			if err != nil {
				return err
			}
			type row struct {
				brokerInfo
				Version  string `json:"version"`
				InTotal  string `json:"msgPutTotal"`
				OutTotal string `json:"msgGetTotal"`
			}
			var out []row
			var rows [][]string
			for _, b := range bs {
				r := row{brokerInfo: b}
				if rt, err := a.runtimeInfo(ctx, b.Addr); err == nil {
					r.Version, r.InTotal, r.OutTotal = rt["brokerVersionDesc"], rt["msgPutTotalTodayNow"], rt["msgGetTotalTodayNow"]
				}
				out = append(out, r)
				rows = append(rows, []string{b.Cluster, b.Name, strconv.FormatInt(b.ID, 10), b.Addr, r.Version, r.InTotal, r.OutTotal})
			}
			return a.print(out, "CLUSTER\tBROKER\tID\tADDR\tVERSION\tIN TOTAL\tOUT TOTAL", rows)
		}),
	})
	return cmd
}

func brokerStatusCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "broker", Short: "Brokers"}
	var addr string
	status := &cobra.Command{
		Use: "status", Short: "A broker's runtime figures (GET_BROKER_RUNTIME_INFO); every master without --broker", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			addrs := []string{addr}
			if addr == "" {
				ms, err := a.masters(ctx)
				if err != nil {
					return err
				}
				addrs = addrs[:0]
				for _, m := range ms {
					addrs = append(addrs, m.Addr)
				}
			}
			out := map[string]map[string]string{}
			var rows [][]string
			for _, ad := range addrs {
				rt, err := a.runtimeInfo(ctx, ad)
				if err != nil {
					return err
				}
				out[ad] = rt
				keys := make([]string, 0, len(rt))
				for k := range rt {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					rows = append(rows, []string{ad, k, rt[k]})
				}
			}
			return a.print(out, "BROKER\tKEY\tVALUE", rows)
		}),
	}
	status.Flags().StringVar(&addr, "broker", "", "broker address (default: every master)")
	cmd.AddCommand(status)
	return cmd
}

func topicCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Create, update, delete and inspect topics"}
	var topic, broker string
	var readQ, writeQ, perm int
	var order bool
	upsert := func(update bool) func(ctx context.Context, a *adm) error {
		return func(ctx context.Context, a *adm) error {
			if update {
				// Asked of the brokers: the name server learns of a new
				// topic only at the broker's next registration.
				ms, err := a.masters(ctx)
				if err != nil {
					return err
				}
				found := false
				for _, m := range ms {
					resp, err := a.call(ctx, m.Addr, remoting.GetTopicStatsInfo, map[string]string{"topic": topic}, nil)
					if err != nil {
						return err
					}
					found = found || resp.Code == remoting.Success
				}
				if !found {
					return fmt.Errorf("topic %s does not exist", topic)
				}
			}
			lib, err := a.library()
			if err != nil {
				return err
			}
			tc := clientadmin.TopicConfig{Topic: topic, ReadQueueNums: readQ, WriteQueueNums: writeQ, Perm: perm, Order: order}
			if broker != "" {
				tc.Brokers = []string{broker}
			}
			if err := lib.CreateTopic(ctx, tc); err != nil {
				return err
			}
			res := map[string]any{"topic": topic, "readQueueNums": readQ, "writeQueueNums": writeQ, "perm": perm, "order": order}
			return a.print(res, "TOPIC\tREAD QUEUES\tWRITE QUEUES\tPERM\tORDER", [][]string{{topic, strconv.Itoa(readQ), strconv.Itoa(writeQ), strconv.Itoa(perm), strconv.FormatBool(order)}})
		}
	}
	mk := func(use, short string, update bool) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: run(upsert(update))}
		c.Flags().StringVar(&topic, "topic", "", "topic (required)")
		c.Flags().StringVar(&broker, "broker", "", "only this broker address (default: every master)")
		c.Flags().IntVar(&readQ, "read-queues", 8, "read queue count")
		c.Flags().IntVar(&writeQ, "write-queues", 8, "write queue count")
		c.Flags().IntVar(&perm, "perm", protocol.PermRead|protocol.PermWrite, "permission: 2 write, 4 read, 6 both")
		c.Flags().BoolVar(&order, "order", false, "ordered topic")
		_ = c.MarkFlagRequired("topic")
		return c
	}
	del := &cobra.Command{
		Use: "delete", Short: "Delete a topic on its brokers and the name servers", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			lib, err := a.library()
			if err != nil {
				return err
			}
			if err := lib.DeleteTopic(ctx, topic); err != nil {
				return err
			}
			return a.print(map[string]any{"topic": topic, "deleted": true}, "TOPIC\tDELETED", [][]string{{topic, "true"}})
		}),
	}
	del.Flags().StringVar(&topic, "topic", "", "topic (required)")
	_ = del.MarkFlagRequired("topic")
	var system bool
	list := &cobra.Command{
		Use: "list", Short: "List the topics the name server knows", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			lib, err := a.library()
			if err != nil {
				return err
			}
			all, err := lib.Topics(ctx)
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
		}),
	}
	list.Flags().BoolVar(&system, "system", false, "include system, retry and dead-letter topics")
	route := &cobra.Command{
		Use: "route", Short: "A topic's route (GET_ROUTEINFO_BY_TOPIC)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			resp, err := a.call(ctx, a.namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
			if err != nil {
				return err
			}
			if resp.Code == remoting.TopicNotExist {
				return fmt.Errorf("topic %s does not exist", topic)
			}
			if resp.Code != remoting.Success {
				return fmt.Errorf("route of %s: code %d %s", topic, resp.Code, resp.Remark)
			}
			var rd protocol.TopicRouteData
			if err := json.Unmarshal(resp.Body, &rd); err != nil {
				return fmt.Errorf("route of %s: %w", topic, err)
			}
			addrs := map[string]string{}
			for _, bd := range rd.BrokerDatas {
				addrs[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
			}
			var rows [][]string
			for _, q := range rd.QueueDatas {
				rows = append(rows, []string{q.BrokerName, addrs[q.BrokerName], strconv.Itoa(int(q.ReadQueueNums)), strconv.Itoa(int(q.WriteQueueNums)), strconv.Itoa(int(q.Perm))})
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
			return a.print(&rd, "BROKER\tADDR\tREAD QUEUES\tWRITE QUEUES\tPERM", rows)
		}),
	}
	status := &cobra.Command{
		Use: "status", Short: "Per-queue min/max offsets and last update (GET_TOPIC_STATS_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			out, err := a.topicStatus(ctx, topic)
			if err != nil {
				return err
			}
			var rows [][]string
			for _, q := range out {
				rows = append(rows, []string{q.BrokerName, strconv.Itoa(int(q.QueueID)), i64(q.MinOffset), i64(q.MaxOffset), fmtMs(q.LastUpdateTimestamp)})
			}
			return a.print(out, "BROKER\tQUEUE\tMIN OFFSET\tMAX OFFSET\tLAST UPDATED", rows)
		}),
	}
	for _, c := range []*cobra.Command{route, status} {
		c.Flags().StringVar(&topic, "topic", "", "topic (required)")
		_ = c.MarkFlagRequired("topic")
	}
	cmd.AddCommand(mk("create", "Create a topic (UPDATE_AND_CREATE_TOPIC) on every master or --broker", false),
		mk("update", "Change an existing topic's queues, permission or order", true), del, list, route, status)
	return cmd
}

func isInternalTopic(t string) bool {
	return protocol.IsSystemTopic(t) || protocol.IsRetryTopic(t) || strings.HasPrefix(t, protocol.DLQGroupPrefix) || t == protocol.AutoCreateTopic || strings.HasPrefix(t, "rmq_sys_")
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func fmtMs(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// queueStats is one queue of a TopicStatsTable or ConsumeStats answer.
type queueStats struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	// TopicStatsTable
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	// ConsumeStats
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

func sortQueues(qs []queueStats) {
	sort.Slice(qs, func(i, j int) bool {
		a, b := qs[i], qs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
}

// mqEntry is one {messageQueue}:{figures} pair of a fastjson table keyed
// by MessageQueue objects (not valid JSON, as Java writes it).
var mqEntry = regexp.MustCompile(`(\{[^{}]*"queueId"[^{}]*\})\s*:\s*(\{[^{}]*\})`)

// parseMQTable reads the offsetTable of a TopicStatsTable or ConsumeStats.
func parseMQTable(body []byte) ([]queueStats, error) {
	var out []queueStats
	for _, m := range mqEntry.FindAllSubmatch(body, -1) {
		var q queueStats
		if err := json.Unmarshal(m[1], &q); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(m[2], &q); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func groupCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "Create, delete and inspect consumer groups"}
	var group string
	var retryQueues, retryMax int
	create := &cobra.Command{
		Use: "create", Short: "Create or update a subscription group on every master (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			if err := protocol.ValidateGroup(group); err != nil {
				return err
			}
			ms, err := a.masters(ctx)
			if err != nil {
				return err
			}
			gc := map[string]any{"groupName": group, "consumeEnable": true, "consumeFromMinEnable": true, "consumeBroadcastEnable": true,
				"retryQueueNums": retryQueues, "retryMaxTimes": retryMax, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": true}
			body, _ := json.Marshal(gc)
			var rows [][]string
			for _, m := range ms {
				if _, err := a.callOK(ctx, m.Addr, remoting.UpdateAndCreateSubscriptionGroup, nil, body); err != nil {
					return err
				}
				rows = append(rows, []string{group, m.Name, strconv.Itoa(retryQueues), strconv.Itoa(retryMax)})
			}
			return a.print(gc, "GROUP\tBROKER\tRETRY QUEUES\tRETRY MAX", rows)
		}),
	}
	create.Flags().IntVar(&retryQueues, "retry-queues", 1, "retry queue count")
	create.Flags().IntVar(&retryMax, "retry-max", 16, "deliveries before a message goes to the dead-letter queue")
	del := &cobra.Command{
		Use: "delete", Short: "Delete a subscription group on every master", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			ms, err := a.masters(ctx)
			if err != nil {
				return err
			}
			var rows [][]string
			for _, m := range ms {
				if _, err := a.callOK(ctx, m.Addr, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": group}, nil); err != nil {
					return err
				}
				rows = append(rows, []string{group, m.Name, "true"})
			}
			return a.print(map[string]any{"group": group, "deleted": true}, "GROUP\tBROKER\tDELETED", rows)
		}),
	}
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
			by := map[string][]string{}
			for _, m := range ms {
				resp, err := a.callOK(ctx, m.Addr, remoting.GetAllSubscriptionGroupConfig, nil, nil)
				if err != nil {
					return err
				}
				var doc struct {
					Table map[string]json.RawMessage `json:"subscriptionGroupTable"`
				}
				if err := json.Unmarshal(resp.Body, &doc); err != nil {
					return fmt.Errorf("groups of %s: %w", m.Name, err)
				}
				for g := range doc.Table {
					by[g] = append(by[g], m.Name)
				}
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
	for _, c := range []*cobra.Command{create, del, status} {
		c.Flags().StringVar(&group, "group", "", "consumer group (required)")
		_ = c.MarkFlagRequired("group")
	}
	cmd.AddCommand(create, del, list, status)
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// isSystemGroup tells Java's and Quiver's built-in groups.
func isSystemGroup(g string) bool {
	switch g {
	case "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS":
		return true
	}
	return strings.HasPrefix(g, "CID_RMQ_SYS_")
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
	st := &groupStatus{Group: group, Queues: []groupProgress{}, Clients: []groupClient{}}
	for _, m := range ms {
		resp, err := a.callOK(ctx, m.Addr, remoting.GetConsumeStats, map[string]string{"consumerGroup": group}, nil)
		if err != nil {
			return nil, err
		}
		qs, err := parseMQTable(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("consume stats from %s: %w", m.Name, err)
		}
		sortQueues(qs)
		for _, q := range qs {
			lag := max(q.BrokerOffset-q.ConsumerOffset, 0)
			st.Lag += lag
			st.Queues = append(st.Queues, groupProgress{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID,
				BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Lag: lag, LastTimestamp: q.LastTimestamp})
		}
		resp, err = a.call(ctx, m.Addr, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
		if err != nil {
			return nil, err
		}
		if resp.Code == remoting.ConsumerNotOnline {
			continue
		}
		if resp.Code != remoting.Success {
			return nil, fmt.Errorf("%s: code %d %s", m.Addr, resp.Code, resp.Remark)
		}
		var cc struct {
			ConnectionSet []groupClient `json:"connectionSet"`
			MessageModel  string        `json:"messageModel"`
			ConsumeType   string        `json:"consumeType"`
		}
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			return nil, fmt.Errorf("connections from %s: %w", m.Name, err)
		}
		st.MessageModel, st.ConsumeType = cc.MessageModel, cc.ConsumeType
		for _, c := range cc.ConnectionSet {
			c.Broker = m.Name
			st.Clients = append(st.Clients, c)
		}
	}
	return st, nil
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
	out := []queueStats{}
	for _, bq := range brokers {
		resp, err := a.callOK(ctx, bq.addr, remoting.GetTopicStatsInfo, map[string]string{"topic": topic}, nil)
		if err != nil {
			return nil, err
		}
		qs, err := parseMQTable(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("topic stats from %s: %w", bq.name, err)
		}
		out = append(out, qs...)
	}
	sortQueues(out)
	return out, nil
}
