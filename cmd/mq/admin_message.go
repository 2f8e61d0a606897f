package main

// mq admin message …: get by msgId or offsetMsgId, query by key, send,
// consume; and
// mq admin acl sign.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// messageView is a message as the message commands print it.
type messageView struct {
	Topic          string            `json:"topic"`
	Broker         string            `json:"brokerName,omitempty"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Tags           string            `json:"tags,omitempty"`
	Keys           string            `json:"keys,omitempty"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"`
}

func viewOf(m *message.Ext, broker string) messageView {
	body, err := m.UncompressedBody()
	if err != nil {
		body = m.Body
	}
	props := map[string]string{}
	for k, v := range m.Properties {
		props[k] = v
	}
	return messageView{Topic: m.Topic, Broker: broker, QueueID: m.QueueID, QueueOffset: m.QueueOffset, MsgID: m.UniqKey(), OffsetMsgID: m.MsgID(),
		Tags: m.Tags(), Keys: m.Keys(), BornTimestamp: m.BornTimestamp, StoreTimestamp: m.StoreTimestamp,
		BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String(), ReconsumeTimes: m.ReconsumeTimes, Properties: props, Body: string(body)}
}

func (a *adm) printMessages(msgs []messageView) error {
	if msgs == nil {
		msgs = []messageView{}
	}
	var rows [][]string
	for _, m := range msgs {
		body := m.Body
		if len(body) > 60 {
			body = body[:60] + "…"
		}
		rows = append(rows, []string{m.Topic, m.Broker, strconv.Itoa(int(m.QueueID)), i64(m.QueueOffset), m.MsgID, m.OffsetMsgID, m.Tags, m.Keys, fmtMs(m.StoreTimestamp), strconv.Quote(body)})
	}
	return a.print(msgs, "TOPIC\tBROKER\tQUEUE\tOFFSET\tMSG ID\tOFFSET MSG ID\tTAGS\tKEYS\tSTORED\tBODY", rows)
}

// printMessage prints one message in full: every property and the body.
func (a *adm) printMessage(m messageView) error {
	if a.opts.output == "json" {
		return a.print(m, "", nil)
	}
	rows := [][]string{
		{"Topic", m.Topic}, {"Queue", strconv.Itoa(int(m.QueueID))}, {"Queue offset", i64(m.QueueOffset)},
		{"Msg ID", m.MsgID}, {"Offset msg ID", m.OffsetMsgID}, {"Tags", m.Tags}, {"Keys", m.Keys},
		{"Born", fmtMs(m.BornTimestamp) + " from " + m.BornHost}, {"Stored", fmtMs(m.StoreTimestamp) + " on " + m.StoreHost},
		{"Reconsume times", strconv.Itoa(int(m.ReconsumeTimes))},
	}
	for _, k := range sortedKeys(m.Properties) {
		rows = append(rows, []string{"Property " + k, m.Properties[k]})
	}
	rows = append(rows, []string{"Body", m.Body})
	return a.print(nil, "FIELD\tVALUE", rows)
}

func messageCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "message", Short: "Look up, send and consume messages"}

	var id, idTopic string
	get := &cobra.Command{
		Use: "get", Short: "A message by its msgId or offsetMsgId (VIEW_MESSAGE_BY_ID on a registered broker, else QUERY_MESSAGE by unique key)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.getMessage(ctx, id, idTopic) }),
	}
	get.Flags().StringVar(&id, "id", "", "msgId (SendResult.MsgID, the UNIQ_KEY) or offsetMsgId (required)")
	get.Flags().StringVar(&idTopic, "topic", "", "look a msgId up in this topic only (default: every topic of the cluster)")
	_ = get.MarkFlagRequired("id")

	var topic, key, begin, end string
	var maxNum int
	query := &cobra.Command{
		Use: "query", Short: "Messages of a topic by key or UNIQ_KEY within a time range (QUERY_MESSAGE)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.queryCmd(ctx, topic, key, begin, end, maxNum) }),
	}
	query.Flags().StringVar(&topic, "topic", "", "topic (required)")
	query.Flags().StringVar(&key, "key", "", "message key or msgId (UNIQ_KEY) (required)")
	query.Flags().StringVar(&begin, "begin", "0", "earliest store time: RFC 3339, -1h style, epoch ms")
	query.Flags().StringVar(&end, "end", "", "latest store time (default now)")
	query.Flags().IntVar(&maxNum, "max", 32, "at most this many per broker")
	for _, f := range []string{"topic", "key"} {
		_ = query.MarkFlagRequired(f)
	}

	sf := &sendFlags{}
	send := &cobra.Command{
		Use: "send", Short: "Send one message (SEND_MESSAGE): to --broker/--queue, by --sharding-key, or the first writable queue", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.sendCmd(ctx, sf) }),
	}
	sf.bind(send, false)

	cf := &msgConsumeFlags{}
	consume := &cobra.Command{
		Use: "consume", Short: "Read messages of a topic (PULL_MESSAGE, nothing committed): every queue or --broker/--queue, from an offset or a time, to --end, filtered by --tag or --sql", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.consumeCmd(ctx, cf) }),
	}
	cf.bind(consume, false)

	cmd.AddCommand(get, query, send, consume, recallCmd(run), traceCmd(run))
	return cmd
}

