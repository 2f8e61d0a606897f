package main

// mq admin: dead-letter tools and offset reset by time. The shared bits
// (the admin type: client/admin on a client of the name server, route
// lookup, output) live here too.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/modules/retry"
)

// admin talks to a name server and the brokers it routes to, through
// client/admin on a client of that name server (made on first use).
type admin struct {
	namesrv string
	timeout time.Duration
	// accessKey and secretKey sign every request (ACL), when set.
	accessKey, secretKey string
	// dial opens connections; nil means client/transports' default set.
	dial client.DialFunc

	cl  *client.Client
	lib *clientadmin.Admin
}

func newAdmin(namesrv string, timeout time.Duration) *admin {
	return &admin{namesrv: namesrv, timeout: timeout}
}

func (a *admin) Close() error {
	if a.cl == nil {
		return nil
	}
	return a.cl.Close()
}

// library returns client/admin on a client of the name server.
func (a *admin) library() (*clientadmin.Admin, error) {
	if a.lib != nil {
		return a.lib, nil
	}
	dial := a.dial
	if dial == nil {
		dial = transports.Dialer()
	}
	opts := []client.Option{client.WithNameServers(a.namesrv), client.WithRequestTimeout(a.timeout), client.WithDialer(dial)}
	if a.accessKey != "" {
		opts = append(opts, client.WithCredentials(a.accessKey, a.secretKey, ""))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, err
	}
	a.cl, a.lib = c, clientadmin.New(c)
	return a.lib, nil
}

// brokerQueues is one broker's share of a topic.
type brokerQueues struct {
	name, addr string
	readQueues int32
}

// routeData is topic's route from the name server; ok is false when the
// name server does not know the topic.
func (a *admin) routeData(ctx context.Context, topic string) (*protocol.TopicRouteData, bool, error) {
	lib, err := a.library()
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	r, err := lib.Route(ctx, topic)
	var be *client.BrokerError
	switch {
	case errors.Is(err, client.ErrNoRoute):
		return nil, false, nil
	case errors.As(err, &be):
		return nil, false, fmt.Errorf("route of %s: code %d %s", topic, be.Code, be.Remark)
	case err != nil:
		return nil, false, fmt.Errorf("route of %s from %s: %w", topic, a.namesrv, err)
	}
	return r.Data, true, nil
}

// route returns the master of every broker serving topic, sorted by name;
// ok is false when the topic has no route.
func (a *admin) route(ctx context.Context, topic string) ([]brokerQueues, bool, error) {
	rd, ok, err := a.routeData(ctx, topic)
	if err != nil || !ok {
		return nil, false, err
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

// dlqCmd is `mq admin dlq`: list and resend a group's dead letters.
func dlqCmd(run runner) *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and resend a consumer group's dead letters (%DLQ%<group>)"}
	var group string
	var max int
	list := &cobra.Command{
		Use: "list", Short: "List the dead letters of a group", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.listDLQ(ctx, group, max) }),
	}
	list.Flags().StringVar(&group, "group", "", "consumer group (required)")
	list.Flags().IntVar(&max, "max", 1000, "list at most this many")
	_ = list.MarkFlagRequired("group")

	var msgID string
	var all, yes, again bool
	resend := &cobra.Command{
		Use: "resend", Short: "Re-deliver dead letters to the group (only) through %RETRY%<group>; each is marked, a second resend needs --again", Args: cobra.NoArgs,
	}
	resend.RunE = run(func(ctx context.Context, a *adm) error {
		if (msgID == "") == !all {
			return usagef("give either --msg-id or --all")
		}
		if all {
			if err := confirm(resend, yes, "resend every dead letter of group "+group); err != nil {
				return err
			}
		}
		return a.resendDLQ(ctx, group, msgID, again)
	})
	resend.Flags().StringVar(&group, "group", "", "consumer group (required)")
	resend.Flags().StringVar(&msgID, "msg-id", "", "message id (UNIQ_KEY, ORIGIN_MESSAGE_ID or offsetMsgId)")
	resend.Flags().BoolVar(&all, "all", false, "resend every dead letter of the group (asks; --yes in scripts)")
	resend.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	resend.Flags().BoolVar(&again, "again", false, "also resend dead letters resent before")
	_ = resend.MarkFlagRequired("group")
	dlq.AddCommand(list, resend)
	return dlq
}

