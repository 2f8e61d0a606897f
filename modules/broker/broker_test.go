package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct {
	t      *testing.T
	b      *Broker
	st     store.Store
	dir    string
	client *remoting.Client
	addr   string
}

func transports() *transport.Set {
	return transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
}

func openStore(t *testing.T, dir string) store.Store { return openStoreTB(t, dir) }

func openStoreTB(t testing.TB, dir string) store.Store {
	t.Helper()
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	return st
}

func startBroker(t *testing.T, dir string, mod func(*Config)) *harness {
	t.Helper()
	st := openStore(t, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	if mod != nil {
		mod(cfg)
	}
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.b == nil {
		return
	}
	h.client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(h.t, h.b.Stop(ctx))
	require.NoError(h.t, h.st.Close())
	h.b = nil
}

func (h *harness) invoke(code int32, ext map[string]string, body []byte) *remoting.Command {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.client.Invoke(ctx, h.addr, remoting.NewRequest(code, ext, body))
	require.NoError(h.t, err)
	return resp
}

func sendExt(topic string, queue int, props message.Properties) map[string]string {
	return map[string]string{
		"producerGroup": "PG", "topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"defaultTopicQueueNums": "4", "queueId": strconv.Itoa(queue), "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false",
		"maxReconsumeTimes": "0", "batch": "false",
	}
}

func (h *harness) send(topic string, queue int, body string, props message.Properties) *remoting.Command {
	h.t.Helper()
	if props == nil {
		props = message.Properties{}
	}
	return h.invoke(remoting.SendMessage, sendExt(topic, queue, props), []byte(body))
}

func pullExt(group, topic string, queue int, offset int64, sysFlag int, suspend time.Duration) map[string]string {
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queue),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32", "sysFlag": strconv.Itoa(sysFlag),
		"commitOffset": "-1", "suspendTimeoutMillis": strconv.FormatInt(suspend.Milliseconds(), 10),
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}
}

func TestSendAutoCreatesTopicAndPullReadsIt(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.send("Fresh", 1, "hello", message.Properties{"TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "U1"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "1", resp.Ext("queueId"))
	assert.Equal(t, "0", resp.Ext("queueOffset"))
	host, off, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:10911", host.String())

	tc, ok := h.b.topics.get("Fresh")
	require.True(t, ok)
	assert.Equal(t, int32(4), tc.WriteQueueNums, "min(defaultTopicQueueNums, TBW102 queues)")
	assert.Equal(t, int32(protocol.PermRead|protocol.PermWrite), tc.Perm)

	pr := h.invoke(remoting.PullMessage, pullExt("G", "Fresh", 1, 0, pullSubscription, 0), nil)
	require.Equal(t, remoting.Success, pr.Code, pr.Remark)
	assert.Equal(t, "1", pr.Ext("nextBeginOffset"))
	assert.Equal(t, "0", pr.Ext("minOffset"))
	assert.Equal(t, "1", pr.Ext("maxOffset"))
	msgs, err := message.DecodeAll(pr.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, "hello", string(m.Body))
	assert.Equal(t, "Fresh", m.Topic)
	assert.Equal(t, off, m.CommitLogOffset)
	assert.Equal(t, "A", m.Properties["TAGS"])
	assert.Equal(t, "k1 k2", m.Properties["KEYS"])
	assert.Equal(t, protocol.DefaultCluster, m.Properties["CLUSTER"])
	assert.True(t, m.VerifyCRC())

	// VIEW_MESSAGE_BY_ID finds it by its physical offset.
	vr := h.invoke(remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	require.Equal(t, remoting.Success, vr.Code, vr.Remark)
	vm, _, err := message.DecodeStored(vr.Body)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(vm.Body))
}

func TestSendRejections(t *testing.T) {
	h := startBroker(t, t.TempDir(), func(c *Config) { c.MaxMessageSize = 1024 })
	tests := []struct {
		name string
		ext  map[string]string
		body string
		want int32
	}{
		{"bad topic name", sendExt("bad topic!", 0, message.Properties{}), "x", remoting.SystemError},
		{"system topic", sendExt(protocol.ScheduleTopic, 0, message.Properties{}), "x", remoting.NoPermission},
		{"body over max", sendExt("T1", 0, message.Properties{}), string(make([]byte, 2048)), remoting.MessageIllegal},
		{"queue out of range", sendExt("T1", 99, message.Properties{}), "x", remoting.SystemError},
		{"missing queueId", func() map[string]string { e := sendExt("T1", 0, message.Properties{}); delete(e, "queueId"); return e }(), "x", remoting.SystemError},
		{"non-numeric queueId", func() map[string]string { e := sendExt("T1", 0, message.Properties{}); e["queueId"] = "x"; return e }(), "x", remoting.SystemError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.invoke(remoting.SendMessage, tt.ext, []byte(tt.body))
			assert.Equal(t, tt.want, resp.Code, resp.Remark)
			assert.NotEmpty(t, resp.Remark)
		})
	}
	// Without auto-creation an unknown topic is refused.
	h2 := startBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopic = false })
	resp := h2.send("Nope", 0, "x", nil)
	assert.Equal(t, remoting.TopicNotExist, resp.Code)
}