func (a *adm) getMessage(ctx context.Context, id, topic string) error {
	found, err := a.messagesByID(ctx, id, topic)
	if err != nil {
		return err
	}
	if len(found) > 1 && a.opts.output == "json" {
		// The first in full, the others (the table's second list) in more.
		return a.print(struct {
			messageView
			More []messageView `json:"more"`
		}{found[0], found[1:]}, "", nil)
	}
	if err := a.printMessage(found[0]); err != nil {
		return err
	}
	if len(found) > 1 {
		fmt.Fprintf(a.w, "\n%d more message(s) carry this id:\n", len(found)-1)
		return a.printMessages(found[1:])
	}
	return nil
}

func (a *adm) queryCmd(ctx context.Context, topic, key, begin, end string, maxNum int) error {
	now := time.Now()
	b, err := parseAdminTime(begin, now)
	if err != nil {
		return usageError{err}
	}
	e := now.UnixMilli()
	if end != "" {
		if e, err = parseAdminTime(end, now); err != nil {
			return usageError{err}
		}
	}
	if _, ok, err := a.route(ctx, topic); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	out, err := a.queryMessages(ctx, topic, key, b, e, maxNum)
	if err != nil {
		return err
	}
	return a.printMessages(out)
}

// messageAtOffset prints the message at one queue offset of a broker.
func (a *adm) messageAtOffset(ctx context.Context, topic, broker string, queue int, offset int64) error {
	out, err := a.readFiltered(ctx, readSpec{topic: topic, offset: offset, limit: 1, broker: broker, queue: queue, exprType: "TAG", expr: "*"})
	if err != nil {
		return err
	}
	if len(out) == 0 || out[0].QueueOffset != offset {
		return fmt.Errorf("no message at offset %d of %s queue %d on %s", offset, topic, queue, broker)
	}
	return a.printMessage(out[0])
}

// messagesByID finds the messages an id names (client/admin's
// ViewMessage: an offsetMsgId only on a registered broker, else the id as
// a unique key), first the one the command shows.
func (a *adm) messagesByID(ctx context.Context, id, topic string) ([]messageView, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	found, err := lib.ViewMessage(ctx, id, topic)
	if err != nil {
		return nil, err
	}
	out := make([]messageView, 0, len(found))
	for _, f := range found {
		out = append(out, viewOf(f.Message, f.BrokerName))
	}
	return out, nil
}

// pullFrom reads up to n messages of one queue from off, without
// committing anything.
func (a *adm) pullFrom(ctx context.Context, bq brokerQueues, q int32, topic string, off int64, n int) ([]messageView, error) {
	return a.pullFiltered(ctx, bq, q, topic, off, n, "TAG", "*")
}