// resetFlags are offset reset's (and resetOffsetByTime's) settings.
type resetFlags struct {
	group, topic, ts string
	force, yes       bool
	// java prints mqadmin's text (resetOffsetByTime).
	java bool
}

func (f *resetFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	const tsHelp = `RFC 3339 time (2026-12-02T10:00:00.000Z), relative to now ("-1h", "-90s"), epoch ms, "now" or "end" (required)`
	const forceHelp = "also move offsets forward; --force=false only rewinds"
	if short {
		fs.StringVarP(&f.group, "group", "g", "", "consumer group (required)")
		fs.StringVarP(&f.topic, "topic", "t", "", "topic (required)")
		fs.StringVarP(&f.ts, "timestamp", "s", "", tsHelp)
		fs.BoolVarP(&f.force, "force", "f", true, forceHelp)
	} else {
		fs.StringVar(&f.group, "group", "", "consumer group (required)")
		fs.StringVar(&f.topic, "topic", "", "topic (required)")
		fs.StringVar(&f.ts, "timestamp", "", tsHelp)
		fs.BoolVar(&f.force, "force", true, forceHelp)
	}
	fs.BoolVar(&f.yes, "yes", false, "do not ask for confirmation")
	for _, n := range []string{"group", "topic", "timestamp"} {
		_ = c.MarkFlagRequired(n)
	}
}

func (a *adm) runReset(ctx context.Context, c *cobra.Command, f *resetFlags) error {
	ms, err := parseAdminTime(f.ts, time.Now())
	if err != nil {
		return usageError{err}
	}
	if _, ok, err := a.route(ctx, f.topic); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("topic %s does not exist", f.topic)
	}
	if err := a.mustGroup(ctx, f.group); err != nil {
		return err
	}
	if err := confirm(c, f.yes, fmt.Sprintf("reset the offsets of group %s on topic %s", f.group, f.topic)); err != nil {
		return err
	}
	if f.java && a.opts.output != "json" {
		return a.resetOffsetJava(ctx, f, ms)
	}
	return a.resetOffset(ctx, f.group, f.topic, ms, f.force)
}

// offsetCmd is `mq admin offset`.
func offsetCmd(run runner) *cobra.Command {
	offset := &cobra.Command{Use: "offset", Short: "Consumer offsets"}
	f := &resetFlags{}
	reset := &cobra.Command{
		Use: "reset", Short: "Reset a group's offsets on a topic to a time (online consumers are told; asks, --yes in scripts)", Args: cobra.NoArgs,
	}
	reset.RunE = run(func(ctx context.Context, a *adm) error { return a.runReset(ctx, reset, f) })
	f.bind(reset, false)
	offset.AddCommand(reset, cloneOffsetCmd(run, false))
	return offset
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
	// mqadmin's yyyy-MM-dd#HH:mm:ss:SSS, in local time as Java reads it.
	if t, err := time.ParseInLocation("2006-01-02#15:04:05:000", s, time.Local); err == nil {
		return t.UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: want RFC 3339 (2026-12-02T10:00:00.000Z), -1h style, epoch ms, yyyy-MM-dd#HH:mm:ss:SSS, now or end", s)
	}
	return t.UnixMilli(), nil
}

// deadLetter is one message of a DLQ as dlq list shows it.
type deadLetter struct {
	Broker         string `json:"broker"`
	QueueID        int32  `json:"queueId"`
	QueueOffset    int64  `json:"queueOffset"`
	MsgID          string `json:"msgId"`
	OffsetMsgID    string `json:"offsetMsgId"`
	Topic          string `json:"topic"`
	ReconsumeTimes int32  `json:"reconsumeTimes"`
	StoreTimestamp int64  `json:"storeTimestamp"`
	Body           string `json:"body"`
}