func TestPullStatusCodes(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for i := 0; i < 3; i++ {
		require.Equal(t, remoting.Success, h.send("P", 0, fmt.Sprint(i), nil).Code)
	}
	tests := []struct {
		name     string
		queue    int
		offset   int64
		wantCode int32
		wantNext string
	}{
		{"found", 0, 0, remoting.Success, "3"},
		{"overflow one", 0, 3, remoting.PullNotFound, "3"},
		{"overflow badly", 0, 9, remoting.PullOffsetMoved, "3"},
		{"empty queue at 0", 1, 0, remoting.PullNotFound, "0"},
		{"empty queue at 5", 1, 5, remoting.PullOffsetMoved, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.invoke(remoting.PullMessage, pullExt("G", "P", tt.queue, tt.offset, pullSubscription, 0), nil)
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			assert.Equal(t, tt.wantNext, resp.Ext("nextBeginOffset"))
			assert.NotEmpty(t, resp.Ext("maxOffset"))
			assert.NotEmpty(t, resp.Ext("minOffset"))
		})
	}
	// Unknown topic and a queue id beyond the topic.
	assert.Equal(t, remoting.TopicNotExist, h.invoke(remoting.PullMessage, pullExt("G", "Unknown", 0, 0, pullSubscription, 0), nil).Code)
	assert.Equal(t, remoting.SystemError, h.invoke(remoting.PullMessage, pullExt("G", "P", 77, 0, pullSubscription, 0), nil).Code)
	// Without SUBSCRIPTION the heartbeat's subscription is required.
	assert.Equal(t, remoting.SubscriptionNotExist, h.invoke(remoting.PullMessage, pullExt("G", "P", 0, 0, 0, 0), nil).Code)
}

func TestLongPollingWakesOnArrival(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("LP", 0, "first", nil).Code)
	got := make(chan *remoting.Command, 1)
	req := remoting.NewRequest(remoting.PullMessage, pullExt("G", "LP", 0, 1, pullSuspend|pullSubscription, 20*time.Second), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	require.NoError(t, h.client.InvokeAsync(ctx, h.addr, req, func(c *remoting.Command, err error) {
		require.NoError(t, err)
		got <- c
	}))
	require.Eventually(t, func() bool { return h.b.holds.held() == 1 }, 5*time.Second, 5*time.Millisecond)
	select {
	case c := <-got:
		t.Fatalf("answered before any message arrived: %d %s", c.Code, c.Remark)
	default:
	}
	require.Equal(t, remoting.Success, h.send("LP", 0, "second", nil).Code)
	c := <-got
	require.Equal(t, remoting.Success, c.Code, c.Remark)
	msgs, err := message.DecodeAll(c.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "second", string(msgs[0].Body))
	assert.Equal(t, "2", c.Ext("nextBeginOffset"))
	assert.Zero(t, h.b.holds.held())
}

