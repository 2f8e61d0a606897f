package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// sql92Case is a message for the SQL92 tests: its properties and whether
// "a > 5 AND b = 'x'" takes it.
type sql92Case struct {
	props map[string]string
	want  bool
}

func sql92Mix() []sql92Case {
	var out []sql92Case
	for i := 0; i < 12; i++ {
		for _, b := range []string{"x", "y"} {
			out = append(out, sql92Case{map[string]string{"a": strconv.Itoa(i), "b": b}, i > 5 && b == "x"})
		}
	}
	return append(out,
		sql92Case{map[string]string{"b": "x"}, false},                    // a missing: null, no match
		sql92Case{map[string]string{"a": "9"}, false},                    // b missing
		sql92Case{map[string]string{"a": "abc", "b": "x"}, false},        // not a number
		sql92Case{map[string]string{"a": "7.5", "b": "x"}, false},        // a double against an int literal, as Java
		sql92Case{map[string]string{"a": "2147483648", "b": "x"}, false}, // beyond an Integer
		sql92Case{map[string]string{"a": "06", "b": "x"}, true},          // Integer.valueOf("06") is 6
		sql92Case{map[string]string{"a": "100", "b": "X"}, false},        // strings are case-sensitive
		sql92Case{map[string]string{"a": "100", "b": "x", "c": "z"}, true},
		sql92Case{map[string]string{}, false},
	)
}

// TestSQL92Selector: consumer.MessageSelector{Type: consumer.SQL92} receives
// exactly the messages the broker's expression takes.
func TestSQL92Selector(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("SQL")
	p := newProducer(t, srv.Namesrv)
	want := map[string]bool{}
	for i, c := range sql92Mix() {
		body := fmt.Sprintf("m%d %v", i, c.props)
		m := newMsg(topic, body)
		for k, v := range c.props {
			m.WithProperty(k, v)
		}
		if i%3 == 0 {
			m.WithTag("T") // tags do not matter to this expression
		}
		if c.want {
			want[body] = true
		}
		sendSync(t, p, m)
	}
	waitRoute(t, srv.Namesrv, topic)
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"),
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5 AND b = 'x'"}}, col.handle)
	// A matching marker sent last proves the consumer caught up.
	sendSync(t, p, propMsg(topic, "marker", "", "a", "6", "b", "x"))
	want["marker"] = true
	// Every queue must be drained, not just the marker's: wait for all of
	// want, then check that nothing else came.
	require.Eventually(t, func() bool { return col.hasAll(want) }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, sortedKeys(want), col.bodies())
	for _, b := range col.bodies() {
		m := col.get(b)
		assert.Equal(t, "x", m.GetProperty("b"), b)
	}
}

// TestSQL92SelectorOnTags: TAGS is a property for SQL92, so a SQL92
// subscriber can select tags (here with IN, which TAG expressions lack in
// that form) and properties at once.
func TestSQL92SelectorOnTags(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("SQLTags")
	p := newProducer(t, srv.Namesrv)
	want := map[string]bool{}
	for i, tag := range []string{"A", "B", "C", "", "A", "B"} {
		for _, prio := range []string{"1", "9"} {
			body := fmt.Sprintf("%d-%s-%s", i, tag, prio)
			m := propMsg(topic, body, tag, "prio", prio)
			if (tag == "A" || tag == "C") && prio == "9" {
				want[body] = true
			}
			sendSync(t, p, m)
		}
	}
	waitRoute(t, srv.Namesrv, topic)
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"),
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "TAGS IN ('A', 'C') AND prio >= 5"}}, col.handle)
	sendSync(t, p, propMsg(topic, "marker", "C", "prio", "5"))
	want["marker"] = true
	// Every queue must be drained, not just the marker's: wait for all of
	// want, then check that nothing else came.
	require.Eventually(t, func() bool { return col.hasAll(want) }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, sortedKeys(want), col.bodies())
}

