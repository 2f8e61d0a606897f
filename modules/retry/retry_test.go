package retry

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
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
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newService(t *testing.T, cfg *Config) (*Service, *broker.Broker, store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: ts, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	s, err := New(cfg, b)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	return s, b, st
}

func put(t *testing.T, b *broker.Broker, m *message.Ext) int64 {
	t.Helper()
	pos, err := b.Put(context.Background(), []*message.Ext{m})
	require.NoError(t, err)
	return pos[0].CommitLogOffset
}

func readAll(t *testing.T, st store.Store, topic string) []*message.Ext {
	t.Helper()
	var res store.ReadResult
	require.NoError(t, st.Read(context.Background(), store.Queue{Topic: topic}, 0, store.ReadOptions{MaxMessages: 100}, &res))
	var out []*message.Ext
	for _, rec := range res.Records {
		m, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func sendBack(s *Service, group string, off int64, delay, max int32) *remoting.Command {
	req := remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": strconv.FormatInt(off, 10), "delayLevel": strconv.Itoa(int(delay)),
		"maxReconsumeTimes": strconv.Itoa(int(max)), "originMsgId": "", "originTopic": "T", "unitMode": "false",
	}, nil)
	return s.b.Router().Handle(context.Background(), nil, req)
}

func TestRetryLevelAndDLQDecision(t *testing.T) {
	assert.Equal(t, int32(3), RetryLevel(0, 0))
	assert.Equal(t, int32(5), RetryLevel(0, 2))
	assert.Equal(t, int32(7), RetryLevel(7, 2))
	assert.False(t, ToDLQ(1, 2, 0))
	assert.True(t, ToDLQ(2, 2, 0))
	assert.True(t, ToDLQ(0, 16, -1))
}

func TestSendBackRetryThenDLQ(t *testing.T) {
	s, b, st := newService(t, NewConfig())
	off := put(t, b, &message.Ext{Message: message.Message{Topic: "T", Properties: message.Properties{"UNIQ_KEY": "U1", "TAGS": "A"}, Body: []byte("x")}})
	resp := sendBack(s, "G", off, 0, 2)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	retried := readAll(t, st, protocol.RetryTopic("G"))
	require.Len(t, retried, 1)
	r := retried[0]
	assert.Equal(t, "3", r.Properties[message.PropertyDelayTimeLevel], "no scheduler composed: the DELAY level stays")
	assert.Equal(t, "T", r.Properties[message.PropertyRetryTopic])
	assert.Equal(t, "U1", r.Properties[message.PropertyOriginMessageID])
	assert.Equal(t, int32(1), r.ReconsumeTimes)

	// Out of attempts: to the DLQ, without a delay.
	m2 := &message.Ext{Message: message.Message{Topic: "T", Properties: message.Properties{"UNIQ_KEY": "U2"}, Body: []byte("y")}, ReconsumeTimes: 2}
	resp = sendBack(s, "G", put(t, b, m2), 0, 2)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	dead := readAll(t, st, protocol.DLQTopic("G"))
	require.Len(t, dead, 1)
	assert.NotContains(t, dead[0].Properties, message.PropertyDelayTimeLevel)
	assert.Equal(t, int32(3), dead[0].ReconsumeTimes)
	tc, ok := b.TopicConfig(protocol.DLQTopic("G"))
	require.True(t, ok)
	assert.Equal(t, int32(1), tc.WriteQueueNums)

	// Resend by id brings it back to the group's retry topic, count reset.
	res, err := s.Resend(context.Background(), "G", "U2")
	require.NoError(t, err)
	require.Len(t, res.Resent, 1)
	assert.Equal(t, "T", res.Resent[0].Topic)
	retried = readAll(t, st, protocol.RetryTopic("G"))
	require.Len(t, retried, 2)
	assert.Equal(t, int32(0), retried[1].ReconsumeTimes)
	assert.Equal(t, "y", string(retried[1].Body))
	assert.Equal(t, dead[0].MsgID(), retried[1].Properties[PropertyResentFromDLQ], "the copy names the dead letter it came from")
	res, err = s.Resend(context.Background(), "G", "nope")
	require.NoError(t, err)
	assert.Empty(t, res.Resent)

	// The RESEND_DLQ request: the dead letter was resent above, so
	// without again=true it is skipped (and named), with it resent.
	resendDLQ := func(ext map[string]string) ResendResult {
		t.Helper()
		resp := b.Router().Handle(context.Background(), nil, remoting.NewRequest(ResendDLQ, ext, nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		var rr ResendResult
		require.NoError(t, json.Unmarshal(resp.Body, &rr))
		return rr
	}
	rr := resendDLQ(map[string]string{"group": "G", "all": "true"})
	assert.Empty(t, rr.Resent)
	require.Len(t, rr.Skipped, 1)
	assert.Equal(t, "U2", rr.Skipped[0].MsgID)
	assert.Len(t, readAll(t, st, protocol.RetryTopic("G")), 2, "nothing resent twice")
	rr = resendDLQ(map[string]string{"group": "G", "all": "true", "again": "true"})
	assert.Len(t, rr.Resent, 1)
	assert.Empty(t, rr.Skipped)
	assert.Len(t, readAll(t, st, protocol.RetryTopic("G")), 3)
	rr = resendDLQ(map[string]string{"group": "G", "msgId": "U2"})
	assert.Empty(t, rr.Resent)
	assert.Len(t, rr.Skipped, 1)
}

func TestSendBackDisabled(t *testing.T) {
	s, b, _ := newService(t, &Config{Enabled: false})
	off := put(t, b, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("x")}})
	resp := sendBack(s, "G", off, 0, 16)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "retry.enabled=false")
}

