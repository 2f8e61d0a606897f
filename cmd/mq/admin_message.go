package main

// mq admin message …: get by msgId or offsetMsgId, query by key, send,
// consume; and
// mq admin acl sign.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
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
		RunE: run(func(ctx context.Context, a *adm) error {
			found, err := a.messagesByID(ctx, id, idTopic)
			if err != nil {
				return err
			}
			if err := a.printMessage(found[0]); err != nil {
				return err
			}
			if len(found) > 1 && a.opts.output != "json" {
				fmt.Fprintf(a.w, "\n%d more message(s) carry this id:\n", len(found)-1)
				return a.printMessages(found[1:])
			}
			return nil
		}),
	}
	get.Flags().StringVar(&id, "id", "", "msgId (SendResult.MsgID, the UNIQ_KEY) or offsetMsgId (required)")
	get.Flags().StringVar(&idTopic, "topic", "", "look a msgId up in this topic only (default: every topic of the cluster)")
	_ = get.MarkFlagRequired("id")

	var topic, key, begin, end string
	var maxNum int
	query := &cobra.Command{
		Use: "query", Short: "Messages of a topic by key or UNIQ_KEY within a time range (QUERY_MESSAGE)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			now := time.Now()
			b, err := parseAdminTime(begin, now)
			if err != nil {
				return err
			}
			e := now.UnixMilli()
			if end != "" {
				if e, err = parseAdminTime(end, now); err != nil {
					return err
				}
			}
			out, err := a.queryMessages(ctx, topic, key, b, e, maxNum)
			if err != nil {
				return err
			}
			return a.printMessages(out)
		}),
	}
	query.Flags().StringVar(&topic, "topic", "", "topic (required)")
	query.Flags().StringVar(&key, "key", "", "message key or msgId (UNIQ_KEY) (required)")
	query.Flags().StringVar(&begin, "begin", "0", "earliest store time: RFC 3339, -1h style, epoch ms")
	query.Flags().StringVar(&end, "end", "", "latest store time (default now)")
	query.Flags().IntVar(&maxNum, "max", 32, "at most this many per broker")
	for _, f := range []string{"topic", "key"} {
		_ = query.MarkFlagRequired(f)
	}

	var body, tags, keys, group string
	var props []string
	send := &cobra.Command{
		Use: "send", Short: "Send one message (SEND_MESSAGE) to the first writable queue of the topic", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			q, err := a.writeQueue(ctx, topic)
			if err != nil {
				return err
			}
			p := message.Properties{message.PropertyUniqKey: client.NewUniqID(), "WAIT": "true"}
			if tags != "" {
				p[message.PropertyTags] = tags
			}
			if keys != "" {
				p[message.PropertyKeys] = keys
			}
			for _, kv := range props {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--property %q: want key=value", kv)
				}
				p[k] = v
			}
			ext := map[string]string{
				"producerGroup": group, "topic": topic, "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
				"queueId": strconv.Itoa(int(q.id)), "sysFlag": "0", "bornTimestamp": i64(time.Now().UnixMilli()), "flag": "0",
				"properties": p.Encode(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
			}
			resp, err := a.callOK(ctx, q.addr, remoting.SendMessage, ext, []byte(body))
			if err != nil {
				return err
			}
			res := map[string]any{"topic": topic, "queueId": q.id, "queueOffset": resp.Ext("queueOffset"), "msgId": p[message.PropertyUniqKey], "offsetMsgId": resp.Ext("msgId"), "broker": q.addr}
			return a.print(res, "TOPIC\tBROKER\tQUEUE\tOFFSET\tMSG ID\tOFFSET MSG ID",
				[][]string{{topic, q.addr, strconv.Itoa(int(q.id)), resp.Ext("queueOffset"), p[message.PropertyUniqKey], resp.Ext("msgId")}})
		}),
	}
	send.Flags().StringVar(&topic, "topic", "", "topic (required)")
	send.Flags().StringVar(&body, "body", "", "message body")
	send.Flags().StringVar(&tags, "tags", "", "tag")
	send.Flags().StringVar(&keys, "keys", "", "keys (space separated)")
	send.Flags().StringVar(&group, "group", "TOOLS_PRODUCER", "producer group")
	send.Flags().StringArrayVar(&props, "property", nil, "user property key=value (repeatable)")
	_ = send.MarkFlagRequired("topic")

	var from, at string
	var offset int64
	var limit int
	consume := &cobra.Command{
		Use: "consume", Short: "Read messages from every queue of a topic (PULL_MESSAGE, nothing committed)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			var ts int64
			switch from {
			case "offset":
			case "time":
				var err error
				if ts, err = parseAdminTime(at, time.Now()); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--from %q: want offset or time", from)
			}
			out, err := a.readMessages(ctx, topic, from == "time", offset, ts, limit)
			if err != nil {
				return err
			}
			return a.printMessages(out)
		}),
	}
	consume.Flags().StringVar(&topic, "topic", "", "topic (required)")
	consume.Flags().StringVar(&from, "from", "offset", "offset | time")
	consume.Flags().Int64Var(&offset, "offset", 0, "with --from offset: first queue offset (clamped to each queue's minimum)")
	consume.Flags().StringVar(&at, "timestamp", "-1h", "with --from time: RFC 3339, -1h style or epoch ms")
	consume.Flags().IntVar(&limit, "max", 100, "stop after this many messages")
	_ = consume.MarkFlagRequired("topic")

	cmd.AddCommand(get, query, send, consume)
	return cmd
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
	var out []messageView
	for len(out) < n {
		resp, err := a.call(ctx, bq.addr, remoting.PullMessage, map[string]string{
			"consumerGroup": "TOOLS_CONSUMER", "topic": topic, "queueId": strconv.Itoa(int(q)),
			"queueOffset": i64(off), "maxMsgNums": strconv.Itoa(min(n-len(out), 32)), "sysFlag": "4",
			"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil)
		if err != nil {
			return nil, err
		}
		next, perr := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
		switch resp.Code {
		case remoting.Success:
		case remoting.PullRetryImmediately:
			if perr != nil || next <= off {
				return out, nil
			}
			off = next
			continue
		default:
			return out, nil
		}
		msgs, err := message.DecodeAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("decode pull from %s: %w", bq.addr, err)
		}
		for _, m := range msgs {
			if len(out) < n {
				out = append(out, viewOf(m, bq.name))
			}
		}
		if perr != nil || next <= off || len(msgs) == 0 {
			break
		}
		off = next
	}
	return out, nil
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
	cmd.AddCommand(sign, aclWhitelistCmd(run)) // admin_acl.go
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
	var out []messageView
	for _, bq := range brokers {
		resp, err := a.call(ctx, bq.addr, remoting.QueryMessage, map[string]string{
			"topic": topic, "key": key, "maxNum": strconv.Itoa(maxNum), "beginTimestamp": i64(b), "endTimestamp": i64(e),
		}, nil)
		if err != nil {
			return nil, err
		}
		if resp.Code == remoting.QueryNotFound {
			continue
		}
		if resp.Code != remoting.Success {
			return nil, fmt.Errorf("query on %s: code %d %s", bq.name, resp.Code, resp.Remark)
		}
		msgs, err := message.DecodeAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("decode query answer of %s: %w", bq.name, err)
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
func (a *adm) readMessages(ctx context.Context, topic string, byTime bool, offset, ts int64, limit int) ([]messageView, error) {
	brokers, ok, err := a.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	var out []messageView
	for _, bq := range brokers {
		for q := int32(0); q < bq.readQueues && len(out) < limit; q++ {
			qext := map[string]string{"topic": topic, "queueId": strconv.Itoa(int(q))}
			resp, err := a.callOK(ctx, bq.addr, remoting.GetMinOffset, qext, nil)
			if err != nil {
				return nil, err
			}
			start, _ := strconv.ParseInt(resp.Ext("offset"), 10, 64)
			if !byTime {
				start = max(start, offset)
			} else {
				qext["timestamp"] = i64(ts)
				resp, err := a.callOK(ctx, bq.addr, remoting.SearchOffsetByTimestamp, qext, nil)
				if err != nil {
					return nil, err
				}
				start, _ = strconv.ParseInt(resp.Ext("offset"), 10, 64)
			}
			msgs, err := a.pullFrom(ctx, bq, q, topic, start, limit-len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
		}
	}
	return out, nil
}

// writeQueue is the first writable queue of topic, or of TBW102 (the
// broker then creates the topic) when the topic has no route.
func (a *adm) writeQueue(ctx context.Context, topic string) (benchQueue, error) {
	for _, t := range []string{topic, protocol.AutoCreateTopic} {
		resp, err := a.call(ctx, a.namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": t}, nil)
		if err != nil {
			return benchQueue{}, fmt.Errorf("route of %s: %w", t, err)
		}
		if resp.Code == remoting.TopicNotExist {
			continue
		}
		if resp.Code != remoting.Success {
			return benchQueue{}, fmt.Errorf("route of %s: code %d %s", t, resp.Code, resp.Remark)
		}
		var rd protocol.TopicRouteData
		if err := json.Unmarshal(resp.Body, &rd); err != nil {
			return benchQueue{}, fmt.Errorf("route of %s: %w", t, err)
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
