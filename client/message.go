package client

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
)

// Message is what a producer sends. Properties holds user and system
// properties alike; use the setters for the system ones.
type Message struct {
	Topic      string
	Body       []byte
	Flag       int32
	Properties map[string]string
}

// NewMessage returns a message for topic.
func NewMessage(topic string, body []byte) *Message {
	return &Message{Topic: topic, Body: body, Properties: map[string]string{}}
}

func (m *Message) set(k, v string) *Message {
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	if v == "" {
		delete(m.Properties, k)
	} else {
		m.Properties[k] = v
	}
	return m
}

// Property returns a property.
func (m *Message) Property(k string) string { return m.Properties[k] }

// SetProperty sets a user property; an empty value removes it.
func (m *Message) SetProperty(k, v string) *Message { return m.set(k, v) }

// SetTag sets the TAGS property used by tag subscriptions.
func (m *Message) SetTag(tag string) *Message { return m.set(message.PropertyTags, tag) }

// Tag returns the TAGS property.
func (m *Message) Tag() string { return m.Properties[message.PropertyTags] }

// SetKeys sets the KEYS property (space-separated business keys).
func (m *Message) SetKeys(keys ...string) *Message {
	return m.set(message.PropertyKeys, strings.Join(keys, " "))
}

// Keys returns the KEYS property split on spaces.
func (m *Message) Keys() []string { return strings.Fields(m.Properties[message.PropertyKeys]) }

// SetDelayLevel sets the DELAY property (1..18: 1s 5s 10s 30s 1m ... 2h).
func (m *Message) SetDelayLevel(level int) *Message {
	if level <= 0 {
		return m.set(message.PropertyDelayTimeLevel, "")
	}
	return m.set(message.PropertyDelayTimeLevel, strconv.Itoa(level))
}

// SetDeliverTime asks for delivery at t: it sets __STARTDELIVERTIME and
// TIMER_DELIVER_MS (epoch milliseconds), which schedulers that support
// arbitrary delivery times read. The zero time clears both.
func (m *Message) SetDeliverTime(t time.Time) *Message {
	if t.IsZero() {
		m.set(message.PropertyStartDeliverTime, "")
		return m.set(message.PropertyTimerDeliverMS, "")
	}
	ms := strconv.FormatInt(t.UnixMilli(), 10)
	m.set(message.PropertyStartDeliverTime, ms)
	return m.set(message.PropertyTimerDeliverMS, ms)
}

// SetShardingKey sets SHARDING_KEY, which the hash queue selector uses to
// keep messages of one key on one queue (ordered sends).
func (m *Message) SetShardingKey(k string) *Message { return m.set(message.PropertyShardingKey, k) }

// ShardingKey returns SHARDING_KEY.
func (m *Message) ShardingKey() string { return m.Properties[message.PropertyShardingKey] }

// MessageQueue names one queue of a topic on a broker.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

func (q MessageQueue) String() string {
	return fmt.Sprintf("%s@%s:%d", q.Topic, q.BrokerName, q.QueueID)
}

// Proto converts to the protocol type.
func (q MessageQueue) Proto() protocol.MessageQueue {
	return protocol.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(q.QueueID)}
}

// MessageExt is a message as a consumer receives it.
type MessageExt struct {
	Message
	// MsgID is the UNIQ_KEY the producer assigned (or OffsetMsgID).
	MsgID string
	// OffsetMsgID is the broker's id: store host and commit-log offset.
	OffsetMsgID     string
	Queue           MessageQueue
	QueueOffset     int64
	CommitLogOffset int64
	SysFlag         int32
	ReconsumeTimes  int32
	BornTimestamp   time.Time
	StoreTimestamp  time.Time
	BornHost        string
	StoreHost       string
	StoreSize       int32
}

// DecodeMessages decodes a pull (or check) body. Compressed bodies are
// inflated; a retry-topic message gets its original topic back from
// RETRY_TOPIC, as the official client does. Bodies alias body. The
// messages of one call share one allocation, their topic string and the
// strings of repeated hosts.
func DecodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	n := 0
	for b := body; len(b) >= 4; n++ {
		sz := int(binary.BigEndian.Uint32(b))
		if sz <= 0 || sz > len(b) {
			n++
			break
		}
		b = b[sz:]
	}
	all := make([]MessageExt, n)
	out := make([]*MessageExt, 0, n)
	var d extDecoder
	var e message.Ext
	for len(body) > 0 {
		k, err := message.DecodeStoredInto(body, &e, d.topic, nil)
		if err != nil {
			return nil, fmt.Errorf("client: decode messages: %w", err)
		}
		body = body[k:]
		d.topic = e.Topic
		var m *MessageExt
		if len(out) < len(all) {
			m = &all[len(out)]
		} else {
			m = new(MessageExt)
		}
		d.fill(m, &e, brokerName)
		out = append(out, m)
	}
	return out, nil
}