func TestLongPollingAnswersAtDeadline(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("LPD", 0, "x", nil).Code)
	resp := h.invoke(remoting.PullMessage, pullExt("G", "LPD", 0, 1, pullSuspend|pullSubscription, 300*time.Millisecond), nil)
	assert.Equal(t, remoting.PullNotFound, resp.Code)
	assert.Equal(t, "1", resp.Ext("nextBeginOffset"))
	assert.Zero(t, h.b.holds.held())
}

func heartbeat(client, group, topic, expr string) []byte {
	hb := protocol.HeartbeatData{ClientID: client, ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering, ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: topic, SubString: expr, ExpressionType: "TAG", SubVersion: protocol.FlexInt64(time.Now().UnixNano())}},
	}}, ProducerDataSet: []protocol.ProducerData{{GroupName: "PG"}}}
	b, _ := json.Marshal(hb)
	return b
}

func TestHeartbeatConsumerListAndDisconnect(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("HB", 0, "x", message.Properties{"TAGS": "A"}).Code)
	resp := h.invoke(remoting.HeartBeat, nil, heartbeat("10.0.0.1@1", "CG", "HB", "A || B"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	_, ok := h.b.topics.get(protocol.RetryTopic("CG"))
	assert.True(t, ok, "heartbeat creates the retry topic")

	resp = h.invoke(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "CG"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	var l protocol.ConsumerIDList
	require.NoError(t, json.Unmarshal(resp.Body, &l))
	assert.Equal(t, []string{"10.0.0.1@1"}, l.ConsumerIDList)

	// A pull without SUBSCRIPTION uses the heartbeat's tag expression.
	pr := h.invoke(remoting.PullMessage, pullExt("CG", "HB", 0, 0, 0, 0), nil)
	assert.Equal(t, remoting.Success, pr.Code, pr.Remark)

	// A bad expression type is refused at heartbeat.
	bad := protocol.HeartbeatData{ClientID: "c2", ConsumerDataSet: []protocol.ConsumerData{{GroupName: "CG2", SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "HB", SubString: "a > 1", ExpressionType: "NOPE"}}}}}
	body, _ := json.Marshal(bad)
	assert.Equal(t, remoting.SubscriptionParseFailed, h.invoke(remoting.HeartBeat, nil, body).Code)

	// The client never unregisters: closing its connection drops it.
	h.client.CloseAddr(h.addr)
	require.Eventually(t, func() bool { return len(h.b.clients.consumerIDs("CG")) == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestClientExpiry(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "CGX", "HB", "*")).Code)
	require.Len(t, h.b.clients.consumerIDs("CGX"), 1)
	now := time.Now()
	h.b.clients.now = func() time.Time { return now.Add(121 * time.Second) }
	assert.Equal(t, []string{"CGX"}, h.b.clients.expire(120*time.Second))
	assert.Empty(t, h.b.clients.consumerIDs("CGX"))
}