// pullFiltered is pullFrom with a subscription (TAG or SQL92) the broker
// filters by. A refusal ends the read with what was read so far.
func (a *adm) pullFiltered(ctx context.Context, bq brokerQueues, q int32, topic string, off int64, n int, exprType, expr string) ([]messageView, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	var out []messageView
	for len(out) < n {
		res, err := lib.Pull(ctx, bq.addr, clientadmin.PullRequest{Topic: topic, QueueID: int(q), Offset: off,
			MaxNums: min(n-len(out), 32), ExpressionType: exprType, Expression: expr})
		if clientadmin.IsRefused(err) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		next := res.NextBeginOffset
		switch res.Status {
		case clientadmin.PullFound:
		case clientadmin.PullNoMatchedMsg:
			if next <= off {
				return out, nil
			}
			off = next
			continue
		default:
			return out, nil
		}
		msgs, err := res.Messages()
		if err != nil {
			return nil, fmt.Errorf("decode pull from %s: %w", bq.addr, err)
		}
		for _, m := range msgs {
			if len(out) < n {
				out = append(out, viewOf(m, bq.name))
			}
		}
		if next <= off || len(msgs) == 0 {
			break
		}
		off = next
	}
	return out, nil
}

// minOffset is a queue's first stored offset; a refusal reads as
// "<addr>: code <n> <remark>".
func (a *adm) minOffset(ctx context.Context, addr, topic string, q int) (int64, error) {
	lib, err := a.library()
	if err != nil {
		return 0, err
	}
	off, err := lib.MinOffset(ctx, addr, topic, q)
	return off, codeErr(err)
}

func aclCmd(o *adminOpts, run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "ACL helpers"}
	var bodyFile string
	sign := &cobra.Command{
		Use:   "sign [key=value ...]",
		Short: "Print the RocketMQ ACL signature of a request's fields (and body) for --access-key/--secret-key",
		RunE: func(c *cobra.Command, args []string) error {
			if o.accessKey == "" || o.secretKey == "" {
				return fmt.Errorf("give --access-key and --secret-key")
			}
			ext := map[string]string{}
			for _, kv := range args {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("%q: want key=value", kv)
				}
				ext[k] = v
			}
			var body []byte
			if bodyFile != "" {
				var err error
				if body, err = os.ReadFile(bodyFile); err != nil {
					return err
				}
			}
			acl.Sign(ext, body, o.accessKey, o.secretKey, "")
			a := &adm{opts: o, w: c.OutOrStdout()}
			if o.output == "json" {
				return a.print(ext, "", nil)
			}
			var rows [][]string
			for _, k := range sortedKeys(ext) {
				rows = append(rows, []string{k, ext[k]})
			}
			return a.print(nil, "FIELD\tVALUE", rows)
		},
	}
	sign.Flags().StringVar(&bodyFile, "body-file", "", "file holding the request body")
	cmd.AddCommand(append([]*cobra.Command{sign, aclWhitelistCmd(run)}, aclAdminCmds(run)...)...) // admin_acl.go, admin_aclops.go
	return cmd
}

