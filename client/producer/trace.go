package producer

import (
	"context"
	"strings"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/core/message"
)

// WithTrace writes a Pub trace record for every message sent with
// SendSync, SendWithSelector or SendAsync (not SendOneway, which has no
// result, nor a batch sent as one, which has no msgId per message), as
// the official clients' trace hooks do: after the broker answered, with
// the message's ids, the broker address, the time taken and whether it
// was stored (SEND_OK). Records go through d in the background (a full
// buffer drops them, counted by d.Stats); d outlives the producer and is
// closed by its owner. Sends to d's own topic are not traced.
func WithTrace(d *trace.Dispatcher) Option { return func(o *options) { o.trace = d } }

// traced wraps an async send's callback with its trace record.
func (p *Producer) traced(msgs []*client.Message, cb func(context.Context, *client.SendResult, error)) func(context.Context, *client.SendResult, error) {
	if p.o.trace == nil || len(msgs) != 1 || msgs[0].Topic == p.o.trace.Topic() {
		return cb
	}
	m, start := msgs[0], time.Now()
	return func(ctx context.Context, res *client.SendResult, err error) {
		p.tracePub(m, res, start)
		cb(ctx, res, err)
	}
}

// tracePub records one send; a send that failed has no result and no
// record (as Java's SendMessageTraceHookImpl).
func (p *Producer) tracePub(m *client.Message, res *client.SendResult, start time.Time) {
	d := p.o.trace
	if d == nil || res == nil || m.Topic == d.Topic() {
		return
	}
	addr, _ := p.c.BrokerAddr(res.Queue.BrokerName)
	region := res.RegionID
	if region == "" {
		region = "DefaultRegion"
	}
	d.Append(trace.Context{
		Type: trace.Pub, TimeStamp: start.UnixMilli(), RegionID: region, GroupName: p.group,
		CostTime: time.Since(start).Milliseconds(), Success: res.Status == client.SendOK,
		Beans: []trace.Bean{{
			Topic: m.Topic, MsgID: res.MsgID, OffsetMsgID: res.OffsetMsgID, Tags: m.Tag(),
			Keys: strings.Join(m.Keys(), " "), StoreHost: addr, ClientHost: d.ClientHost(),
			BodyLength: len(m.Body), MsgType: pubType(m), StoreTime: start.UnixMilli(),
		}},
	})
}

// pubType is the message type Java's producer names in its trace.
func pubType(m *client.Message) trace.MessageType {
	props := m.Properties
	switch {
	case strings.EqualFold(props[message.PropertyTransactionPrepared], "true"):
		return trace.TransMsgHalf
	case props[message.PropertyDelayTimeLevel] != "" && props[message.PropertyDelayTimeLevel] != "0",
		props[message.PropertyTimerDeliverMS] != "", props[message.PropertyTimerDelayMS] != "", props[message.PropertyStartDeliverTime] != "":
		return trace.DelayMsg
	}
	return trace.NormalMsg
}

// javaTransactionState is Java's LocalTransactionState name, as an
// EndTransaction record writes it.
func javaTransactionState(st LocalTransactionState) string {
	switch st {
	case Commit:
		return "COMMIT_MESSAGE"
	case Rollback:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

// traceEnd records a transaction's end (END_TRANSACTION sent), as Java's
// EndTransactionTraceHookImpl: the half message's topic, tags, keys and
// ids, the broker, the state and whether a check-back decided it.
func (p *Producer) traceEnd(m *client.Message, msgID, txID, storeHost string, st LocalTransactionState, fromCheck bool) {
	d := p.o.trace
	if d == nil || m.Topic == d.Topic() {
		return
	}
	region := m.Properties[message.PropertyMsgRegion]
	if region == "" {
		region = "DefaultRegion"
	}
	d.Append(trace.Context{
		Type: trace.EndTransaction, TimeStamp: time.Now().UnixMilli(), RegionID: region, GroupName: p.group,
		Beans: []trace.Bean{{
			Topic: m.Topic, MsgID: msgID, Tags: m.Tag(), Keys: strings.Join(m.Keys(), " "), StoreHost: storeHost,
			ClientHost: d.ClientHost(), MsgType: trace.TransMsgCommit, TransactionID: txID,
			TransactionState: javaTransactionState(st), FromTransactionCheck: fromCheck,
		}},
	})
}
