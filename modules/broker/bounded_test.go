package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// recordingStore is a real commit log that counts metadata saves and can
// be made to fail appends (fault injection for the answer codes).
type recordingStore struct {
	*commitlog.Store
	mu         sync.Mutex
	saves      map[string]int
	failAppend error
}

func (r *recordingStore) SaveMeta(name string, data []byte) error {
	r.mu.Lock()
	r.saves[name]++
	r.mu.Unlock()
	return r.Store.SaveMeta(name, data)
}

func (r *recordingStore) savesOf(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saves[name]
}

func (r *recordingStore) Append(ctx context.Context, msgs []store.Message) ([]store.Position, error) {
	r.mu.Lock()
	err := r.failAppend
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.Store.Append(ctx, msgs)
}

func startRecordingBroker(t *testing.T) (*harness, *recordingStore) {
	t.Helper()
	dir := t.TempDir()
	cl, ok := openStore(t, dir).(*commitlog.Store)
	require.True(t, ok)
	rs := &recordingStore{Store: cl, saves: map[string]int{}}
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := New(cfg, Deps{Store: rs, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: rs, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h, rs
}

// TestHeartbeatManyGroupsOneWrite: a heartbeat naming 2,000 new consumer
// groups creates them and their retry topics with one write of each
// document (it was one topics.json rewrite per group: 42.5 s), and a
// repeat writes nothing.
func TestHeartbeatManyGroupsOneWrite(t *testing.T) {
	h, rs := startRecordingBroker(t)
	const groups = 2000
	hb := protocol.HeartbeatData{ClientID: "10.0.0.1@1"}
	for i := range groups {
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, protocol.ConsumerData{
			GroupName: fmt.Sprintf("CG%04d", i), ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
			SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "T", SubString: "*", ExpressionType: "TAG"}},
		})
	}
	body, err := json.Marshal(hb)
	require.NoError(t, err)
	writes := func() (int64, int64) {
		return h.b.topics.jr.appends.Load(), h.b.groups.jr.appends.Load()
	}
	topics0, groups0 := writes()
	start := time.Now()
	resp := h.invoke(remoting.HeartBeat, nil, body)
	took := time.Since(start)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	t.Logf("heartbeat with %d new groups: %v", groups, took)
	topics1, groups1 := writes()
	assert.Equal(t, int64(1), topics1-topics0, "topic journal writes")
	assert.Equal(t, int64(1), groups1-groups0, "subscription group journal writes")
	for _, i := range []int{0, 999, groups - 1} {
		_, ok := h.b.topics.get(protocol.RetryTopic(fmt.Sprintf("CG%04d", i)))
		assert.True(t, ok, "retry topic of CG%04d", i)
	}
	assert.Len(t, h.b.groups.names(), groups+len(protocol.BuiltinGroups))

	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, body).Code)
	topics2, groups2 := writes()
	assert.Equal(t, topics1, topics2, "a repeated heartbeat writes nothing")
	assert.Equal(t, groups1, groups2)
	// 2,000 records pass the compaction threshold: the documents are
	// written once in the background (not once per group).
	h.b.topics.comp.wait()
	h.b.groups.comp.wait()
	assert.LessOrEqual(t, rs.savesOf("topics"), 2, "topics.json writes")
	assert.LessOrEqual(t, rs.savesOf("subscriptionGroup"), 2, "subscriptionGroup.json writes")
}

func batchExt(topic string) map[string]string {
	return map[string]string{"a": "PG", "b": topic, "c": protocol.AutoCreateTopic, "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true"}
}