func (a *adm) listDLQ(ctx context.Context, group string, max int) error {
	topic := protocol.DLQTopic(group)
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	out := []deadLetter{}
	if !ok {
		if err := a.mustGroup(ctx, group); err != nil {
			return err
		}
		if a.opts.output == "json" {
			return a.print(out, "", nil)
		}
		fmt.Fprintf(a.w, "no dead letters for group %s (%s does not exist)\n", group, topic)
		return nil
	}
	for _, bq := range brokers {
		for q := int32(0); q < bq.readQueues && len(out) < max; q++ {
			off, err := a.minOffset(ctx, bq.addr, topic, int(q))
			if err != nil {
				return err
			}
			msgs, err := a.pullFrom(ctx, bq, q, topic, off, max-len(out))
			if err != nil {
				return err
			}
			for _, m := range msgs {
				out = append(out, deadLetter{Broker: bq.name, QueueID: q, QueueOffset: m.QueueOffset, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID,
					Topic: m.Properties[message.PropertyRetryTopic], ReconsumeTimes: m.ReconsumeTimes, StoreTimestamp: m.StoreTimestamp, Body: m.Body})
			}
		}
	}
	if a.opts.output == "json" {
		return a.print(out, "", nil)
	}
	rows := make([][]string, 0, len(out))
	for _, d := range out {
		body := d.Body
		if len(body) > 40 {
			body = body[:40] + "…"
		}
		rows = append(rows, []string{d.Broker, strconv.Itoa(int(d.QueueID)), i64(d.QueueOffset), d.MsgID, d.OffsetMsgID, d.Topic,
			strconv.Itoa(int(d.ReconsumeTimes)), fmtMs(d.StoreTimestamp), strconv.Quote(body)})
	}
	if err := a.print(nil, "BROKER\tQUEUE\tOFFSET\tMSG ID\tOFFSET MSG ID\tTOPIC\tRECONSUMES\tSTORED\tBODY", rows); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "%d dead letter(s) in %s\n", len(out), topic)
	return nil
}

// resendReport is dlq resend's answer.
type resendReport struct {
	Group   string         `json:"group"`
	Resent  []resentLetter `json:"resent"`
	Skipped []resentLetter `json:"skipped"` // resent before; --again resends them
	// NotFound names the brokers of the dead-letter topic that do not
	// hold the dead letter asked for (--msg-id).
	NotFound []string `json:"notFound,omitempty"`
}

type resentLetter struct {
	Broker string `json:"broker"`
	clientadmin.ResentLetter
}

func (a *adm) resendDLQ(ctx context.Context, group, msgID string, again bool) error {
	topic := protocol.DLQTopic(group)
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return err
	}
	if !ok {
		if err := a.mustGroup(ctx, group); err != nil {
			return err
		}
		return fmt.Errorf("no dead letters for group %s (%s does not exist)", group, topic)
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	rep := resendReport{Group: group, Resent: []resentLetter{}, Skipped: []resentLetter{}}
	for _, bq := range brokers {
		res, err := lib.ResendDLQ(ctx, bq.addr, clientadmin.ResendSpec{Group: group, MsgID: msgID, Again: again})
		var be *client.BrokerError
		switch {
		case errors.Is(err, clientadmin.ErrMessageNotFound):
			rep.NotFound = append(rep.NotFound, bq.name)
			continue
		case errors.As(err, &be):
			return fmt.Errorf("resend on %s: code %d %s", bq.name, be.Code, be.Remark)
		case err != nil:
			return err
		}
		for _, r := range res.Resent {
			rep.Resent = append(rep.Resent, resentLetter{bq.name, r})
		}
		for _, r := range res.Skipped {
			rep.Skipped = append(rep.Skipped, resentLetter{bq.name, r})
		}
	}
	if msgID != "" && len(rep.Resent) == 0 {
		if len(rep.Skipped) > 0 {
			return fmt.Errorf("dead letter %s of group %s was resent before (marked %s); resend it again with --again", msgID, group, retry.PropertyResentFromDLQ)
		}
		return fmt.Errorf("no dead letter %s in %s", msgID, topic)
	}
	if a.opts.output == "json" {
		return a.print(rep, "", nil)
	}
	rows := make([][]string, 0, len(rep.Resent))
	for _, r := range rep.Resent {
		rows = append(rows, []string{r.Broker, r.MsgID, r.OffsetMsgID, r.Topic, r.NewOffset})
	}
	if err := a.print(nil, "BROKER\tMSG ID\tDEAD LETTER\tTOPIC\tNEW OFFSET MSG ID", rows); err != nil {
		return err
	}
	if len(rep.NotFound) > 0 {
		fmt.Fprintf(a.w, "dead letter %s not found on broker(s) %s\n", msgID, strings.Join(rep.NotFound, ", "))
	}
	fmt.Fprintf(a.w, "%d dead letter(s) resent to %s", len(rep.Resent), protocol.RetryTopic(group))
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(a.w, "; %d resent before and skipped (--again resends them)", len(rep.Skipped))
	}
	fmt.Fprintln(a.w)
	return nil
}

