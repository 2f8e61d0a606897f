// Package trace writes and reads RocketMQ message traces (RIP-6): the
// records a client sends to the trace topic for each send (Pub) and each
// consume (SubBefore, SubAfter), and those Java writes for transactions
// (EndTransaction) and recalls (Recall), in the text format of Java's
// TraceDataEncoder and the official Go client: fields separated by
// ContentSeparator (\x01), records ended by FieldSeparator (\x02), many
// records to one trace message keyed by the message ids they describe.
package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type is a record's kind (Java's TraceType).
type Type string

// Record kinds.
const (
	Pub            Type = "Pub"
	SubBefore      Type = "SubBefore"
	SubAfter       Type = "SubAfter"
	EndTransaction Type = "EndTransaction"
	Recall         Type = "Recall"
)

// Separators of the trace text (Java's TraceConstants).
const (
	ContentSeparator = '\x01'
	FieldSeparator   = '\x02'
)

// DefaultTopic is the trace topic the clients and tools use unless told
// otherwise (TopicValidator.RMQ_SYS_TRACE_TOPIC).
const DefaultTopic = "RMQ_SYS_TRACE_TOPIC"

// ProducerGroup is the group trace messages are sent with
// (TraceConstants.GROUP_NAME_PREFIX).
const ProducerGroup = "_INNER_TRACE_PRODUCER"

// MessageType is Java's MessageType, written as its ordinal.
type MessageType int

// Message types.
const (
	NormalMsg MessageType = iota
	TransMsgHalf
	TransMsgCommit
	DelayMsg
	OrderMsg
)

var messageTypeNames = [...]string{"Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg"}

func (t MessageType) String() string {
	if t >= 0 && int(t) < len(messageTypeNames) {
		return messageTypeNames[t]
	}
	return "MessageType(" + strconv.Itoa(int(t)) + ")"
}

// Consume outcomes of a SubAfter record (Java's ConsumeReturnType
// ordinals, its context code).
const (
	ConsumeSuccess   = 0
	ConsumeTimeout   = 1
	ConsumeException = 2
	ConsumeNull      = 3
	ConsumeFailed    = 4
)

// Bean is one message a record describes (Java's TraceBean).
type Bean struct {
	Topic       string
	MsgID       string
	OffsetMsgID string
	Tags        string
	Keys        string
	StoreHost   string
	ClientHost  string
	StoreTime   int64
	RetryTimes  int
	BodyLength  int
	MsgType     MessageType
	// EndTransaction only.
	TransactionID        string
	TransactionState     string
	FromTransactionCheck bool
}

// Context is one traced event (Java's TraceContext): a send, the start
// or end of a consume, a transaction's end or a recall.
type Context struct {
	Type Type
	// TimeStamp is when it happened, in Unix milliseconds.
	TimeStamp   int64
	RegionID    string
	GroupName   string
	CostTime    int64 // milliseconds
	Success     bool
	RequestID   string
	ContextCode int
	Beans       []Bean
}