func TestResetOffsetsByTime(t *testing.T) {
	s, b, _ := newService(t, NewConfig())
	_, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		put(t, b, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("old")}, QueueID: int32(i % 2)})
	}
	time.Sleep(20 * time.Millisecond)
	mark := time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	for i := 0; i < 2; i++ {
		put(t, b, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("new")}, QueueID: int32(i % 2)})
	}
	b.CommitOffset("G", "T", 0, 3)
	b.CommitOffset("G", "T", 1, 2)
	qs, told, err := s.ResetOffsets(context.Background(), "T", "G", mark, true)
	require.NoError(t, err)
	assert.Equal(t, 0, told)
	require.Len(t, qs, 2)
	assert.Equal(t, int64(2), qs[0].Offset) // queue 0 had old,old then new
	assert.Equal(t, int64(1), qs[1].Offset)
	off, ok := b.QueryOffset("G", "T", 0)
	require.True(t, ok)
	assert.Equal(t, int64(2), off)

	// Not forced: never moves forward.
	b.CommitOffset("G", "T", 1, 0)
	qs, _, err = s.ResetOffsets(context.Background(), "T", "G", -1, false)
	require.NoError(t, err)
	assert.Equal(t, int64(0), qs[1].Offset)

	_, _, err = s.ResetOffsets(context.Background(), "Missing", "G", 0, true)
	assert.Error(t, err)
}

// TestEncodeOffsetTable checks the fastjson shape the Go client's
// parseFastJsonFormat splits on ",{" and "}:".
func TestEncodeOffsetTable(t *testing.T) {
	got := string(EncodeOffsetTable([]QueueOffset{{Topic: "T", BrokerName: "broker-a", QueueID: 0, Offset: 5}, {Topic: "T", BrokerName: "broker-a", QueueID: 1, Offset: 7}}))
	assert.Equal(t, `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}}`, got)
	assert.False(t, json.Valid([]byte(got)), "not JSON: the client then takes its fastjson path")
	assert.Len(t, regexp.MustCompile(`\{"brokerName":"[^"]*","queueId":\d+,"topic":"[^"]*"\}:\d+`).FindAllString(got, -1), 2)
	assert.Equal(t, `{"offsetTable":{}}`, string(EncodeOffsetTable(nil)))
}

// TestResetOffsetJavaAnswers: INVOKE_BROKER_TO_RESET_OFFSET answers as
// RocketMQ 5's resetOffsetInner: an unknown topic TOPIC_NOT_EXIST, a group
// that never existed SUBSCRIPTION_GROUP_NOT_EXIST (not SUCCESS with no
// offsets), one queue to an offset with queueId/offset, and an offset
// outside the queue SYSTEM_ERROR with Java's remark.
func TestResetOffsetJavaAnswers(t *testing.T) {
	s, b, _ := newService(t, NewConfig())
	_, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		put(t, b, &message.Ext{Message: message.Message{Topic: "T", Body: []byte("m")}, QueueID: int32(i % 2)})
	}
	_, err = b.GroupConfig("G")
	require.NoError(t, err)
	reset := func(ext map[string]string) *remoting.Command {
		return s.handleResetOffset(context.Background(), nil, remoting.NewRequest(remoting.InvokeBrokerToResetOffset, ext, nil))
	}
	tests := []struct {
		name       string
		give       map[string]string
		wantCode   int32
		wantRemark string
		wantBody   string
	}{
		{"unknown topic", map[string]string{"topic": "Nope", "group": "G", "timestamp": "0", "isForce": "true"},
			remoting.TopicNotExist, "Topic Nope does not exist", ""},
		{"unknown group", map[string]string{"topic": "T", "group": "Typo", "timestamp": "0", "isForce": "true"},
			remoting.SubscriptionGroupNotExist, "Group Typo does not exist", ""},
		{"one queue to an offset", map[string]string{"topic": "T", "group": "G", "timestamp": "0", "isForce": "true", "queueId": "1", "offset": "1"},
			remoting.Success, "", `{"offsetTable":{{"brokerName":"` + b.Config().Name + `","queueId":1,"topic":"T"}:1}}`},
		{"offset beyond the queue", map[string]string{"topic": "T", "group": "G", "timestamp": "0", "isForce": "true", "queueId": "0", "offset": "9"},
			remoting.SystemError, "Target offset 9 not in consume queue range [0-2]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := reset(tt.give)
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			assert.Equal(t, tt.wantRemark, resp.Remark)
			if tt.wantBody != "" {
				assert.Equal(t, tt.wantBody, string(resp.Body))
			}
		})
	}
	off, ok := b.QueryOffset("G", "T", 1)
	require.True(t, ok)
	assert.Equal(t, int64(1), off)
	_, ok = b.QueryOffset("G", "T", 0)
	assert.False(t, ok, "a one-queue reset leaves the other queue")
	assert.False(t, b.HasGroup("Typo"), "refusing does not create the group")

	// A group known only by its committed offsets (4.9 takes offsets from
	// a group without a config) is reset.
	b.CommitOffset("OffsetsOnly", "T", 0, 2)
	resp := reset(map[string]string{"topic": "T", "group": "OffsetsOnly", "timestamp": "0", "isForce": "true"})
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
}