// DecodeEach calls fn with each message of a pull body, in order, without
// keeping any: the *MessageExt passed, its Properties map and its Body
// (which aliases body) are reused or recycled once fn returns, so fn must
// copy what it keeps. It is DecodeMessages for a caller that handles a
// message at once (consumer.PullEach), without an allocation per message
// beyond its properties and ids. fn returning false stops the walk.
func DecodeEach(body []byte, brokerName string, fn func(*MessageExt) bool) error {
	s := eachScratch.Get().(*eachState)
	defer eachScratch.Put(s)
	s.d = extDecoder{}
	for len(body) > 0 {
		k, err := message.DecodeStoredInto(body, &s.e, s.d.topic, s.props)
		if err != nil {
			return fmt.Errorf("client: decode messages: %w", err)
		}
		body = body[k:]
		s.d.topic = s.e.Topic
		s.d.fill(&s.m, &s.e, brokerName)
		if !fn(&s.m) {
			break
		}
	}
	s.e, s.m = message.Ext{}, MessageExt{}
	clear(s.props)
	return nil
}

// eachState is DecodeEach's reusable message.
type eachState struct {
	d     extDecoder
	e     message.Ext
	m     MessageExt
	props message.Properties
}

var eachScratch = sync.Pool{New: func() any { return &eachState{props: message.Properties{}} }}

// extDecoder keeps the strings the records of one pull repeat.
type extDecoder struct {
	topic       string
	born, store hostString
}

// hostString is the last address formatted, and its text.
type hostString struct {
	ap netip.AddrPort
	s  string
}

func (h *hostString) of(ap netip.AddrPort) string {
	if h.s == "" || ap != h.ap {
		h.ap, h.s = ap, ap.String()
	}
	return h.s
}

// FromExt converts a decoded record.
func FromExt(e *message.Ext, brokerName string) *MessageExt {
	var d extDecoder
	m := new(MessageExt)
	d.fill(m, e, brokerName)
	return m
}

// fill sets m from the decoded record e.
func (d *extDecoder) fill(m *MessageExt, e *message.Ext, brokerName string) {
	b, err := e.UncompressedBody()
	if err != nil {
		b = e.Body
	}
	props := map[string]string(e.Properties)
	if props == nil {
		props = map[string]string{}
	}
	*m = MessageExt{
		Message:         Message{Topic: e.Topic, Body: b, Flag: e.Flag, Properties: props},
		OffsetMsgID:     e.MsgID(),
		Queue:           MessageQueue{Topic: e.Topic, BrokerName: brokerName, QueueID: int(e.QueueID)},
		QueueOffset:     e.QueueOffset,
		CommitLogOffset: e.CommitLogOffset,
		SysFlag:         e.SysFlag,
		ReconsumeTimes:  e.ReconsumeTimes,
		BornTimestamp:   time.UnixMilli(e.BornTimestamp),
		StoreTimestamp:  time.UnixMilli(e.StoreTimestamp),
		BornHost:        d.born.of(e.BornHost),
		StoreHost:       d.store.of(e.StoreHost),
		StoreSize:       e.StoreSize,
	}
	m.MsgID = props[message.PropertyUniqKey]
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	if rt := props[message.PropertyRetryTopic]; rt != "" && protocol.IsRetryTopic(e.Topic) {
		m.Topic = rt
	}
}

// SendStatus is the outcome of a successful send.
type SendStatus int

// Send statuses (the broker stored the message in every case).
const (
	SendOK SendStatus = iota
	SendFlushDiskTimeout
	SendFlushSlaveTimeout
	SendSlaveNotAvailable
)

func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "UNKNOWN"
}

// SendResult describes a stored message (or batch).
type SendResult struct {
	Status SendStatus
	// MsgID is the UNIQ_KEY (empty for batches, as with the official client).
	MsgID string
	// OffsetMsgID is the broker's id; comma-separated for a batch.
	OffsetMsgID   string
	Queue         MessageQueue
	QueueOffset   int64
	TransactionID string
	RegionID      string
	// RecallHandle is set for a timer message (SetDeliverTime) the broker
	// holds: Producer.Recall takes it back before its time (RocketMQ
	// 5.3's SendResult.recallHandle). Empty otherwise.
	RecallHandle string
}

func (r *SendResult) String() string {
	return fmt.Sprintf("SendResult[%s msgId=%s offsetMsgId=%s queue=%s offset=%d]", r.Status, r.MsgID, r.OffsetMsgID, r.Queue, r.QueueOffset)
}
