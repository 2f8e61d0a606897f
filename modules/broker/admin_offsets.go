package broker

// Offset tools: CLONE_GROUP_OFFSET (314), QUERY_CORRECTION_OFFSET (308),
// QUERY_CONSUME_TIME_SPAN (303) and GET_BROKER_CONSUME_STATS (317), with
// Java 4.9's headers and fastjson bodies (fields in alphabetical order,
// MessageQueue objects as map keys, integer map keys unquoted).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// cloneTopic copies src's committed offsets of topic to dst, replacing
// dst's (Java ConsumerOffsetManager.cloneOffset); it reports whether src
// had any.
func (o *offsetTable) cloneTopic(src, dst, topic string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	qs, ok := o.table[offsetKey(src, topic)]
	if !ok {
		return false
	}
	cp := make(map[int32]int64, len(qs))
	for q, off := range qs {
		cp[q] = off
	}
	o.table[offsetKey(dst, topic)] = cp
	o.dirty = true
	return true
}

// ofTopic returns every group's offsets of topic: group → queue → offset.
func (o *offsetTable) ofTopic(topic string) map[string]map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := map[string]map[int32]int64{}
	for k, qs := range o.table {
		t, g, _ := cutOffsetKey(k)
		if t != topic {
			continue
		}
		m := make(map[int32]int64, len(qs))
		for q, off := range qs {
			m[q] = off
		}
		out[g] = m
	}
	return out
}

// subscriptionCount is how many topics an online consumer group
// subscribes to (0 when it is offline).
func (t *clientTable) subscriptionCount(group string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if g, ok := t.consumers[group]; ok {
		return len(g.subs)
	}
	return 0
}

// skipUnsubscribed is Java's rule for reporting or copying a group's
// offsets of a topic: an online group that subscribes to other topics
// only is left out on this one.
func (b *Broker) skipUnsubscribed(group, topic string) bool {
	if _, ok := b.clients.subscriptionOf(group, topic); ok {
		return false
	}
	return b.clients.subscriptionCount(group) > 0
}

// javaBool reads a boolean header as Java's Boolean.parseBoolean does
// ("true" in any case; anything else is false).
func javaBool(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "true") }

func (b *Broker) handleCloneGroupOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	src, dst, topic := e.String("srcGroup"), e.String("destGroup"), e.OptString("topic")
	offline := javaBool(e.OptString("offline"))
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	topics := []string{topic}
	if strings.TrimSpace(topic) == "" {
		topics = b.offsets.topicsOfGroup(src)
	}
	var cloned []string
	for _, t := range topics {
		if _, ok := b.topics.get(t); !ok {
			b.log.Warn("clone group offset: topic config not exist", "topic", t)
			continue
		}
		if !offline && b.skipUnsubscribed(src, t) {
			b.log.Warn("clone group offset: the consumer group does not subscribe to the topic", "group", src, "topic", t)
			continue
		}
		// Java clones requestHeader.getTopic() here, so a clone of every
		// topic (no topic given) copies nothing; Quiver clones each topic.
		if b.offsets.cloneTopic(src, dst, t) {
			cloned = append(cloned, t)
		}
	}
	if len(cloned) > 0 {
		if err := b.offsets.flush(); err != nil {
			return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("persist consumer offsets: %v", err))
		}
		b.log.Info("group offsets cloned", "src", src, "dest", dst, "topics", cloned, "remote", p.RemoteAddr())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// correctionOffsets is Java's QUERY_CORRECTION_OFFSET: per queue of topic,
// the lowest committed offset among the groups not filtered out (offsets
// below the queue's minimum ignored), and math.MaxInt64 where compareGroup
// is behind that lowest offset.
func (b *Broker) correctionOffsets(topic, compareGroup string, filter []string) map[int32]int64 {
	all := b.offsets.ofTopic(topic)
	for _, g := range filter {
		delete(all, g)
	}
	out := map[int32]int64{}
	for _, qs := range all {
		for q, off := range qs {
			min, _, err := b.store.Offsets(store.Queue{Topic: topic, ID: q})
			if err != nil || off < min {
				continue
			}
			if cur, ok := out[q]; !ok || off < cur {
				out[q] = off
			}
		}
	}
	for q, off := range b.offsets.ofTopic(topic)[compareGroup] {
		// Java reads a missing queue as a NullPointerException; Quiver
		// leaves it out.
		if cur, ok := out[q]; ok && cur > off {
			out[q] = math.MaxInt64
		}
	}
	return out
}