// queryMessages finds a topic's messages by key on every broker of its
// route (QUERY_MESSAGE), oldest first.
func (a *adm) queryMessages(ctx context.Context, topic, key string, b, e int64, maxNum int) ([]messageView, error) {
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
	var out []messageView
	for _, bq := range brokers {
		msgs, err := lib.QueryMessage(ctx, bq.addr, clientadmin.Query{Topic: topic, Key: key, MaxNum: maxNum, Begin: b, End: e})
		var be *client.BrokerError
		switch {
		case errors.Is(err, clientadmin.ErrMessageNotFound):
			continue
		case errors.As(err, &be):
			return nil, fmt.Errorf("query on %s: code %d %s", bq.name, be.Code, be.Remark)
		case err != nil:
			return nil, err
		}
		for _, m := range msgs {
			if m.Topic == topic {
				out = append(out, viewOf(m, bq.name))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StoreTimestamp < out[j].StoreTimestamp })
	return out, nil
}

// readMessages reads up to limit messages of every queue of topic, from
// offset (clamped to each queue's minimum) or from the first message
// stored at or after ts (epoch ms) when byTime. Nothing is committed.
// msgConsumeFlags are message consume's (and consumeMessage's) settings.
type msgConsumeFlags struct {
	topic, from, at, end, broker, tag, sql, group string
	offset                                        int64
	queue, limit                                  int
}

func (f *msgConsumeFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	if short { // mqadmin consumeMessage
		fs.StringVarP(&f.topic, "topic", "t", "", "topic (required)")
		fs.StringVarP(&f.broker, "broker", "b", "", "only this broker (name or address)")
		fs.IntVarP(&f.queue, "queue", "i", -1, "only this queue id")
		fs.Int64VarP(&f.offset, "offset", "o", 0, "first queue offset")
		fs.StringVarP(&f.at, "begin", "s", "", "first store time (RFC 3339, -1h, epoch ms); reads by time when given")
		fs.StringVarP(&f.end, "end", "e", "", "last store time")
		fs.IntVarP(&f.limit, "count", "c", 128, "stop after this many messages")
		fs.StringVarP(&f.group, "group", "g", "", "accepted for mqadmin compatibility; nothing is committed")
		f.from = ""
	} else {
		fs.StringVar(&f.topic, "topic", "", "topic (required)")
		fs.StringVar(&f.from, "from", "offset", "offset | time")
		fs.Int64Var(&f.offset, "offset", 0, "with --from offset: first queue offset (clamped to each queue's minimum)")
		fs.StringVar(&f.at, "timestamp", "-1h", "with --from time: RFC 3339, -1h style or epoch ms")
		fs.StringVar(&f.end, "end", "", "stop at messages stored after this time")
		fs.IntVar(&f.limit, "max", 100, "stop after this many messages")
		fs.StringVar(&f.broker, "broker", "", "only this broker (name or address)")
		fs.IntVar(&f.queue, "queue", -1, "only this queue id")
	}
	fs.StringVar(&f.tag, "tag", "", "only messages with these tags (TagA || TagB)")
	fs.StringVar(&f.sql, "sql", "", "only messages matching this SQL92 expression (the broker must enable SQL92 filtering)")
	_ = c.MarkFlagRequired("topic")
}

func (a *adm) consumeCmd(ctx context.Context, f *msgConsumeFlags) error {
	now := time.Now()
	r := readSpec{topic: f.topic, offset: f.offset, limit: f.limit, broker: f.broker, queue: f.queue, exprType: "TAG", expr: "*"}
	switch f.from {
	case "offset":
	case "time":
		r.byTime = true
	case "": // mqadmin: by time when -s is given
		r.byTime = f.at != ""
	default:
		return usagef("--from %q: want offset or time", f.from)
	}
	if r.byTime {
		ts, err := parseAdminTime(f.at, now)
		if err != nil {
			return usageError{err}
		}
		r.ts = ts
	}
	if f.end != "" {
		ts, err := parseAdminTime(f.end, now)
		if err != nil {
			return usageError{err}
		}
		r.end = ts
	}
	switch {
	case f.tag != "" && f.sql != "":
		return usagef("give --tag or --sql, not both")
	case f.tag != "":
		r.expr = f.tag
	case f.sql != "":
		r.exprType, r.expr = "SQL92", f.sql
	}
	if f.limit <= 0 {
		return usagef("the message count must be positive")
	}
	out, err := a.readFiltered(ctx, r)
	if err != nil {
		return err
	}
	return a.printMessages(out)
}

// readSpec says which messages message consume reads.
type readSpec struct {
	topic          string
	byTime         bool
	offset, ts     int64
	end            int64 // store time limit (ms), 0 none
	limit          int
	broker         string // only this broker (name or address)
	queue          int    // only this queue, -1 every
	exprType, expr string // TAG * by default
}

func (a *adm) readMessages(ctx context.Context, topic string, byTime bool, offset, ts int64, limit int) ([]messageView, error) {
	return a.readFiltered(ctx, readSpec{topic: topic, byTime: byTime, offset: offset, ts: ts, limit: limit, queue: -1, exprType: "TAG", expr: "*"})
}

func (a *adm) readFiltered(ctx context.Context, r readSpec) ([]messageView, error) {
	brokers, ok, err := a.route(ctx, r.topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("topic %s does not exist", r.topic)
	}
	out := []messageView{}
	matched := false
	for _, bq := range brokers {
		if r.broker != "" && r.broker != bq.name && r.broker != bq.addr {
			continue
		}
		matched = true
		if r.queue >= int(bq.readQueues) {
			return nil, fmt.Errorf("topic %s has no queue %d on %s (%d read queues)", r.topic, r.queue, bq.name, bq.readQueues)
		}
		for q := int32(0); q < bq.readQueues && len(out) < r.limit; q++ {
			if r.queue >= 0 && int(q) != r.queue {
				continue
			}
			start, err := a.minOffset(ctx, bq.addr, r.topic, int(q))
			if err != nil {
				return nil, err
			}
			if !r.byTime {
				start = max(start, r.offset)
			} else {
				lib, err := a.library()
				if err != nil {
					return nil, err
				}
				if start, err = lib.SearchOffset(ctx, bq.addr, r.topic, int(q), r.ts); err != nil {
					return nil, codeErr(err)
				}
			}
			msgs, err := a.pullFiltered(ctx, bq, q, r.topic, start, r.limit-len(out), r.exprType, r.expr)
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				if r.end > 0 && m.StoreTimestamp > r.end {
					break
				}
				out = append(out, m)
			}
		}
	}
	if !matched {
		return nil, fmt.Errorf("topic %s is not served by broker %s", r.topic, r.broker)
	}
	return out, nil
}