// resetQueue is one queue's offset after a reset.
type resetQueue struct {
	Broker  string `json:"brokerName"`
	QueueID int    `json:"queueId"`
	Topic   string `json:"topic"`
	Offset  int64  `json:"offset"`
}

func (a *adm) resetOffset(ctx context.Context, group, topic string, ts int64, force bool) error {
	out, told, err := a.resetQueues(ctx, group, topic, ts, force)
	if err != nil {
		return err
	}
	when := "the end of each queue"
	if ts >= 0 {
		when = time.UnixMilli(ts).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	if a.opts.output == "json" {
		return a.print(map[string]any{"group": group, "topic": topic, "timestamp": ts, "force": force, "queues": out, "consumersNotified": told}, "", nil)
	}
	rows := make([][]string, 0, len(out))
	for _, q := range out {
		rows = append(rows, []string{q.Broker, strconv.Itoa(q.QueueID), i64(q.Offset)})
	}
	if err := a.print(nil, "BROKER\tQUEUE\tOFFSET", rows); err != nil {
		return err
	}
	fmt.Fprintf(a.w, "group %s on %s reset to %s; %d online consumer(s) told\n", group, topic, when, told)
	return nil
}

// resetOffsetJava is resetOffsetByTime's text, as mqadmin prints it.
func (a *adm) resetOffsetJava(ctx context.Context, f *resetFlags, ts int64) error {
	out, _, err := a.resetQueues(ctx, f.group, f.topic, ts, f.force)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.w, "start reset consumer offset by specified, group[%s], topic[%s], force[%t], timestamp(string)[%s], timestamp(long)[%d]\n",
		f.group, f.topic, f.force, f.ts, ts)
	javaRow(a.w, "%-40s  %-40s  %-40s", "#brokerName", "#queueId", "#offset")
	for _, q := range out {
		javaRow(a.w, "%-40s  %-40d  %-40d", frontAtLeast(q.Broker, 32), q.QueueID, q.Offset)
	}
	return nil
}

// resetQueues resets group's offsets on topic on every broker serving it
// and returns the queues' new offsets and the consumers told.
func (a *adm) resetQueues(ctx context.Context, group, topic string, ts int64, force bool) ([]resetQueue, int, error) {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("topic %s does not exist", topic)
	}
	lib, err := a.library()
	if err != nil {
		return nil, 0, err
	}
	out := []resetQueue{}
	told := 0
	for _, bq := range brokers {
		offs, n, err := lib.ResetOffsetOn(ctx, bq.addr, group, topic, ts, force)
		var be *client.BrokerError
		if errors.As(err, &be) {
			return nil, 0, fmt.Errorf("reset on %s: code %d %s", bq.name, be.Code, be.Remark)
		}
		if err != nil {
			return nil, 0, err
		}
		for mq, off := range offs {
			out = append(out, resetQueue{Broker: mq.BrokerName, QueueID: int(mq.QueueID), Topic: mq.Topic, Offset: off})
		}
		told += n
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Broker != out[j].Broker {
			return out[i].Broker < out[j].Broker
		}
		return out[i].QueueID < out[j].QueueID
	})
	return out, told, nil
}
