package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/store"
)

func TestProducerConnectionList(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.GetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "the producer group[PG] not exist", resp.Remark)

	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("p1", "CG", "T", "*")).Code)
	resp = h.invoke(remoting.GetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var pc ProducerConnection
	require.NoError(t, json.Unmarshal(resp.Body, &pc))
	require.Len(t, pc.ConnectionSet, 1)
	assert.Equal(t, "p1", pc.ConnectionSet[0].ClientID)
	assert.Equal(t, codec.ServerLanguage, pc.ConnectionSet[0].Language)
	assert.EqualValues(t, codec.ServerVersion, pc.ConnectionSet[0].Version)
	assert.Regexp(t, `^127\.0\.0\.1:\d+$`, pc.ConnectionSet[0].ClientAddr)

	resp = h.invoke(remoting.GetProducerConnectionList, nil, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "producerGroup")
}

// fakeConsumer is a client connection that heartbeats and answers the
// calls a broker passes through, as a RocketMQ client does.
func fakeConsumer(t *testing.T, h *harness, id, group, topic string) *remoting.Client {
	t.Helper()
	r := remoting.NewRouter()
	r.Register(remoting.GetConsumerRunningInfo, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Ext("clientId") != id {
			return remoting.Errorf(req, remoting.SystemError, "Can't find specified client instance of: "+req.Ext("clientId"))
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body, _ = json.Marshal(map[string]any{"properties": map[string]string{"group": req.Ext("consumerGroup"), "jstack": req.Ext("jstackEnable")}})
		return resp
	})
	r.Register(remoting.ConsumeMessageDirectly, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		m, _, err := message.DecodeStored(req.Body)
		if err != nil {
			return remoting.Errorf(req, remoting.SystemError, err.Error())
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(fmt.Sprintf(`{"consumeResult":"CR_SUCCESS","remark":"%s from %s"}`, m.Body, req.Ext("brokerName")))
		return resp
	})
	r.Register(remoting.GetConsumerStatusFromClient, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(fmt.Sprintf(`{"messageQueueTable":{{"brokerName":"broker-a","queueId":1,"topic":%q}:7,{"brokerName":"broker-a","queueId":0,"topic":%q}:5}}`, req.Ext("topic"), req.Ext("topic")))
		return resp
	})
	c := remoting.NewClient(transports().Dial, r, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, h.addr, remoting.NewRequest(remoting.HeartBeat, nil, heartbeat(id, group, topic, "*")))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	return c
}

