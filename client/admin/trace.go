package admin

// Reading message traces, as Java's QueryMsgTraceByIdSubCommand and
// rocketmq-dashboard's message trace page do: the trace records of a
// message are the trace topic's messages keyed by its msgId
// (QUERY_MESSAGE by key on every broker of the trace topic), decoded
// with Java's TraceDataEncoder rules (client/trace), keeping the records
// about that message (TraceView.decodeFromTraceTransData).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// TraceRecord is one event of a message's trace (Java's TraceView, with
// every field its record holds).
type TraceRecord struct {
	// Type is Pub (sent), SubBefore (a consumer began), SubAfter (it
	// finished), EndTransaction or Recall.
	Type  trace.Type `json:"type"`
	MsgID string     `json:"msgId"`
	// Group is the producer group (Pub, EndTransaction, Recall) or the
	// consumer group (SubBefore, SubAfter).
	Group string `json:"group"`
	// ClientHost is the host of the client that wrote the record: the
	// trace message's born host, as Java's TraceView, else the record's.
	ClientHost string `json:"clientHost"`
	// Timestamp is when the event happened, in Unix milliseconds; 0 for
	// a SubAfter written without it (Java's cloud layout).
	Timestamp int64 `json:"timestamp"`
	// CostMs is how long the send or the consume took.
	CostMs int64 `json:"costTime"`
	// Success is the outcome: sent, consumed (ConsumeSuccess), recalled.
	// A SubBefore is always a success.
	Success bool `json:"success"`
	// Status is Java's wording of Success: success or failed.
	Status      string `json:"status"`
	Topic       string `json:"topic,omitempty"`
	Tags        string `json:"tags,omitempty"`
	Keys        string `json:"keys,omitempty"`
	StoreHost   string `json:"storeHost,omitempty"`
	OffsetMsgID string `json:"offsetMsgId,omitempty"`
	BodyLength  int    `json:"bodyLength,omitempty"`
	// MsgType is the message's kind (Pub, EndTransaction): Normal_Msg,
	// Trans_Msg_Half, Trans_msg_Commit, Delay_Msg or Order_Msg.
	MsgType   string `json:"msgType,omitempty"`
	RegionID  string `json:"regionId,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// RetryTimes is the delivery's reconsume count (SubBefore).
	RetryTimes int `json:"retryTimes"`
	// ContextCode is a SubAfter's ConsumeReturnType ordinal: 0 SUCCESS,
	// 1 TIME_OUT, 2 EXCEPTION, 3 RETURNNULL, 4 FAILED; Result names it.
	ContextCode          int    `json:"contextCode,omitempty"`
	Result               string `json:"result,omitempty"`
	TransactionID        string `json:"transactionId,omitempty"`
	TransactionState     string `json:"transactionState,omitempty"`
	FromTransactionCheck bool   `json:"fromTransactionCheck,omitempty"`
}

// TraceQuery selects the trace records QueryTraceBy reads.
type TraceQuery struct {
	// Topic is the trace topic (default RMQ_SYS_TRACE_TOPIC).
	Topic string
	// MsgID is the traced message's msgId (SendResult.MsgID, UNIQ_KEY).
	MsgID string
	// Begin and End bound the trace messages' store time, in Unix
	// milliseconds (default: all time).
	Begin, End int64
	// MaxNum bounds the trace messages read per broker (default 64, as
	// mqadmin's -c; the broker caps it by its defaultQueryMaxNum).
	MaxNum int
}

// QueryTrace returns the trace of the message msgID from trace topic
// topic ("" for RMQ_SYS_TRACE_TOPIC): its sends, consumes and outcomes,
// oldest first. A message without trace records gives none and no
// error; a trace topic the name servers do not know gives an error
// wrapping client.ErrNoRoute.
func (a *Admin) QueryTrace(ctx context.Context, topic, msgID string) ([]TraceRecord, error) {
	return a.QueryTraceBy(ctx, TraceQuery{Topic: topic, MsgID: msgID})
}

// QueryTraceBy is QueryTrace with a time range and a bound.
func (a *Admin) QueryTraceBy(ctx context.Context, q TraceQuery) ([]TraceRecord, error) {
	q.MsgID = strings.TrimSpace(q.MsgID)
	if q.Topic == "" {
		q.Topic = trace.DefaultTopic
	}
	if q.MaxNum <= 0 {
		q.MaxNum = 64
	}
	if q.End <= 0 {
		q.End = math.MaxInt64
	}
	if q.MsgID == "" || len(q.MsgID) > maxMessageIDLen {
		return nil, fmt.Errorf("%w: %q", ErrBadMessageID, q.MsgID)
	}
	route, err := a.c.FetchRoute(ctx, q.Topic)
	if err != nil {
		return nil, fmt.Errorf("admin: trace topic: %w", err)
	}
	var addrs []string
	for _, bd := range route.Data.BrokerDatas {
		if addr, ok := bd.BrokerAddrs[0]; ok {
			addrs = append(addrs, addr)
		}
	}
	results := make([][]*message.Ext, len(addrs))
	err = forEach(ctx, len(addrs), lookupParallelism, func(ctx context.Context, i int) error {
		msgs, err := a.QueryMessage(ctx, addrs[i], Query{Topic: q.Topic, Key: q.MsgID, MaxNum: q.MaxNum, Begin: q.Begin, End: q.End})
		if errors.Is(err, ErrMessageNotFound) || client.CodeOf(err) == remoting.TopicNotExist {
			return nil
		}
		results[i] = msgs
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []TraceRecord
	seen := map[string]bool{}
	for i, msgs := range results {
		for _, m := range msgs {
			// The index answers by hash: keep the trace topic's messages
			// keyed by the id (Java's MQAdminImpl.queryMessage).
			k := fmt.Sprintf("%s/%d", addrs[i], m.CommitLogOffset)
			if m.Topic != q.Topic || seen[k] || !slices.Contains(m.Properties.KeyList(), q.MsgID) {
				continue
			}
			seen[k] = true
			recs, err := traceRecords(q.MsgID, m)
			if err != nil {
				return out, fmt.Errorf("admin: trace message %s on %s: %w", m.MsgID(), addrs[i], err)
			}
			out = append(out, recs...)
		}
	}
	sortTrace(out)
	return out, nil
}

// traceRecords decodes one trace message and keeps the records about
// msgID. Records Java could not read either are skipped.
func traceRecords(msgID string, m *message.Ext) ([]TraceRecord, error) {
	body, err := m.UncompressedBody()
	if err != nil {
		return nil, err
	}
	ctxs, _ := trace.Decode(string(body))
	born := ""
	if m.BornHost.IsValid() {
		born = m.BornHost.Addr().Unmap().String()
	}
	var out []TraceRecord
	for _, c := range ctxs {
		b := c.Beans[0]
		if b.MsgID != msgID {
			continue
		}
		r := TraceRecord{Type: c.Type, MsgID: b.MsgID, Group: c.GroupName, ClientHost: born, Timestamp: c.TimeStamp,
			CostMs: c.CostTime, Success: c.Success, Status: "failed", Topic: b.Topic, Tags: b.Tags, Keys: b.Keys,
			StoreHost: b.StoreHost, OffsetMsgID: b.OffsetMsgID, BodyLength: b.BodyLength, RegionID: c.RegionID,
			RequestID: c.RequestID, RetryTimes: b.RetryTimes, ContextCode: c.ContextCode, TransactionID: b.TransactionID,
			TransactionState: b.TransactionState, FromTransactionCheck: b.FromTransactionCheck}
		if c.Type == trace.SubBefore {
			r.Success = true // Java's encoder never writes it; the Go client's true
		}
		if r.Success {
			r.Status = "success"
		}
		if r.ClientHost == "" {
			r.ClientHost = b.ClientHost
		}
		if c.Type == trace.SubAfter {
			r.Result = consumeResult(c.ContextCode)
		}
		if c.Type == trace.Pub || c.Type == trace.EndTransaction {
			r.MsgType = b.MsgType.String()
		}
		out = append(out, r)
	}
	return out, nil
}

// consumeResults name the ConsumeReturnType ordinals.
var consumeResults = [...]string{"SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED"}

func consumeResult(code int) string {
	if code >= 0 && code < len(consumeResults) {
		return consumeResults[code]
	}
	return "UNKNOWN"
}

// traceOrder puts a consume's start before its end when they share a
// millisecond.
var traceOrder = map[trace.Type]int{trace.Pub: 0, trace.EndTransaction: 1, trace.Recall: 2, trace.SubBefore: 3, trace.SubAfter: 4}

// sortTrace orders records by time, then by kind; a SubAfter without a
// time follows its SubBefore (same request id).
func sortTrace(rs []TraceRecord) {
	start := map[string]int64{}
	for _, r := range rs {
		if r.Type == trace.SubBefore {
			start[r.RequestID] = r.Timestamp
		}
	}
	at := func(r TraceRecord) int64 {
		if r.Timestamp == 0 && r.Type == trace.SubAfter {
			return start[r.RequestID]
		}
		return r.Timestamp
	}
	sort.SliceStable(rs, func(i, j int) bool {
		ti, tj := at(rs[i]), at(rs[j])
		if ti != tj {
			return ti < tj
		}
		return traceOrder[rs[i].Type] < traceOrder[rs[j].Type]
	})
}