// sendFlags are message send's (and sendMessage's) settings.
type sendFlags struct {
	topic, body, tags, keys, group, broker, sharding string
	queue                                            int
	props                                            []string
}

func (f *sendFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	if short {
		fs.StringVarP(&f.topic, "topic", "t", "", "topic (required)")
		fs.StringVarP(&f.body, "body", "p", "", "message body")
		fs.StringVarP(&f.keys, "keys", "k", "", "keys (space separated)")
		fs.StringVarP(&f.tags, "tags", "c", "", "tag")
		fs.StringVarP(&f.broker, "broker", "b", "", "send to this broker (name or address)")
		fs.IntVarP(&f.queue, "queue", "i", -1, "send to this queue id (with --broker)")
	} else {
		fs.StringVar(&f.topic, "topic", "", "topic (required)")
		fs.StringVar(&f.body, "body", "", "message body")
		fs.StringVar(&f.keys, "keys", "", "keys (space separated)")
		fs.StringVar(&f.tags, "tags", "", "tag")
		fs.StringVar(&f.broker, "broker", "", "send to this broker (name or address)")
		fs.IntVar(&f.queue, "queue", -1, "send to this queue id (default: the first writable queue, or --sharding-key's)")
	}
	fs.StringVar(&f.group, "group", "TOOLS_PRODUCER", "producer group")
	fs.StringVar(&f.sharding, "sharding-key", "", "choose the queue by this key's hash (orderly sends of one key land on one queue)")
	fs.StringArrayVar(&f.props, "property", nil, "user property key=value (repeatable)")
	_ = c.MarkFlagRequired("topic")
}

// sendSpec is one message to send; queue -1 lets the tool choose.
type sendSpec struct {
	topic, body, tags, keys, group, broker, sharding string
	queue                                            int
	props                                            message.Properties
}