// GET_CONSUMER_RUNNING_INFO goes to the named client over the connection
// it heartbeats on and its answer comes back as it was;
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS gathers every client's offsets.
func TestPassThroughToClient(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	fakeConsumer(t, h, "c1", "CG", "T")

	resp := h.invoke(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "CG", "clientId": "c1", "jstackEnable": "true"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.JSONEq(t, `{"properties":{"group":"CG","jstack":"true"}}`, string(resp.Body))

	resp = h.invoke(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "CG", "clientId": "nobody"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "The Consumer <CG> <nobody> not online", resp.Remark)
	resp = h.invoke(remoting.GetConsumerRunningInfo, map[string]string{"consumerGroup": "CG"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "clientId")

	// CONSUME_MESSAGE_DIRECTLY carries the stored message named by msgId.
	send := h.send("T", 0, "direct", nil)
	require.Equal(t, remoting.Success, send.Code)
	resp = h.invoke(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "CG", "clientId": "c1", "msgId": send.Ext("msgId")}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"consumeResult":"CR_SUCCESS","remark":"direct from broker-a"}`, string(resp.Body))
	resp = h.invoke(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "CG", "msgId": send.Ext("msgId")}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "The Consumer <CG> <> not online", resp.Remark)

	resp = h.invoke(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": "T", "group": "CG"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"consumerTable":{"c1":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}},"messageQueueTable":{}}`, string(resp.Body))
	resp = h.invoke(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": "T", "group": "CG", "clientAddr": "other"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"consumerTable":{},"messageQueueTable":{}}`, string(resp.Body))
	resp = h.invoke(remoting.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": "T", "group": "Nobody"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "No Any Consumer online in the consumer group: [Nobody]", resp.Remark)
}

func commit(t *testing.T, h *harness, group, topic string, q int, off int64) {
	t.Helper()
	resp := h.invoke(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q), "commitOffset": strconv.FormatInt(off, 10)}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

func TestCloneGroupOffset(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for _, topic := range []string{"T1", "T2"} {
		require.Equal(t, remoting.Success, h.send(topic, 0, "x", nil).Code)
	}
	commit(t, h, "G1", "T1", 0, 3)
	commit(t, h, "G1", "T1", 1, 5)
	commit(t, h, "G1", "T2", 0, 1)
	commit(t, h, "G2", "T1", 2, 9) // replaced by the clone

	resp := h.invoke(remoting.CloneGroupOffset, map[string]string{"srcGroup": "G1", "destGroup": "G2", "topic": "T1", "offline": "false"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, map[string]map[int32]int64{"T1": {0: 3, 1: 5}}, h.b.ConsumerOffsets()["G2"])

	// No topic: every topic of the source group.
	resp = h.invoke(remoting.CloneGroupOffset, map[string]string{"srcGroup": "G1", "destGroup": "G3"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, map[string]map[int32]int64{"T1": {0: 3, 1: 5}, "T2": {0: 1}}, h.b.ConsumerOffsets()["G3"])

	// Online and subscribed to T2 only: T1 is not cloned unless offline.
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "G1", "T2", "*")).Code)
	resp = h.invoke(remoting.CloneGroupOffset, map[string]string{"srcGroup": "G1", "destGroup": "G4"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, map[string]map[int32]int64{"T2": {0: 1}}, h.b.ConsumerOffsets()["G4"])
	resp = h.invoke(remoting.CloneGroupOffset, map[string]string{"srcGroup": "G1", "destGroup": "G5", "offline": "true"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Len(t, h.b.ConsumerOffsets()["G5"], 2)

	resp = h.invoke(remoting.CloneGroupOffset, map[string]string{"srcGroup": "G1"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "destGroup")
}

func TestQueryCorrectionOffset(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("T", 0, "x", nil).Code)
	commit(t, h, "A", "T", 0, 4)
	commit(t, h, "A", "T", 1, 8)
	commit(t, h, "B", "T", 0, 2)
	commit(t, h, "B", "T", 1, 9)
	commit(t, h, "C", "T", 0, 1) // filtered out below
	commit(t, h, "Cmp", "T", 1, 3)

	resp := h.invoke(remoting.QueryCorrectionOffset, map[string]string{"topic": "T", "compareGroup": "Cmp", "filterGroups": "C,Cmp"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	// Queue 0: min(A 4, B 2); queue 1: min(8, 9) = 8 > Cmp's 3, so MaxInt64.
	assert.Equal(t, `{"correctionOffsets":{0:2,1:9223372036854775807}}`, string(resp.Body))

	resp = h.invoke(remoting.QueryCorrectionOffset, map[string]string{"topic": "T"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "compareGroup")
}

func TestQueryConsumeTimeSpan(t *testing.T) {
	h := startBroker(t, t.TempDir(), func(c *Config) { c.DefaultTopicQueues = 2 })
	resp := h.invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": "Span", "readQueueNums": "2", "writeQueueNums": "2"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	for i := 0; i < 3; i++ {
		require.Equal(t, remoting.Success, h.send("Span", 0, fmt.Sprint(i), nil).Code)
	}
	commit(t, h, "G", "Span", 0, 1)
	var res store.ReadResult
	require.NoError(t, h.st.Read(context.Background(), store.Queue{Topic: "Span", ID: 0}, 0, store.ReadOptions{MaxMessages: 3}, &res))
	require.Len(t, res.Records, 3)
	var stamps []int64
	for _, rec := range res.Records {
		hd, err := message.PeekHeader(rec)
		require.NoError(t, err)
		stamps = append(stamps, hd.StoreTimestamp)
	}

	resp = h.invoke(remoting.QueryConsumeTimeSpan, map[string]string{"topic": "Span", "group": "G"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var body struct {
		Set []QueueTimeSpan `json:"consumeTimeSpanSet"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	require.Len(t, body.Set, 2)
	q0, q1 := body.Set[0], body.Set[1]
	assert.Equal(t, MessageQueue{BrokerName: "broker-a", QueueID: 0, Topic: "Span"}, q0.MessageQueue)
	assert.Equal(t, stamps[0], q0.MinTimeStamp)
	assert.Equal(t, stamps[2], q0.MaxTimeStamp)
	assert.Equal(t, stamps[0], q0.ConsumeTimeStamp, "the last consumed message, offset 0")
	assert.InDelta(t, time.Now().UnixMilli()-stamps[1], q0.DelayTime, 10_000)
	assert.Equal(t, time.UnixMilli(stamps[0]).Format("2006-01-02#15:04:05:000"), q0.MinTimeStampStr)
	assert.EqualValues(t, -1, q1.MinTimeStamp)
	assert.EqualValues(t, -1, q1.MaxTimeStamp)
	assert.Regexp(t, `^\{"consumeTimeSpanSet":\[\{"consumeTimeStamp":\d+,"consumeTimeStampStr":"[^"]+","delayTime":\d+,"maxTimeStamp":`, string(resp.Body))

	resp = h.invoke(remoting.QueryConsumeTimeSpan, map[string]string{"topic": "Nope", "group": "G"}, nil)
	assert.Equal(t, remoting.TopicNotExist, resp.Code)
	assert.Equal(t, "topic[Nope] not exist", resp.Remark)
}

func TestBrokerConsumeStats(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": "CS", "readQueueNums": "2", "writeQueueNums": "2"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	for i := 0; i < 4; i++ {
		require.Equal(t, remoting.Success, h.send("CS", i%2, fmt.Sprint(i), nil).Code)
	}
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "G", "CS", "*")).Code)
	commit(t, h, "G", "CS", 0, 1)

	resp = h.invoke(remoting.GetBrokerConsumeStats, map[string]string{"isOrder": "false"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	got := regexp.MustCompile(`"lastTimestamp":[1-9]\d*`).ReplaceAllString(string(resp.Body), `"lastTimestamp":T`)
	assert.Contains(t, got, `{"G":[{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"CS"}:{"brokerOffset":2,"consumerOffset":1,"lastTimestamp":T},{"brokerName":"broker-a","queueId":1,"topic":"CS"}:{"brokerOffset":2,"consumerOffset":0,"lastTimestamp":0}}}]}`)
	assert.Regexp(t, `^\{"brokerAddr":"127\.0\.0\.1:10911","consumeStatsList":\[.*\],"totalDiff":3\}$`, got)

	// Only ordered topics with isOrder.
	resp = h.invoke(remoting.GetBrokerConsumeStats, map[string]string{"isOrder": "true"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `{"G":[]}`)
	assert.Contains(t, string(resp.Body), `"totalDiff":0}`)

	resp = h.invoke(remoting.GetBrokerConsumeStats, nil, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "isOrder")
}

func TestQueryConsumeQueue(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	var phys []int64
	for i := 0; i < 3; i++ {
		resp := h.send("CQ", 0, fmt.Sprint(i), message.Properties{message.PropertyTags: "TagA"})
		require.Equal(t, remoting.Success, resp.Code)
		_, off, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
		require.NoError(t, err)
		phys = append(phys, off)
	}
	ext := map[string]string{"topic": "CQ", "queueId": "0", "index": "1", "count": "5"}
	resp := h.invoke(remoting.QueryConsumeQueue, ext, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var body queryConsumeQueueBody
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	assert.EqualValues(t, 0, body.MinQueueIndex)
	assert.EqualValues(t, 3, body.MaxQueueIndex)
	require.Len(t, body.QueueData, 2)
	for i, row := range body.QueueData {
		assert.Equal(t, phys[i+1], row.PhysicOffset)
		assert.Equal(t, message.TagsCode("TagA"), row.TagsCode)
		assert.Positive(t, row.PhysicSize)
	}
	assert.Regexp(t, `^\{"maxQueueIndex":3,"minQueueIndex":0,"queueData":\[\{"eval":false,"physicOffset":\d+,"physicSize":\d+,"tagsCode":\d+\}`, string(resp.Body))
	assert.Nil(t, body.SubscriptionData)

	// With a group: its subscription, or a note that it is not online.
	ext["consumerGroup"] = "G"
	resp = h.invoke(remoting.QueryConsumeQueue, ext, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, string(resp.Body), `"filterData":"G@CQ is not online!"`)
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "G", "CQ", "TagA")).Code)
	resp = h.invoke(remoting.QueryConsumeQueue, ext, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	body = queryConsumeQueueBody{}
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	require.NotNil(t, body.SubscriptionData)
	assert.Equal(t, "TagA", body.SubscriptionData.SubString)
	assert.Equal(t, "null", *body.FilterData)

	ext["index"] = "3"
	resp = h.invoke(remoting.QueryConsumeQueue, ext, nil)
	assert.Equal(t, remoting.Success, resp.Code)
	assert.Equal(t, "Index 3 of 0@CQ is not exist!", resp.Remark)
	assert.Empty(t, resp.Body)

	resp = h.invoke(remoting.QueryConsumeQueue, map[string]string{"topic": "Nope", "queueId": "0"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "0@Nope is not exist!", resp.Remark)
	resp = h.invoke(remoting.QueryConsumeQueue, map[string]string{"topic": "CQ", "queueId": "x"}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
}

func TestSystemTopicList(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.GetSystemTopicListFromBroker, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var tl struct {
		TopicList []string `json:"topicList"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &tl))
	for _, want := range []string{protocol.AutoCreateTopic, protocol.ScheduleTopic, protocol.TransHalfTopic, "broker-a", protocol.DefaultCluster, protocol.SelfTestTopic, protocol.OffsetMovedEvent, "DefaultCluster_REPLY_TOPIC"} {
		assert.Contains(t, tl.TopicList, want)
	}
}

func TestCleanUnusedTopic(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	for _, topic := range []string{"Kept", "Orphan"} {
		require.Equal(t, remoting.Success, h.send(topic, 0, "x", nil).Code)
	}
	_, err := h.b.Put(context.Background(), []*message.Ext{{Message: message.Message{Topic: protocol.TransHalfTopic, Body: []byte("half"), Properties: message.Properties{}}}})
	require.NoError(t, err)
	// A topic config removed without its data (as an older broker could).
	_, err = h.b.topics.remove("Orphan")
	require.NoError(t, err)

	require.Equal(t, remoting.Success, h.invoke(remoting.CleanUnusedTopic, nil, nil).Code)
	queues := map[string]bool{}
	for _, q := range h.st.(store.QueueLister).Queues() {
		queues[q.Topic] = true
	}
	assert.False(t, queues["Orphan"], "the orphan's queues are dropped")
	assert.True(t, queues["Kept"])
	assert.True(t, queues[protocol.TransHalfTopic], "internal topics keep their data")

	require.Equal(t, remoting.Success, h.invoke(remoting.CleanExpiredConsumeQueue, nil, nil).Code)
	_, max, err := h.st.Offsets(store.Queue{Topic: "Kept", ID: 0})
	require.NoError(t, err)
	assert.EqualValues(t, 1, max)
}

func TestResumeCheckHalfMessage(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	ctx := context.Background()
	discarded := &message.Ext{
		Message: message.Message{Topic: protocol.TransCheckMaxTopic, Body: []byte("order-1"), Properties: message.Properties{
			message.PropertyRealTopic: "Orders", message.PropertyRealQueueID: "2", message.PropertyTransactionPrepared: "true",
			message.PropertyTransactionCheckTimes: "15", message.PropertyProducerGroup: "TxPG", message.PropertyTranPreparedQueueOffset: "4",
		}},
		BornTimestamp: time.Now().UnixMilli(),
	}
	pos, err := h.b.Put(ctx, []*message.Ext{discarded})
	require.NoError(t, err)
	id := message.OffsetMsgID(h.b.StoreHost(), pos[0].CommitLogOffset)

	resp := h.invoke(remoting.ResumeCheckHalfMessage, map[string]string{"msgId": id}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var res store.ReadResult
	require.NoError(t, h.st.Read(ctx, store.Queue{Topic: protocol.TransHalfTopic, ID: 0}, 0, store.ReadOptions{MaxMessages: 10}, &res))
	require.Len(t, res.Records, 1)
	half, _, err := message.DecodeStored(res.Records[0])
	require.NoError(t, err)
	assert.Equal(t, "order-1", string(half.Body))
	assert.Equal(t, "0", half.Properties[message.PropertyTransactionCheckTimes])
	assert.Equal(t, "Orders", half.Properties[message.PropertyRealTopic])
	assert.Equal(t, "TxPG", half.Properties[message.PropertyProducerGroup])
	assert.NotContains(t, half.Properties, message.PropertyTranPreparedQueueOffset)

	resp = h.invoke(remoting.ResumeCheckHalfMessage, map[string]string{"msgId": id}, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "already put back")

	send := h.send("Plain", 0, "x", nil)
	require.Equal(t, remoting.Success, send.Code)
	for _, bad := range []string{send.Ext("msgId"), "not-an-id", ""} {
		resp = h.invoke(remoting.ResumeCheckHalfMessage, map[string]string{"msgId": bad}, nil)
		assert.Equal(t, remoting.SystemError, resp.Code, bad)
		assert.Contains(t, resp.Remark, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed")
	}
}

func TestAllProducerInfoAndConsumeByWho(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.GetAllProducerInfo, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"data":{}}`, string(resp.Body))

	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("p1", "G1", "Who", "*")).Code)
	resp = h.invoke(remoting.GetAllProducerInfo, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Regexp(t, `^\{"data":\{"PG":\[\{"clientId":"p1","language":"`+codec.ServerLanguage+`","lastUpdateTimestamp":[1-9]\d+,"remoteIP":"/127\.0\.0\.1:\d+","version":\d+\}\]\}\}$`, string(resp.Body))

	require.Equal(t, remoting.Success, h.send("Who", 0, "x", nil).Code)
	require.Equal(t, remoting.Success, h.send("Other", 0, "x", nil).Code)
	commit(t, h, "G2", "Who", 0, 1)
	commit(t, h, "G3", "Other", 0, 1)
	resp = h.invoke(remoting.QueryTopicConsumeByWho, map[string]string{"topic": "Who"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"groupList":["G1","G2"]}`, string(resp.Body))
	resp = h.invoke(remoting.QueryTopicConsumeByWho, nil, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "topic")
}

func TestDeleteExpiredCommitLog(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("Exp", 0, "x", nil).Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.DeleteExpiredCommitLog, nil, nil).Code, "retention 0 keeps everything")
	h.b.deps.Retention = time.Nanosecond
	require.Equal(t, remoting.Success, h.invoke(remoting.DeleteExpiredCommitLog, nil, nil).Code)
	// The store keeps its active segment, so the message is still there.
	_, max, err := h.st.Offsets(store.Queue{Topic: "Exp", ID: 0})
	require.NoError(t, err)
	assert.EqualValues(t, 1, max)
}
