package main

// mq admin: dead-letter tools and offset reset by time. The shared bits
// (name-server route lookup, broker calls, output) live here too until the
// full admin command grows around them.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/retry"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// admin talks to a name server and the brokers it routes to.
type admin struct {
	namesrv string
	timeout time.Duration
	c       *remoting.Client
	sign    func(ext map[string]string, body []byte) // ACL signing (admin.go), or nil
}

func newAdmin(namesrv string, timeout time.Duration) *admin {
	cfg := tcp.NewConfig()
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		_, hp := transport.SplitScheme(addr)
		return tcp.Dial(ctx, hp, cfg, 0)
	}, nil, nil, remoting.PeerOptions{})
	return &admin{namesrv: namesrv, timeout: timeout, c: c}
}

func (a *admin) Close() error { return a.c.Close() }

func (a *admin) invoke(ctx context.Context, addr string, code int32, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if a.sign != nil {
		a.sign(ext, nil)
	}
	return a.c.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
}

// brokerQueues is one broker's share of a topic.
type brokerQueues struct {
	name, addr string
	readQueues int32
}

// route returns the master of every broker serving topic, sorted by name;
// ok is false when the topic has no route.
func (a *admin) route(ctx context.Context, topic string) ([]brokerQueues, bool, error) {
	resp, err := a.invoke(ctx, a.namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic})
	if err != nil {
		return nil, false, fmt.Errorf("route of %s from %s: %w", topic, a.namesrv, err)
	}
	if resp.Code == remoting.TopicNotExist {
		return nil, false, nil
	}
	if resp.Code != remoting.Success {
		return nil, false, fmt.Errorf("route of %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	var rd protocol.TopicRouteData
	if err := json.Unmarshal(resp.Body, &rd); err != nil {
		return nil, false, fmt.Errorf("route of %s: %w", topic, err)
	}
	addrs := map[string]string{}
	for _, bd := range rd.BrokerDatas {
		addrs[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
	}
	var out []brokerQueues
	for _, qd := range rd.QueueDatas {
		if a := addrs[qd.BrokerName]; a != "" {
			out = append(out, brokerQueues{name: qd.BrokerName, addr: a, readQueues: qd.ReadQueueNums})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, len(out) > 0, nil
}

func adminNamesrv() string {
	if v := os.Getenv("QUIVER_NAMESRV"); v != "" {
		return v
	}
	return "127.0.0.1:9876"
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// adminDLQCmd is `mq admin` with the dlq and offset subcommands.
func adminDLQCmd() *cobra.Command {
	var ns string
	var timeout time.Duration
	cmd := &cobra.Command{Use: "admin", Short: "Administer a running cluster through its name server"}
	cmd.PersistentFlags().StringVar(&ns, "namesrv", adminNamesrv(), "name server address (env QUIVER_NAMESRV)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "timeout of each request")
	open := func() *admin { a := newAdmin(ns, timeout); a.sign = signer(cmd); return a }

	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and resend a consumer group's dead letters (%DLQ%<group>)"}
	var group string
	var max int
	list := &cobra.Command{
		Use: "list", Short: "List the dead letters of a group", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := open()
			defer a.Close()
			return a.listDLQ(cmd.Context(), cmd.OutOrStdout(), group, max)
		},
	}
	list.Flags().StringVar(&group, "group", "", "consumer group (required)")
	list.Flags().IntVar(&max, "max", 1000, "list at most this many")
	_ = list.MarkFlagRequired("group")

	var msgID string
	var all bool
	resend := &cobra.Command{
		Use: "resend", Short: "Re-deliver dead letters to the group (only) through %RETRY%<group>", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (msgID == "") == !all {
				return fmt.Errorf("give either --msg-id or --all")
			}
			a := open()
			defer a.Close()
			return a.resendDLQ(cmd.Context(), cmd.OutOrStdout(), group, msgID)
		},
	}
	resend.Flags().StringVar(&group, "group", "", "consumer group (required)")
	resend.Flags().StringVar(&msgID, "msg-id", "", "message id (UNIQ_KEY, ORIGIN_MESSAGE_ID or offsetMsgId)")
	resend.Flags().BoolVar(&all, "all", false, "resend every dead letter of the group")
	_ = resend.MarkFlagRequired("group")
	dlq.AddCommand(list, resend)

	offset := &cobra.Command{Use: "offset", Short: "Consumer offsets"}
	var topic, ts string
	var force bool
	reset := &cobra.Command{
		Use: "reset", Short: "Reset a group's offsets on a topic to a time (online consumers are told)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := parseAdminTime(ts, time.Now())
			if err != nil {
				return err
			}
			a := open()
			defer a.Close()
			return a.resetOffset(cmd.Context(), cmd.OutOrStdout(), group, topic, ms, force)
		},
	}
	reset.Flags().StringVar(&group, "group", "", "consumer group (required)")
	reset.Flags().StringVar(&topic, "topic", "", "topic (required)")
	reset.Flags().StringVar(&ts, "timestamp", "", `RFC 3339 time (2026-12-02T10:00:00.000Z), relative to now ("-1h", "-90s"), epoch ms, or "end" (required)`)
	reset.Flags().BoolVar(&force, "force", true, "also move offsets forward (false: only rewind)")
	for _, f := range []string{"group", "topic", "timestamp"} {
		_ = reset.MarkFlagRequired(f)
	}
	offset.AddCommand(reset)

	cmd.AddCommand(dlq, offset)
	return cmd
}

// parseAdminTime reads a point in time as epoch ms (-1 for "end").
func parseAdminTime(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "end":
		return -1, nil
	case s == "now":
		return now.UnixMilli(), nil
	case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+"):
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("timestamp %q: %v", s, err)
		}
		return now.Add(d).UnixMilli(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: want RFC 3339 (2026-12-02T10:00:00.000Z), -1h style, epoch ms or end", s)
	}
	return t.UnixMilli(), nil
}

func (a *admin) listDLQ(ctx context.Context, w io.Writer, group string, max int) error {
	topic := protocol.DLQTopic(group)
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(w, "no dead letters for group %s (%s does not exist)\n", group, topic)
		return nil
	}
	tw := table(w)
	fmt.Fprintln(tw, "BROKER\tQUEUE\tOFFSET\tMSG ID\tOFFSET MSG ID\tTOPIC\tRECONSUMES\tSTORED\tBODY")
	n := 0
	for _, bq := range brokers {
		for q := int32(0); q < bq.readQueues && n < max; q++ {
			ext := map[string]string{"topic": topic, "queueId": strconv.Itoa(int(q))}
			resp, err := a.invoke(ctx, bq.addr, remoting.GetMinOffset, ext)
			if err != nil {
				return err
			}
			off, _ := strconv.ParseInt(resp.Ext("offset"), 10, 64)
			for n < max {
				resp, err := a.invoke(ctx, bq.addr, remoting.PullMessage, map[string]string{
					"consumerGroup": "TOOLS_CONSUMER", "topic": topic, "queueId": strconv.Itoa(int(q)),
					"queueOffset": strconv.FormatInt(off, 10), "maxMsgNums": "32", "sysFlag": "4",
					"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
				})
				if err != nil {
					return err
				}
				if resp.Code != remoting.Success {
					break
				}
				msgs, err := message.DecodeAll(resp.Body)
				if err != nil {
					return fmt.Errorf("decode pull from %s: %w", bq.addr, err)
				}
				for _, m := range msgs {
					if n >= max {
						break
					}
					body := string(m.Body)
					if len(body) > 40 {
						body = body[:40] + "…"
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%q\n", bq.name, q, m.QueueOffset, m.UniqKey(), m.MsgID(),
						m.Properties[message.PropertyRetryTopic], m.ReconsumeTimes, time.UnixMilli(m.StoreTimestamp).UTC().Format(time.RFC3339Nano), body)
					n++
				}
				next, err := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
				if err != nil || next <= off || len(msgs) == 0 {
					break
				}
				off = next
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d dead letter(s) in %s\n", n, topic)
	return nil
}

func (a *admin) resendDLQ(ctx context.Context, w io.Writer, group, msgID string) error {
	topic := protocol.DLQTopic(group)
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no dead letters for group %s (%s does not exist)", group, topic)
	}
	ext := map[string]string{"group": group}
	if msgID != "" {
		ext["msgId"] = msgID
	} else {
		ext["all"] = "true"
	}
	tw := table(w)
	fmt.Fprintln(tw, "BROKER\tMSG ID\tDEAD LETTER\tTOPIC\tNEW OFFSET MSG ID")
	n := 0
	var notFound []string
	for _, bq := range brokers {
		resp, err := a.invoke(ctx, bq.addr, retry.ResendDLQ, ext)
		if err != nil {
			return err
		}
		if resp.Code == remoting.QueryNotFound {
			notFound = append(notFound, bq.name)
			continue
		}
		if resp.Code != remoting.Success {
			return fmt.Errorf("resend on %s: code %d %s", bq.name, resp.Code, resp.Remark)
		}
		var res retry.ResendResult
		if err := json.Unmarshal(resp.Body, &res); err != nil {
			return fmt.Errorf("resend on %s: %w", bq.name, err)
		}
		for _, r := range res.Resent {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", bq.name, r.MsgID, r.OffsetMsgID, r.Topic, r.NewOffset)
			n++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if msgID != "" && n == 0 {
		return fmt.Errorf("no dead letter %s in %s", msgID, topic)
	}
	if len(notFound) > 0 {
		fmt.Fprintf(w, "no dead letters of group %s on broker(s) %s\n", group, strings.Join(notFound, ", "))
	}
	fmt.Fprintf(w, "%d dead letter(s) resent to %s\n", n, protocol.RetryTopic(group))
	return nil
}

// offsetEntry reads one {"brokerName":..,"queueId":..,"topic":..}:offset
// pair of a fastjson offset table.
var offsetEntry = regexp.MustCompile(`\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:(-?\d+)`)

func (a *admin) resetOffset(ctx context.Context, w io.Writer, group, topic string, ts int64, force bool) error {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	when := "the end of each queue"
	if ts >= 0 {
		when = time.UnixMilli(ts).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	tw := table(w)
	fmt.Fprintln(tw, "BROKER\tQUEUE\tOFFSET")
	told := 0
	for _, bq := range brokers {
		resp, err := a.invoke(ctx, bq.addr, remoting.InvokeBrokerToResetOffset, map[string]string{
			"topic": topic, "group": group, "timestamp": strconv.FormatInt(ts, 10), "isForce": strconv.FormatBool(force),
		})
		if err != nil {
			return err
		}
		if resp.Code != remoting.Success {
			return fmt.Errorf("reset on %s: code %d %s", bq.name, resp.Code, resp.Remark)
		}
		for _, m := range offsetEntry.FindAllStringSubmatch(string(resp.Body), -1) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", m[1], m[2], m[4])
		}
		n, _ := strconv.Atoi(resp.Ext("consumersNotified"))
		told += n
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "group %s on %s reset to %s; %d online consumer(s) told\n", group, topic, when, told)
	return nil
}