// Encode writes c as trace text, one record per bean (Pub,
// EndTransaction and Recall describe their first bean only), in the
// official Go client's layout, which Java's decoder reads: Pub ends with
// the client host, SubBefore too, SubAfter with the time and group. keys
// are the trace message's KEYS: every bean's message id and keys.
func (c *Context) Encode() (data string, keys []string) {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(s)
		b.WriteByte(ContentSeparator)
	}
	end := func(s string) {
		b.WriteString(s)
		b.WriteByte(FieldSeparator)
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch c.Type {
	case Pub:
		if len(c.Beans) == 0 {
			break
		}
		bn := c.Beans[0]
		field(string(c.Type))
		field(i64(c.TimeStamp))
		field(c.RegionID)
		field(c.GroupName)
		field(bn.Topic)
		field(bn.MsgID)
		field(bn.Tags)
		field(bn.Keys)
		field(bn.StoreHost)
		field(strconv.Itoa(bn.BodyLength))
		field(i64(c.CostTime))
		field(strconv.Itoa(int(bn.MsgType)))
		field(bn.OffsetMsgID)
		field(strconv.FormatBool(c.Success))
		end(bn.ClientHost)
	case SubBefore:
		for _, bn := range c.Beans {
			field(string(c.Type))
			field(i64(c.TimeStamp))
			field(c.RegionID)
			field(c.GroupName)
			field(c.RequestID)
			field(bn.MsgID)
			field(strconv.Itoa(bn.RetryTimes))
			field(nullWrap(bn.Keys))
			end(bn.ClientHost)
		}
	case SubAfter:
		for _, bn := range c.Beans {
			field(string(c.Type))
			field(c.RequestID)
			field(bn.MsgID)
			field(i64(c.CostTime))
			field(strconv.FormatBool(c.Success))
			field(nullWrap(bn.Keys))
			field(strconv.Itoa(c.ContextCode))
			field(i64(c.TimeStamp))
			end(c.GroupName)
		}
	case EndTransaction:
		if len(c.Beans) == 0 {
			break
		}
		bn := c.Beans[0]
		field(string(c.Type))
		field(i64(c.TimeStamp))
		field(c.RegionID)
		field(c.GroupName)
		field(bn.Topic)
		field(bn.MsgID)
		field(bn.Tags)
		field(bn.Keys)
		field(bn.StoreHost)
		field(strconv.Itoa(int(bn.MsgType)))
		field(bn.TransactionID)
		field(bn.TransactionState)
		end(strconv.FormatBool(bn.FromTransactionCheck))
	case Recall:
		if len(c.Beans) == 0 {
			break
		}
		bn := c.Beans[0]
		field(string(c.Type))
		field(i64(c.TimeStamp))
		field(c.RegionID)
		field(c.GroupName)
		field(bn.Topic)
		field(bn.MsgID)
		end(strconv.FormatBool(c.Success))
	}
	for _, bn := range c.Beans {
		keys = append(keys, bn.MsgID)
		keys = append(keys, strings.Fields(bn.Keys)...)
	}
	return b.String(), keys
}