func TestConsumerOffsetsPersist(t *testing.T) {
	dir := t.TempDir()
	h := startBroker(t, dir, nil)
	require.Equal(t, remoting.Success, h.send("OFF", 2, "x", nil).Code)
	resp := h.invoke(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "OFF", "queueId": "2"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	assert.Equal(t, "0", resp.Ext("offset"), "a young queue starts at 0")
	resp = h.invoke(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "OFF", "queueId": "2", "commitOffset": "1"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	h.stop()

	h2 := startBroker(t, dir, nil)
	resp = h2.invoke(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "OFF", "queueId": "2"}, nil)
	require.Equal(t, remoting.Success, resp.Code)
	assert.Equal(t, "1", resp.Ext("offset"))
	_, ok := h2.b.topics.get("OFF")
	assert.True(t, ok, "topic config survives restart")
	resp = h2.invoke(remoting.GetMaxOffset, map[string]string{"topic": "OFF", "queueId": "2"}, nil)
	assert.Equal(t, "1", resp.Ext("offset"))
}

func TestBatchSend(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	var body []byte
	for i := 0; i < 5; i++ {
		body = message.AppendBatchItem(body, message.BatchItem{Body: []byte(fmt.Sprint("b", i)), Properties: message.Properties{"KEYS": fmt.Sprint("k", i)}})
	}
	ext := map[string]string{"a": "PG", "b": "Batch", "c": protocol.AutoCreateTopic, "d": "4", "e": "3", "f": "0", "g": "1", "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true"}
	resp := h.invoke(remoting.SendBatchMessage, ext, body)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "0", resp.Ext("queueOffset"))
	pr := h.invoke(remoting.PullMessage, pullExt("G", "Batch", 3, 0, pullSubscription, 0), nil)
	require.Equal(t, remoting.Success, pr.Code)
	msgs, err := message.DecodeAll(pr.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 5)
	for i, m := range msgs {
		assert.Equal(t, fmt.Sprint("b", i), string(m.Body))
		assert.Equal(t, int64(i), m.QueueOffset)
		assert.Equal(t, fmt.Sprint("k", i), m.Properties["KEYS"])
	}
	// A corrupt batch body is refused without storing anything.
	resp = h.invoke(remoting.SendBatchMessage, ext, []byte{0, 0, 0, 99, 1, 2})
	assert.Equal(t, remoting.MessageIllegal, resp.Code)
}

func TestTagFilterOnBroker(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for i, tg := range []string{"A", "B", "C", "A", ""} {
		require.Equal(t, remoting.Success, h.send("TF", 0, fmt.Sprint(i), message.Properties{"TAGS": tg}).Code)
	}
	ext := pullExt("G", "TF", 0, 0, pullSubscription, 0)
	ext["subscription"] = "A || C"
	pr := h.invoke(remoting.PullMessage, ext, nil)
	require.Equal(t, remoting.Success, pr.Code)
	msgs, err := message.DecodeAll(pr.Body)
	require.NoError(t, err)
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, string(m.Body))
	}
	assert.Equal(t, []string{"0", "2", "3"}, bodies)
	assert.Equal(t, "5", pr.Ext("nextBeginOffset"), "filtered entries still advance the offset")
	// Only non-matching messages left: PULL_RETRY_IMMEDIATELY past them.
	ext["queueOffset"] = "4"
	pr = h.invoke(remoting.PullMessage, ext, nil)
	assert.Equal(t, remoting.PullRetryImmediately, pr.Code)
	assert.Equal(t, "5", pr.Ext("nextBeginOffset"))
}