// TestMultiTagSelector extends TestTagSubscription to three tags and
// near-miss tags (case, prefixes, a tag containing another).
func TestMultiTagSelector(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Tags3")
	p := newProducer(t, srv.Namesrv)
	want := map[string]bool{}
	tags := []string{"A", "B", "C", "D", "", "a", "AB", "A ", "CC"}
	for i := 0; i < 3*len(tags); i++ {
		tag := tags[i%len(tags)]
		body := fmt.Sprintf("%d-%q", i, tag)
		m := newMsg(topic, body)
		if tag != "" {
			m.WithTag(tag)
		}
		if tag == "A" || tag == "B" || tag == "C" {
			want[body] = true
		}
		sendSync(t, p, m)
	}
	waitRoute(t, srv.Namesrv, topic)
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"),
		selector: consumer.MessageSelector{Type: consumer.TAG, Expression: "A || B || C"}}, col.handle)
	sendSync(t, p, newMsg(topic, "marker").WithTag("C"))
	want["marker"] = true
	// Every queue must be drained, not just the marker's: wait for all of
	// want, then check that nothing else came.
	require.Eventually(t, func() bool { return col.hasAll(want) }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, sortedKeys(want), col.bodies())
}

// rawHeartbeat sends one HEART_BEAT for group subscribing topic with
// (typ, expr), as the official clients do, and returns the answer.
func rawHeartbeat(t *testing.T, srv *testserver.Proc, group, topic, typ, expr string) *remoting.Command {
	t.Helper()
	hb := protocol.HeartbeatData{ClientID: uniq("127.0.0.1@raw"), ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
		ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET", SubscriptionDataSet: []protocol.SubscriptionData{{
			Topic: topic, SubString: expr, ExpressionType: typ, SubVersion: protocol.FlexInt64(time.Now().UnixNano()),
		}},
	}}}
	body, err := json.Marshal(hb)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rawClient(t).Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.HeartBeat, nil, body))
	require.NoError(t, err)
	return resp
}

// TestInvalidSQL92Refused: an expression that does not parse is refused
// at subscription with its position, and other consumers, including one
// sharing the bad consumer's client instance (one heartbeat carries both
// groups), keep receiving.
//
// The official Go client (v2.1.3-dev) has no observable error for it:
// Start returns nil (its CheckClientInBroker is empty), and the failing
// HEART_BEAT answer is only logged ("send heart beat to broker failed").
// The group is then never registered, so the client's rebalance finds no
// consumer ids and it never pulls: it receives nothing.
func TestInvalidSQL92Refused(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("SQLBad")
	p := newProducer(t, srv.Namesrv)
	sendSync(t, p, propMsg(topic, "before", "", "a", "7"))
	waitRoute(t, srv.Namesrv, topic)

	resp := rawHeartbeat(t, srv, uniq("CGRaw"), topic, "SQL92", "a > 5 AND (b = 'x'")
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, `SQL92 expression "a > 5 AND (b = 'x'": at position 18: expected`, "the position and what was expected")
	t.Logf("HEART_BEAT answer: code %d, %s", resp.Code, resp.Remark)

	shared := uniq("ci")
	badGroup, goodGroup, otherGroup := uniq("CGBad"), uniq("CGGood"), uniq("CGOther")
	bad, good, other := newCollector(), newCollector(), newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: badGroup, instance: shared,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a >> 5"}}, bad.handle)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: goodGroup, instance: shared,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5"}}, good.handle)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: otherGroup}, other.handle)

	for i := 0; i < 10; i++ {
		sendSync(t, p, propMsg(topic, fmt.Sprintf("m%d", i), "", "a", strconv.Itoa(i)))
	}
	sendSync(t, p, propMsg(topic, "marker", "", "a", "100"))
	require.Eventually(t, func() bool { return good.get("marker") != nil && other.get("marker") != nil }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, []string{"before", "m6", "m7", "m8", "m9", "marker"}, good.bodies())
	assert.Equal(t, 12, other.count())
	assert.Zero(t, bad.count())
	assert.Empty(t, srvConsumerIDs(t, srv, badGroup), "the refused group is not registered")
	assert.Len(t, srvConsumerIDs(t, srv, goodGroup), 1)
	assert.Contains(t, srv.Logs(), "consumer registered")
}