// nullWrap writes an empty value as Java's null.
func nullWrap(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

// javaSplit is Java's String.split on one character: trailing empty
// strings are dropped, and an input without the character is one field.
func javaSplit(s string, sep byte) []string {
	if s == "" {
		return []string{""}
	}
	parts := strings.Split(s, string(sep))
	n := len(parts)
	for n > 0 && parts[n-1] == "" {
		n--
	}
	return parts[:n]
}

// RecordError reports a record Decode could not read.
type RecordError struct {
	Index  int // the record's position in the trace text
	Record string
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("trace: record %d %q: %v", e.Index, e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// ErrShortRecord is wrapped by a RecordError for a record with fewer
// fields than its type has.
var ErrShortRecord = errors.New("too few fields")

// Decode reads trace text as Java's TraceDataEncoder does: one context
// per record, Pub, EndTransaction and Recall with their bean; records of
// other types are skipped. A record Java would fail on (missing fields,
// a number that is not one, an unknown message type or transaction
// state) is left out and reported in the error, a join of
// *RecordError; the others are returned all the same.
func Decode(data string) ([]Context, error) {
	var out []Context
	var errs []error
	if data == "" {
		return nil, nil
	}
	for i, rec := range javaSplit(data, FieldSeparator) {
		line := javaSplit(rec, ContentSeparator)
		c, ok, err := decodeRecord(line)
		if err != nil {
			errs = append(errs, &RecordError{Index: i, Record: rec, Err: err})
			continue
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, errors.Join(errs...)
}

// fields reads a record's fields by index, remembering the first
// failure.
type fields struct {
	line []string
	err  error
}

func (f *fields) need(n int) bool {
	if len(f.line) < n && f.err == nil {
		f.err = fmt.Errorf("%w: %d of %d", ErrShortRecord, len(f.line), n)
	}
	return f.err == nil
}

func (f *fields) s(i int) string {
	if i < len(f.line) {
		return f.line[i]
	}
	return ""
}

func (f *fields) i64(i int) int64 {
	n, err := strconv.ParseInt(f.s(i), 10, 64)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("field %d: %w", i, err)
	}
	return n
}

func (f *fields) i32(i int) int {
	n, err := strconv.ParseInt(f.s(i), 10, 32)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("field %d: %w", i, err)
	}
	return int(n)
}

// bool is Java's Boolean.parseBoolean: "true" in any case, else false.
func (f *fields) bool(i int) bool { return strings.EqualFold(f.s(i), "true") }

func (f *fields) msgType(i int) MessageType {
	n := f.i32(i)
	if (n < 0 || n >= len(messageTypeNames)) && f.err == nil {
		f.err = fmt.Errorf("field %d: message type %d out of range", i, n)
	}
	return MessageType(n)
}

// transactionStates are Java's LocalTransactionState names.
var transactionStates = map[string]bool{"COMMIT_MESSAGE": true, "ROLLBACK_MESSAGE": true, "UNKNOW": true}

func decodeRecord(line []string) (Context, bool, error) {
	f := &fields{line: line}
	if len(line) == 0 {
		return Context{}, false, nil
	}
	var c Context
	switch Type(line[0]) {
	case Pub:
		if !f.need(12) {
			return c, false, f.err
		}
		c = Context{Type: Pub, TimeStamp: f.i64(1), RegionID: f.s(2), GroupName: f.s(3)}
		bn := Bean{Topic: f.s(4), MsgID: f.s(5), Tags: f.s(6), Keys: f.s(7), StoreHost: f.s(8), BodyLength: f.i32(9)}
		c.CostTime = int64(f.i32(10))
		bn.MsgType = f.msgType(11)
		switch {
		case len(line) == 13:
			c.Success = f.bool(12)
		case len(line) >= 14:
			bn.OffsetMsgID = f.s(12)
			c.Success = f.bool(13)
			bn.ClientHost = f.s(14)
		}
		c.Beans = []Bean{bn}
	case SubBefore:
		if !f.need(8) {
			return c, false, f.err
		}
		c = Context{Type: SubBefore, TimeStamp: f.i64(1), RegionID: f.s(2), GroupName: f.s(3), RequestID: f.s(4)}
		c.Beans = []Bean{{MsgID: f.s(5), RetryTimes: f.i32(6), Keys: f.s(7), ClientHost: f.s(8)}}
	case SubAfter:
		if !f.need(6) {
			return c, false, f.err
		}
		c = Context{Type: SubAfter, RequestID: f.s(1), CostTime: int64(f.i32(3)), Success: f.bool(4)}
		c.Beans = []Bean{{MsgID: f.s(2), Keys: f.s(5)}}
		if len(line) >= 7 {
			c.ContextCode = f.i32(6)
		}
		if len(line) >= 9 {
			c.TimeStamp = f.i64(7)
			c.GroupName = f.s(8)
		}
	case EndTransaction:
		if !f.need(13) {
			return c, false, f.err
		}
		c = Context{Type: EndTransaction, TimeStamp: f.i64(1), RegionID: f.s(2), GroupName: f.s(3)}
		bn := Bean{Topic: f.s(4), MsgID: f.s(5), Tags: f.s(6), Keys: f.s(7), StoreHost: f.s(8), MsgType: f.msgType(9),
			TransactionID: f.s(10), TransactionState: f.s(11), FromTransactionCheck: f.bool(12)}
		if !transactionStates[bn.TransactionState] && f.err == nil {
			f.err = fmt.Errorf("field 11: unknown transaction state %q", bn.TransactionState)
		}
		c.Beans = []Bean{bn}
	case Recall:
		if !f.need(7) {
			return c, false, f.err
		}
		c = Context{Type: Recall, TimeStamp: f.i64(1), RegionID: f.s(2), GroupName: f.s(3), Success: f.bool(6)}
		c.Beans = []Bean{{Topic: f.s(4), MsgID: f.s(5)}}
	default:
		return c, false, nil
	}
	if f.err != nil {
		return Context{}, false, f.err
	}
	return c, true, nil
}