// TestBatchBoundedByCount: a batch of MaxBatchMessages+1 empty messages
// (a 360 KB body) is refused MESSAGE_ILLEGAL before anything is stored;
// MaxBatchMessages messages are stored and answered.
func TestBatchBoundedByCount(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	var body []byte
	for range MaxBatchMessages + 1 {
		body = message.AppendBatchItem(body, message.BatchItem{})
	}
	resp := h.invoke(remoting.SendBatchMessage, batchExt("Big"), body)
	require.Equal(t, remoting.MessageIllegal, resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "over the limit")
	_, mx, err := h.st.Offsets(store.Queue{Topic: "Big", ID: 0})
	require.NoError(t, err)
	assert.Zero(t, mx, "nothing stored")

	body = body[:0]
	for range MaxBatchMessages {
		body = message.AppendBatchItem(body, message.BatchItem{})
	}
	resp = h.invoke(remoting.SendBatchMessage, batchExt("Big"), body)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Len(t, strings.Split(resp.Ext("msgId"), ","), MaxBatchMessages)
	_, mx, err = h.st.Offsets(store.Queue{Topic: "Big", ID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(MaxBatchMessages), mx)
	// The answer bound is far below the frame limit at the count bound.
	assert.Less(t, batchAnswerSize(MaxBatchMessages, h.b.storeHost), 1<<20)
}

// TestSizeLimitsAreMessageIllegal: a body just under max_message_size
// whose stored record passes the store's limit is refused MESSAGE_ILLEGAL
// (it was SYSTEM_ERROR, and the client uploaded it again).
func TestSizeLimitsAreMessageIllegal(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	max := int(h.b.current().MaxMessageSize)
	for _, n := range []int{max - 100, max} {
		resp := h.send("Big", 0, strings.Repeat("x", n), nil)
		assert.Equal(t, remoting.MessageIllegal, resp.Code, "body of %d bytes: %s", n, resp.Remark)
		assert.Contains(t, resp.Remark, "over the limit")
	}
	resp := h.send("Big", 0, strings.Repeat("x", max+1), nil)
	assert.Equal(t, remoting.MessageIllegal, resp.Code, resp.Remark)
	assert.Equal(t, remoting.Success, h.send("Big", 0, "small", nil).Code)
}

// TestNegativeCommitOffsetRefused: a negative committed offset is refused
// and not stored.
func TestNegativeCommitOffsetRefused(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("Off", 0, "x", nil).Code)
	ext := map[string]string{"consumerGroup": "G", "topic": "Off", "queueId": "0", "commitOffset": "-5"}
	resp := h.invoke(remoting.UpdateConsumerOffset, ext, nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "negative")
	_, ok := h.b.offsets.query("G", "Off", 0)
	assert.False(t, ok, "nothing stored")
	ext["commitOffset"] = "1"
	require.Equal(t, remoting.Success, h.invoke(remoting.UpdateConsumerOffset, ext, nil).Code)
	off, ok := h.b.offsets.query("G", "Off", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(1), off)
}

// TestDiskFullAnswer: a store append failing for a full disk is answered
// SERVICE_NOT_AVAILABLE with the documented remark and counted; the broker
// keeps serving once space is back.
func TestDiskFullAnswer(t *testing.T) {
	h, rs := startRecordingBroker(t)
	require.Equal(t, remoting.Success, h.send("Full", 0, "x", nil).Code)
	rs.mu.Lock()
	rs.failAppend = fmt.Errorf("commitlog: write segment: %w: %w", store.ErrNotDurable, syscall.ENOSPC)
	rs.mu.Unlock()
	for range 3 {
		resp := h.send("Full", 0, "x", nil)
		assert.Equal(t, remoting.ServiceNotAvailable, resp.Code)
		assert.Equal(t, DiskFullRemark, resp.Remark)
	}
	assert.Equal(t, int64(3), h.b.FlowStats().DiskFull)
	assert.Equal(t, "3", h.b.flowFigures()["quiverStoreDiskFull"])
	rs.mu.Lock()
	rs.failAppend = nil
	rs.mu.Unlock()
	assert.Equal(t, remoting.Success, h.send("Full", 0, "x", nil).Code)
}

// TestStoreFailedAnswer: a store that disabled writes after a failed fsync
// is answered SYSTEM_ERROR (not the full-disk answer: it does not clear by
// itself) and counted apart from the full disk.
func TestStoreFailedAnswer(t *testing.T) {
	h, rs := startRecordingBroker(t)
	rs.mu.Lock()
	rs.failAppend = fmt.Errorf("commitlog: append after earlier failure: %w: commitlog: sync segment 0: fdatasync: input/output error", store.ErrNotDurable)
	rs.mu.Unlock()
	for range 2 {
		assert.Equal(t, remoting.SystemError, h.send("Failed", 0, "x", nil).Code)
	}
	fs := h.b.FlowStats()
	assert.Equal(t, int64(2), fs.StoreFailed)
	assert.Equal(t, int64(0), fs.DiskFull)
	assert.Equal(t, "2", h.b.flowFigures()["quiverStoreWriteFailed"])
}