func TestUnknownCodeAndAdminTopic(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	assert.Equal(t, remoting.RequestCodeNotSupported, h.invoke(4242, nil, nil).Code)
	resp := h.invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": "Admin1", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	tc, ok := h.b.topics.get("Admin1")
	require.True(t, ok)
	assert.Equal(t, int32(2), tc.ReadQueueNums)
	resp = h.invoke(remoting.DeleteTopicInBroker, map[string]string{"topic": "Admin1"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	_, ok = h.b.topics.get("Admin1")
	assert.False(t, ok)
	assert.Equal(t, invalidParameter, h.invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": protocol.AutoCreateTopic}, nil).Code)
}

// TestConcurrentPullsKeepTheirRecords: pull answers reuse read buffers once
// written; many pulls in flight at once on one connection and on several
// each get exactly their own records (body names queue and offset).
func TestConcurrentPullsKeepTheirRecords(t *testing.T) {
	h := startBroker(t, t.TempDir(), func(c *Config) { c.PullBatchMax = 64 })
	const queues, perQueue = 4, 300
	for q := 0; q < queues; q++ {
		for i := 0; i < perQueue; i++ {
			require.Equal(t, remoting.Success, h.send("Pool", q, fmt.Sprintf("q%d-o%d-%s", q, i, strings.Repeat("x", i%97)), nil).Code)
		}
	}
	clients := []*remoting.Client{h.client}
	for i := 0; i < 2; i++ {
		c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	for r := 0; r < 12; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[r%len(clients)]
			for round := 0; round < 10; round++ {
				q := (r + round) % queues
				off := int64((r*37 + round*11) % perQueue)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ext := pullExt("G", "Pool", q, off, pullSubscription, 0)
				ext["maxMsgNums"] = "64"
				resp, err := c.Invoke(ctx, h.addr, remoting.NewRequest(remoting.PullMessage, ext, nil))
				cancel()
				if !assert.NoError(t, err) || !assert.Equal(t, remoting.Success, resp.Code, resp.Remark) {
					return
				}
				msgs, err := message.DecodeAll(resp.Body)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, min(64, perQueue-int(off)), len(msgs))
				for i, m := range msgs {
					want := fmt.Sprintf("q%d-o%d-%s", q, off+int64(i), strings.Repeat("x", int(off+int64(i))%97))
					assert.Equal(t, want, string(m.Body))
					assert.Equal(t, off+int64(i), m.QueueOffset)
					assert.True(t, m.VerifyCRC())
				}
			}
		}()
	}
	wg.Wait()
}

// TestConcurrentSendsStoreTheirBodies: request frames go back to the
// transport's pool once a send's handler returns; sends and batches of
// many sizes from several connections at once are each stored with their
// own bytes (a frame reused too early would show as another body).
func TestConcurrentSendsStoreTheirBodies(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	const workers, rounds = 9, 40
	_, err := h.b.createTopic(&protocol.TopicConfig{TopicName: "Recycle", ReadQueueNums: workers, WriteQueueNums: workers, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
	clients := []*remoting.Client{h.client}
	for i := 0; i < 2; i++ {
		c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	body := func(w, r, i int) string {
		return fmt.Sprintf("w%d-r%d-i%d-%s", w, r, i, strings.Repeat(string(rune('a'+(w+r+i)%26)), (w*997+r*131+i*17)%20000))
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for r := 0; r < rounds; r++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var req *remoting.Command
				if r%2 == 0 {
					req = remoting.NewRequest(remoting.SendMessage, sendExt("Recycle", w, message.Properties{}), []byte(body(w, r, 0)))
				} else {
					var b []byte
					for i := 0; i < 5; i++ {
						b = message.AppendBatchItem(b, message.BatchItem{Body: []byte(body(w, r, i))})
					}
					ext := map[string]string{"a": "PG", "b": "Recycle", "c": protocol.AutoCreateTopic, "d": "16", "e": strconv.Itoa(w), "f": "0", "g": "1", "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true"}
					req = remoting.NewRequest(remoting.SendBatchMessage, ext, b)
				}
				resp, err := c.Invoke(ctx, h.addr, req)
				cancel()
				if !assert.NoError(t, err) || !assert.Equal(t, remoting.Success, resp.Code, resp.Remark) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := 0; w < workers; w++ {
		var want []string
		for r := 0; r < rounds; r++ {
			n := 1
			if r%2 == 1 {
				n = 5
			}
			for i := 0; i < n; i++ {
				want = append(want, body(w, r, i))
			}
		}
		var got []string
		for off := int64(0); off < int64(len(want)); {
			pr := h.invoke(remoting.PullMessage, pullExt("G", "Recycle", w, off, pullSubscription, 0), nil)
			require.Equal(t, remoting.Success, pr.Code, pr.Remark)
			msgs, err := message.DecodeAll(pr.Body)
			require.NoError(t, err)
			for _, m := range msgs {
				assert.True(t, m.VerifyCRC(), "queue %d offset %d", w, m.QueueOffset)
				got = append(got, string(m.Body))
			}
			off += int64(len(msgs))
		}
		assert.Equal(t, want, got, "queue %d", w)
	}
}
