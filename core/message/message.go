// Package message holds Quiver's message model and its RocketMQ 4.x encodings:
// the properties string, the stored/transferred record layout (the bytes a
// consumer decodes from a pull body), the client batch layout, offsetMsgId
// and tag hash codes.
package message

import (
	"net/netip"
	"strconv"
)

// Well-known property names (Java MessageConst).
const (
	PropertyKeys                    = "KEYS"
	PropertyTags                    = "TAGS"
	PropertyWaitStoreMsgOK          = "WAIT"
	PropertyDelayTimeLevel          = "DELAY"
	PropertyRetryTopic              = "RETRY_TOPIC"
	PropertyRealTopic               = "REAL_TOPIC"
	PropertyRealQueueID             = "REAL_QID"
	PropertyTransactionPrepared     = "TRAN_MSG"
	PropertyProducerGroup           = "PGROUP"
	PropertyMinOffset               = "MIN_OFFSET"
	PropertyMaxOffset               = "MAX_OFFSET"
	PropertyOriginMessageID         = "ORIGIN_MESSAGE_ID"
	PropertyUniqKey                 = "UNIQ_KEY"
	PropertyMaxReconsumeTimes       = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTime        = "CONSUME_START_TIME"
	PropertyTranPreparedQueueOffset = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionCheckTimes   = "TRANSACTION_CHECK_TIMES"
	PropertyCheckImmunityTime       = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyShardingKey             = "SHARDING_KEY"
	PropertyCluster                 = "CLUSTER"
	PropertyMsgRegion               = "MSG_REGION"
	PropertyTraceSwitch             = "TRACE_ON"
	PropertyStartDeliverTime        = "__STARTDELIVERTIME"
	PropertyTimerDeliverMS          = "TIMER_DELIVER_MS"
	PropertyTimerDelayMS            = "TIMER_DELAY_MS"
	// The timer wheel's own (RocketMQ 5's TimerMessageStore): the due
	// time of a held message, and when it entered and left the wheel,
	// all kept on the delivered message.
	PropertyTimerOut      = "TIMER_OUT_MS"
	PropertyTimerEnqueue  = "TIMER_ENQUEUE_MS"
	PropertyTimerDequeue  = "TIMER_DEQUEUE_MS"
	PropertyReconsumeTime = "RECONSUME_TIME"
	// PropertyPriority is a priority message's level (RocketMQ 5.4,
	// RIP-80: MessageConst.PROPERTY_PRIORITY), a decimal integer >= 0,
	// higher first; see Priority.
	PropertyPriority = "_SYS_MSG_PRIORITY_"
)

// System flag bits (Java MessageSysFlag).
const (
	FlagCompressed        int32 = 0x1
	FlagMultiTags         int32 = 0x2
	TransactionNotType    int32 = 0x0
	TransactionPrepared   int32 = 0x4
	TransactionCommit     int32 = 0x8
	TransactionRollback   int32 = 0xC
	TransactionMask       int32 = 0xC
	FlagBornHostV6        int32 = 0x10
	FlagStoreHostV6       int32 = 0x20
	FlagCompressionMask   int32 = 0x700
	MagicCode             int32 = -626843481 // 0xDAA320A7
	BlankMagicCode        int32 = -875286124 // 0xCBD43194
	MaxPropertiesLength         = 32767
	MaxTopicLength              = 127
	DefaultMaxMessageSize       = 4 << 20
)

// Message is what a producer sends: a topic, user flag, properties and body.
type Message struct {
	Topic      string
	Flag       int32
	Properties Properties
	Body       []byte
}

// Tags returns the TAGS property.
func (m *Message) Tags() string { return m.Properties[PropertyTags] }

// Keys returns the KEYS property.
func (m *Message) Keys() string { return m.Properties[PropertyKeys] }

// Ext is a message as stored by the broker and transferred to consumers.
type Ext struct {
	Message
	QueueID                   int32
	StoreSize                 int32
	QueueOffset               int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	CommitLogOffset           int64
	BodyCRC                   uint32
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
}

// MsgID returns the offsetMsgId of a stored message.
func (m *Ext) MsgID() string { return OffsetMsgID(m.StoreHost, m.CommitLogOffset) }

// UniqKey returns the client-assigned message id, falling back to the offsetMsgId.
func (m *Ext) UniqKey() string {
	if k := m.Properties[PropertyUniqKey]; k != "" {
		return k
	}
	return m.MsgID()
}

// DelayLevel returns the DELAY property as an int (0 if absent or invalid).
func (m *Message) DelayLevel() int {
	v, ok := m.Properties[PropertyDelayTimeLevel]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}