func (b *Broker) handleQueryCorrectionOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, compare, filters := e.String("topic"), e.String("compareGroup"), e.OptString("filterGroups")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	var filter []string
	if strings.TrimSpace(filters) != "" {
		filter = strings.Split(filters, ",")
	}
	offs := b.correctionOffsets(topic, compare, filter)
	qs := make([]int32, 0, len(offs))
	for q := range offs {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i] < qs[j] })
	// fastjson writes Integer map keys unquoted.
	var sb strings.Builder
	sb.WriteString(`{"correctionOffsets":{`)
	for i, q := range qs {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%d:%d", q, offs[q])
	}
	sb.WriteString(`}}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}

// javaStoreTime is Java's getMessageStoreTimeStamp: the store time of the
// message at offset of q, -1 when there is none.
func (b *Broker) javaStoreTime(ctx context.Context, q store.Queue, offset int64) int64 {
	if t := b.storeTime(ctx, q, offset); t > 0 {
		return t
	}
	return -1
}

// javaTimeFormat is UtilAll.YYYY_MM_DD_HH_MM_SS_SSS.
const javaTimeFormat = "2006-01-02#15:04:05:000"

func javaTime(ms int64) string { return time.UnixMilli(ms).Format(javaTimeFormat) }

// QueueTimeSpan is one queue's row of QUERY_CONSUME_TIME_SPAN (Java
// QueueTimeSpan; fastjson also writes its *Str getters).
type QueueTimeSpan struct {
	ConsumeTimeStamp    int64        `json:"consumeTimeStamp"`
	ConsumeTimeStampStr string       `json:"consumeTimeStampStr"`
	DelayTime           int64        `json:"delayTime"`
	MaxTimeStamp        int64        `json:"maxTimeStamp"`
	MaxTimeStampStr     string       `json:"maxTimeStampStr"`
	MessageQueue        MessageQueue `json:"messageQueue"`
	MinTimeStamp        int64        `json:"minTimeStamp"`
	MinTimeStampStr     string       `json:"minTimeStampStr"`
}

// MessageQueue is Java's MessageQueue, fields in fastjson's order.
type MessageQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// ConsumeTimeSpan computes QUERY_CONSUME_TIME_SPAN's rows for group on
// topic, as Java does (times -1 where a queue has no message).
func (b *Broker) ConsumeTimeSpan(ctx context.Context, topic, group string) ([]QueueTimeSpan, bool) {
	tc, ok := b.topics.get(topic)
	if !ok {
		return nil, false
	}
	out := make([]QueueTimeSpan, 0, tc.WriteQueueNums)
	for i := int32(0); i < tc.WriteQueueNums; i++ {
		q := store.Queue{Topic: topic, ID: i}
		min, max, _ := b.store.Offsets(q)
		ts := QueueTimeSpan{MessageQueue: MessageQueue{BrokerName: b.cfg.Name, QueueID: i, Topic: topic}}
		ts.MinTimeStamp = b.javaStoreTime(ctx, q, min)
		ts.MaxTimeStamp = b.javaStoreTime(ctx, q, max-1)
		off, ok := b.offsets.query(group, topic, i)
		if !ok {
			off = -1
		}
		if off > 0 {
			ts.ConsumeTimeStamp = b.javaStoreTime(ctx, q, off-1)
		} else {
			ts.ConsumeTimeStamp = ts.MinTimeStamp
		}
		if off < max {
			ts.DelayTime = time.Now().UnixMilli() - b.javaStoreTime(ctx, q, off)
		}
		ts.MinTimeStampStr, ts.MaxTimeStampStr, ts.ConsumeTimeStampStr = javaTime(ts.MinTimeStamp), javaTime(ts.MaxTimeStamp), javaTime(ts.ConsumeTimeStamp)
		out = append(out, ts)
	}
	return out, true
}

func (b *Broker) handleQueryConsumeTimeSpan(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	topic, group := e.String("topic"), e.String("group")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	rows, ok := b.ConsumeTimeSpan(ctx, topic, group)
	if !ok {
		return remoting.Errorf(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist", topic))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(struct {
		ConsumeTimeSpanSet []QueueTimeSpan `json:"consumeTimeSpanSet"`
	}{rows})
	return resp
}

// handleBrokerConsumeStats answers GET_BROKER_CONSUME_STATS with Java's
// ConsumeStatsList: for every subscription group, a ConsumeStats per topic
// it has offsets on (only ordered topics with isOrder), the broker's
// address and the total lag.
func (b *Broker) handleBrokerConsumeStats(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	isOrder := javaBool(e.String("isOrder"))
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	var total int64
	var sb strings.Builder
	sb.WriteString(`{"brokerAddr":`)
	addr, _ := json.Marshal(b.cfg.AdvertiseAddr())
	sb.Write(addr)
	sb.WriteString(`,"consumeStatsList":[`)
	for gi, group := range b.groups.names() {
		if gi > 0 {
			sb.WriteByte(',')
		}
		gname, _ := json.Marshal(group)
		sb.WriteByte('{')
		sb.Write(gname)
		sb.WriteString(":[")
		n := 0
		for _, topic := range b.offsets.topicsOfGroup(group) {
			tc, ok := b.topics.get(topic)
			if !ok || (isOrder && !tc.Order) || b.skipUnsubscribed(group, topic) {
				continue
			}
			if n > 0 {
				sb.WriteByte(',')
			}
			n++
			// Java: the group's pull rate of the topic over the last minute.
			sb.WriteString(`{"consumeTps":` + javaDouble(b.groupGetTps(topic, group)) + `,"offsetTable":{`)
			for i := int32(0); i < tc.WriteQueueNums; i++ {
				q := store.Queue{Topic: topic, ID: i}
				_, brokerOff, err := b.store.Offsets(q)
				if err != nil || brokerOff < 0 {
					brokerOff = 0
				}
				off, ok := b.offsets.query(group, topic, i)
				if !ok || off < 0 {
					off = 0
				}
				var last int64
				if off > 0 {
					last = b.storeTime(ctx, q, off-1)
				}
				total += brokerOff - off
				if i > 0 {
					sb.WriteByte(',')
				}
				mqKey(&sb, topic, b.cfg.Name, i)
				fmt.Fprintf(&sb, `:{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":%d}`, brokerOff, off, last)
			}
			sb.WriteString(`}}`)
		}
		sb.WriteString("]}")
	}
	sb.WriteString(`],"totalDiff":` + strconv.FormatInt(total, 10) + `}`)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(sb.String())
	return resp
}