// sendResult is a send's answer.
type sendResult struct {
	Topic       string `json:"topic"`
	Broker      string `json:"broker"`
	QueueID     int32  `json:"queueId"`
	QueueOffset string `json:"queueOffset"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
	// RecallHandle is set for a timer message the broker holds
	// (`message recall` takes it).
	RecallHandle string `json:"recallHandle,omitempty"`
}

func (a *adm) sendCmd(ctx context.Context, f *sendFlags) error {
	p := message.Properties{}
	for _, kv := range f.props {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--property %q: want key=value", kv)
		}
		p[k] = v
	}
	if f.sharding != "" && f.queue >= 0 {
		return usagef("give --queue or --sharding-key, not both")
	}
	res, err := a.sendOne(ctx, sendSpec{topic: f.topic, body: f.body, tags: f.tags, keys: f.keys, group: f.group, broker: f.broker, sharding: f.sharding, queue: f.queue, props: p})
	if err != nil {
		return err
	}
	v := map[string]any{"topic": res.Topic, "queueId": res.QueueID, "queueOffset": res.QueueOffset, "msgId": res.MsgID, "offsetMsgId": res.OffsetMsgID, "broker": res.Broker}
	header := "TOPIC\tBROKER\tQUEUE\tOFFSET\tMSG ID\tOFFSET MSG ID"
	row := []string{res.Topic, res.Broker, strconv.Itoa(int(res.QueueID)), res.QueueOffset, res.MsgID, res.OffsetMsgID}
	if res.RecallHandle != "" { // a timer message held: admin_recall.go
		v["recallHandle"] = res.RecallHandle
		header += "\tRECALL HANDLE"
		row = append(row, res.RecallHandle)
	}
	return a.print(v, header, [][]string{row})
}

// sendOne sends one message to the queue s names.
func (a *adm) sendOne(ctx context.Context, s sendSpec) (*sendResult, error) {
	q, err := a.chooseQueue(ctx, s)
	if err != nil {
		return nil, err
	}
	p := message.Properties{message.PropertyUniqKey: client.NewUniqID(), "WAIT": "true"}
	for k, v := range s.props {
		p[k] = v
	}
	if s.tags != "" {
		p[message.PropertyTags] = s.tags
	}
	if s.keys != "" {
		p[message.PropertyKeys] = s.keys
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	ans, err := lib.SendDirect(ctx, q.addr, clientadmin.SendRequest{Group: s.group, Topic: s.topic, QueueID: int(q.id), Properties: p, Body: []byte(s.body)})
	if err != nil {
		return nil, codeErr(err)
	}
	return &sendResult{Topic: s.topic, Broker: q.addr, QueueID: q.id, QueueOffset: i64(ans.QueueOffset), MsgID: p[message.PropertyUniqKey], OffsetMsgID: ans.OffsetMsgID,
		RecallHandle: ans.RecallHandle}, nil
}

// chooseQueue picks the queue of a send: the one given, the sharding
// key's, or the first writable one.
func (a *adm) chooseQueue(ctx context.Context, s sendSpec) (benchQueue, error) {
	if s.broker == "" && s.queue < 0 && s.sharding == "" {
		return a.writeQueue(ctx, s.topic)
	}
	rd, err := a.mustRoute(ctx, s.topic)
	if err != nil {
		return benchQueue{}, err
	}
	addrs := map[string]string{}
	for _, bd := range rd.BrokerDatas {
		addrs[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
	}
	sort.Slice(rd.QueueDatas, func(i, j int) bool { return rd.QueueDatas[i].BrokerName < rd.QueueDatas[j].BrokerName })
	var all []benchQueue
	for _, qd := range rd.QueueDatas {
		addr := addrs[qd.BrokerName]
		if addr == "" || qd.Perm&protocol.PermWrite == 0 || (s.broker != "" && s.broker != qd.BrokerName && s.broker != addr) {
			continue
		}
		for i := int32(0); i < qd.WriteQueueNums; i++ {
			all = append(all, benchQueue{addr: addr, id: i})
		}
	}
	if len(all) == 0 {
		return benchQueue{}, fmt.Errorf("topic %s has no writable queue on %s", s.topic, orAny(s.broker))
	}
	switch {
	case s.queue >= 0:
		for _, q := range all {
			if int(q.id) == s.queue {
				return q, nil
			}
		}
		return benchQueue{}, fmt.Errorf("topic %s has no writable queue %d on %s", s.topic, s.queue, orAny(s.broker))
	case s.sharding != "":
		// As the Java client's SelectMessageQueueByHash.
		v := javaStringHash(s.sharding) % int32(len(all))
		if v < 0 {
			v = -v
		}
		return all[v], nil
	}
	return all[0], nil
}

func orAny(broker string) string {
	if broker == "" {
		return "any broker"
	}
	return broker
}

// javaStringHash is Java's String.hashCode.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r > 0xFFFF {
			r1, r2 := utf16Pair(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// writeQueue is the first writable queue of topic, or of TBW102 (the
// broker then creates the topic) when the topic has no route.
func (a *adm) writeQueue(ctx context.Context, topic string) (benchQueue, error) {
	for _, t := range []string{topic, protocol.AutoCreateTopic} {
		rd, ok, err := a.routeData(ctx, t)
		if err != nil {
			return benchQueue{}, err
		}
		if !ok {
			continue
		}
		addrs := map[string]string{}
		for _, bd := range rd.BrokerDatas {
			addrs[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
		}
		sort.Slice(rd.QueueDatas, func(i, j int) bool { return rd.QueueDatas[i].BrokerName < rd.QueueDatas[j].BrokerName })
		for _, qd := range rd.QueueDatas {
			if addr := addrs[qd.BrokerName]; addr != "" && qd.WriteQueueNums > 0 && qd.Perm&protocol.PermWrite != 0 {
				return benchQueue{addr: addr, id: 0}, nil
			}
		}
	}
	return benchQueue{}, fmt.Errorf("topic %s has no writable queue and TBW102 is not served", topic)
}
