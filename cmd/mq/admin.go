package main

// mq admin: cluster, broker, topic, group, message and acl commands. They
// build on admin_dlq.go's admin type (name-server routes) and make every
// request through client/admin; no request is built here
// (TestAdminLayer).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
)

// adminCmd is `mq admin`. Every command prints an aligned table, or JSON
// with --output json; exit codes are 0 ok, 1 failed, 2 usage
// (admin_exit.go). mqadmin's command names (admin_alias.go) sit in a help
// section of their own.
func adminCmd() *cobra.Command {
	var ns string
	var timeout time.Duration
	cmd := &cobra.Command{Use: "admin", Short: "Administer a running cluster through its name server",
		Long: "Administer a running cluster through its name server.\n\n" +
			"Every command prints a table, or JSON with --output json. Exit codes: 0 done, 1 failed\n" +
			"(unknown topic or group, refused, unreachable), 2 usage (bad flags, a destructive command\n" +
			"without --yes outside a terminal). mqadmin's names work too: mq admin updateTopic -t T -c C."}
	cmd.PersistentFlags().StringVarP(&ns, "namesrv", "n", adminNamesrv(), "name server address host:port (env QUIVER_NAMESRV)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each request")
	o := &adminOpts{}
	cmd.PersistentFlags().StringVar(&o.output, "output", "table", "table | json")
	cmd.PersistentFlags().StringVar(&o.accessKey, "access-key", "", "ACL access key: sign every request (with --secret-key)")
	cmd.PersistentFlags().StringVar(&o.secretKey, "secret-key", "", "ACL secret key")
	run := func(f func(ctx context.Context, a *adm) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return usagef("--output %q: want table or json", o.output)
			}
			a := &adm{admin: newAdmin(ns, timeout), opts: o, w: c.OutOrStdout()}
			a.accessKey, a.secretKey = o.accessKey, o.secretKey
			defer a.Close()
			return connHint(f(c.Context(), a), ns)
		}
	}
	cmd.AddGroup(&cobra.Group{ID: "quiver", Title: "Commands:"}, &cobra.Group{ID: "mqadmin", Title: "mqadmin's names (same flags as sh mqadmin):"})
	for _, c := range []*cobra.Command{clusterCmd(run), brokerStatusCmd(run), topicCmd(run), groupCmd(run), messageCmd(run),
		aclCmd(o, run), dlqCmd(run), offsetCmd(run), kvCmd(run), namesrvCmd(run), producerCmd(run), consumerCmd(run), statsCmd(run)} {
		c.GroupID = "quiver"
		cmd.AddCommand(c)
		outputShorthand(c, &o.output)
	}
	for _, more := range adminCommands {
		for _, c := range more(run) {
			c.GroupID = "quiver"
			cmd.AddCommand(c)
			outputShorthand(c, &o.output)
		}
	}
	for _, c := range mqadminAliases(run) {
		c.GroupID = "mqadmin"
		cmd.AddCommand(c)
	}
	for _, more := range mqadminCommands {
		for _, c := range more(run) {
			c.GroupID = "mqadmin"
			cmd.AddCommand(c)
		}
	}
	cmd.SetHelpCommandGroupID("quiver")
	cmd.SetCompletionCommandGroupID("quiver")
	usageChecks(cmd)
	return cmd
}

// outputShorthand gives the Quiver-named commands -o for --output;
// mqadmin's names keep -o for their own options (updateTopic -o order).
func outputShorthand(c *cobra.Command, output *string) {
	if c.RunE != nil && c.Flags().ShorthandLookup("o") == nil {
		c.Flags().StringVarP(output, "output", "o", "table", "table | json")
	}
	for _, s := range c.Commands() {
		outputShorthand(s, output)
	}
}

type adminOpts struct {
	output               string
	accessKey, secretKey string
}

// adminCommands and mqadminCommands are the command families that live in
// files of their own (Quiver-named and mqadmin-named): one entry each.
var (
	adminCommands   = []func(run runner) []*cobra.Command{mirrorCmds}                 // admin_mirror.go
	mqadminCommands = []func(run runner) []*cobra.Command{acl2Cmds, traceMqadminCmds} // admin_acl2.go, admin_trace.go
)

type runner func(func(ctx context.Context, a *adm) error) func(*cobra.Command, []string) error

// adm is one command's connection to the cluster.
type adm struct {
	*admin
	opts *adminOpts
	w    io.Writer
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
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	kv, err := lib.BrokerRuntimeInfo(ctx, addr)
	return kv, codeErr(err)
}

// codeErr words a broker's refusal reported by client/admin as mq admin
// always has: "<addr>: code <n> <remark>"; other errors pass unchanged.
func codeErr(err error) error {
	var be *client.BrokerError
	if errors.As(err, &be) {
		return fmt.Errorf("%s: code %d %s", be.Addr, be.Code, strings.TrimSpace(be.Remark))
	}
	return err
}

// isInternalTopic tells the topics topic list hides without --system:
// RocketMQ's system topics, retry and dead-letter topics, TBW102, the
// trace topic and a cluster's request-reply topic (<cluster>_REPLY_TOPIC,
// which every broker creates at start).
func isInternalTopic(t string) bool {
	return protocol.IsSystemTopic(t) || protocol.IsRetryTopic(t) || strings.HasPrefix(t, protocol.DLQGroupPrefix) || t == protocol.AutoCreateTopic ||
		strings.HasPrefix(t, protocol.SystemTopicPrefix) || t == protocol.TraceTopic || strings.HasSuffix(t, "_REPLY_TOPIC")
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

// mqTableRows lists a table's rows with their queues filled in.
func mqTableRows(t protocol.MQTable[queueStats]) []queueStats {
	out := make([]queueStats, 0, len(t))
	for mq, q := range t {
		q.Topic, q.BrokerName, q.QueueID = mq.Topic, mq.BrokerName, mq.QueueID
		out = append(out, q)
	}
	return out
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
func isSystemGroup(g string) bool { return protocol.IsSystemGroup(g) }
