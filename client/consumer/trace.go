package consumer

import (
	"strings"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/core/message"
)

// WithTrace writes trace records for every batch a push consumer's
// handler gets, as the official clients' consume trace hooks do: a
// SubBefore (one record per message: its msgId, reconsume count and keys)
// when the handler is called and a SubAfter (the time taken and the
// outcome: ConsumeSuccess, ConsumeRetryLater as FAILED, a panic as
// EXCEPTION) when it returns. Messages whose TRACE_ON property is false
// are left out. Records go through d in the background (a full buffer
// drops them, counted by d.Stats); d outlives the consumer and is closed
// by its owner.
func WithTrace(d *trace.Dispatcher) Option { return func(o *options) { o.trace = d } }

// traceBefore records the start of a consume and returns what
// traceAfter needs, or nil when nothing is traced.
func (pc *PushConsumer) traceBefore(msgs []*client.MessageExt) *trace.Context {
	d := pc.o.trace
	if d == nil {
		return nil
	}
	c := trace.Context{Type: trace.SubBefore, TimeStamp: time.Now().UnixMilli(), GroupName: pc.group,
		Success: true, RequestID: client.NewUniqID()}
	for _, m := range msgs {
		if m.Topic == d.Topic() || strings.EqualFold(m.Properties[message.PropertyTraceSwitch], "false") {
			continue
		}
		if r := m.Properties[message.PropertyMsgRegion]; r != "" {
			c.RegionID = r
		}
		c.Beans = append(c.Beans, trace.Bean{
			Topic: m.Topic, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Tags: m.Tag(),
			Keys: strings.Join(m.Keys(), " "), StoreTime: m.StoreTimestamp.UnixMilli(), BodyLength: int(m.StoreSize),
			RetryTimes: int(m.ReconsumeTimes), ClientHost: d.ClientHost(), StoreHost: m.StoreHost,
		})
	}
	if len(c.Beans) == 0 {
		return nil
	}
	d.Append(c)
	return &c
}

// traceAfter records the end of a consume begun with traceBefore.
func (pc *PushConsumer) traceAfter(before *trace.Context, r Result, panicked bool) {
	if before == nil {
		return
	}
	code := trace.ConsumeSuccess
	switch {
	case panicked:
		code = trace.ConsumeException
	case r != ConsumeSuccess:
		code = trace.ConsumeFailed
	}
	after := *before
	after.Type = trace.SubAfter
	after.CostTime = time.Since(time.UnixMilli(before.TimeStamp)).Milliseconds()
	after.TimeStamp = time.Now().UnixMilli()
	after.Success = code == trace.ConsumeSuccess
	after.ContextCode = code
	pc.o.trace.Append(after)
}