// TestPropertyFilterOff: with filter.property_filter=false a SQL92
// subscriber is refused with the key named; TAG subscribers are served.
func TestPropertyFilterOff(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"filter.property_filter=false"}})
	topic := uniq("NoSQL")
	p := newProducer(t, srv.Namesrv)
	sendSync(t, p, propMsg(topic, "m1", "A", "a", "7"))
	waitRoute(t, srv.Namesrv, topic)

	resp := rawHeartbeat(t, srv, uniq("CGRaw"), topic, "SQL92", "a > 5")
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, "filter.property_filter is false: this broker serves TAG expressions only (SQL92 refused)")
	t.Logf("HEART_BEAT answer: code %d, %s", resp.Code, resp.Remark)
	// The same for a plugin type this broker does not know at all.
	resp = rawHeartbeat(t, srv, uniq("CGRaw"), topic, "REGEX", "a=.*")
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, "unknown expression type: REGEX")

	sqlGroup := uniq("CGSQL")
	sql, tag := newCollector(), newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: sqlGroup,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 5"}}, sql.handle)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CGTag"),
		selector: consumer.MessageSelector{Type: consumer.TAG, Expression: "A"}}, tag.handle)
	sendSync(t, p, propMsg(topic, "marker", "A", "a", "8"))
	require.Eventually(t, func() bool { return tag.get("marker") != nil }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, []string{"m1", "marker"}, tag.bodies())
	assert.Zero(t, sql.count())
	assert.Empty(t, srvConsumerIDs(t, srv, sqlGroup))
}

// maxOffset asks the broker for a queue's max offset.
func maxOffset(t *testing.T, srv *testserver.Proc, topic string, queue int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := rawClient(t).Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)}, nil))
	require.NoError(t, err)
	if resp.Code != remoting.Success {
		return 0
	}
	n, err := strconv.ParseInt(resp.Ext("offset"), 10, 64)
	require.NoError(t, err)
	return n
}

// TestRetryTopicFiltered: messages in %RETRY%<group> are matched against
// the group's current subscription of their original topic. A consumer
// asks for two messages to be retried, then the group comes back with a
// narrower SQL92 expression before they are due: only the one that still
// matches is redelivered.
func TestRetryTopicFiltered(t *testing.T) {
	// Level 3, the first retry, waits 5 s: time to switch consumers.
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"schedule.delay_levels=1s 1s 5s 5s 5s 5s 5s"}})
	topic := uniq("RetryFilter")
	group := uniq("CG")
	p := newProducer(t, srv.Namesrv)

	first := newArrivals()
	first.retry = func(m *primitive.MessageExt) bool { return m.ReconsumeTimes == 0 && string(m.Body) != "warmup-"+group }
	c1 := readyConsumer(t, srv.Namesrv, p, topic, group, first)
	// One at a time, so that they wait in the schedule queue in this
	// order and reach %RETRY% in it.
	sendSync(t, p, propMsg(topic, "dropped", "", "a", "7"))
	require.Eventually(t, func() bool { return maxOffset(t, srv, protocol.ScheduleTopic, 2) >= 1 }, 20*time.Second, 20*time.Millisecond)
	sendSync(t, p, propMsg(topic, "kept", "", "a", "150"))
	require.Eventually(t, func() bool { return maxOffset(t, srv, protocol.ScheduleTopic, 2) >= 2 }, 20*time.Second, 20*time.Millisecond)
	c1.Shutdown()

	second := newArrivals()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group,
		selector: consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 100"}}, second.handle)
	// "kept" may also come again from the topic itself (reconsume 0)
	// when the first consumer's offset was not committed before it
	// stopped; the retried copy is the one that counts.
	retried := func() *primitive.MessageExt {
		for _, m := range second.deliveries("kept") {
			if m.ReconsumeTimes == 1 {
				return m
			}
		}
		return nil
	}
	require.Eventually(t, func() bool { return retried() != nil }, 60*time.Second, 50*time.Millisecond)
	assert.Equal(t, topic, retried().Topic)
	assert.Equal(t, "150", retried().GetProperty("a"), "user properties survive the retry")
	// "dropped" is ahead of "kept" in %RETRY%: it was passed over.
	assert.Empty(t, second.deliveries("dropped"), "filtered out of %RETRY% by the new subscription")
	assert.GreaterOrEqual(t, maxOffset(t, srv, protocol.RetryTopic(group), 0), int64(2), "both reached the retry topic")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// propMsg is a message with an optional tag and properties k1, v1, ...
func propMsg(topic, body, tag string, kv ...string) *primitive.Message {
	m := newMsg(topic, body)
	if tag != "" {
		m.WithTag(tag)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m.WithProperty(kv[i], kv[i+1])
	}
	return m
}
