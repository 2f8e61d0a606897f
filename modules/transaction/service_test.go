package transaction

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func transports() *transport.Set {
	return transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a broker on a real commit-log store with the transaction service.
type env struct {
	t     *testing.T
	dir   string
	st    store.Store
	b     *broker.Broker
	s     *Service
	clock *clock
	cfg   *Config
}

func open(t *testing.T, dir string, cfg *Config, clk *clock, serve bool) *env {
	t.Helper()
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: transports(), DataDir: dir})
	require.NoError(t, err)
	if cfg == nil {
		cfg = NewConfig()
	}
	s, err := New(cfg, Deps{Broker: b, Now: clk.now})
	require.NoError(t, err)
	e := &env{t: t, dir: dir, st: st, b: b, s: s, clock: clk, cfg: cfg}
	if serve {
		require.NoError(t, b.Start(context.Background()))
	}
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.t, e.s.Stop(ctx))
	require.NoError(e.t, e.b.Stop(ctx))
	require.NoError(e.t, e.st.Close())
	e.b = nil
}

// prepare stores a prepared message through the broker, as the send path
// does, and returns the stored position.
func (e *env) prepare(topic string, queue int32, group, body string) store.Position {
	e.t.Helper()
	m := &message.Ext{
		Message: message.Message{Topic: topic, Body: []byte(body), Properties: message.Properties{
			message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: group,
			message.PropertyUniqKey: "U-" + body, message.PropertyDelayTimeLevel: "3",
		}},
		QueueID: queue, SysFlag: message.TransactionPrepared, BornTimestamp: e.clock.now().UnixMilli(),
	}
	pos, err := e.b.Put(context.Background(), []*message.Ext{m})
	require.NoError(e.t, err)
	return pos[0]
}

func endReq(group string, pos store.Position, typ int32, fromCheck bool) *remoting.Command {
	return remoting.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup": group, "tranStateTableOffset": strconv.FormatInt(pos.QueueOffset, 10),
		"commitLogOffset": strconv.FormatInt(pos.CommitLogOffset, 10), "commitOrRollback": strconv.Itoa(int(typ)),
		"fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": "x", "transactionId": "", "bname": "broker-a",
	}, nil)
}

func (e *env) end(group string, pos store.Position, typ int32) *remoting.Command {
	e.t.Helper()
	return e.s.handleEnd(context.Background(), nil, endReq(group, pos, typ, false))
}

// read returns every message of a queue.
func (e *env) read(topic string, queue int32) []*message.Ext {
	e.t.Helper()
	var out []*message.Ext
	var res store.ReadResult
	off := int64(0)
	for {
		res.Reset()
		require.NoError(e.t, e.st.Read(context.Background(), store.Queue{Topic: topic, ID: queue}, off, store.ReadOptions{MaxMessages: 64}, &res))
		for _, rec := range res.Records {
			m, _, err := message.DecodeStored(append([]byte(nil), rec...))
			require.NoError(e.t, err)
			out = append(out, m)
		}
		if len(res.Records) == 0 || res.NextOffset <= off {
			return out
		}
		off = res.NextOffset
	}
}

func newClock() *clock { return &clock{t: time.Now()} }

func TestPreparedMessageBecomesHalfMessage(t *testing.T) {
	e := open(t, t.TempDir(), nil, newClock(), false)
	pos := e.prepare("Orders", 2, "PG", "a")
	assert.Empty(t, e.read("Orders", 2), "nothing visible on the real topic")
	halves := e.read(protocol.TransHalfTopic, 0)
	require.Len(t, halves, 1)
	h := halves[0]
	assert.Equal(t, pos.QueueOffset, h.QueueOffset)
	assert.Equal(t, pos.CommitLogOffset, h.CommitLogOffset)
	assert.Equal(t, "Orders", h.Properties[message.PropertyRealTopic])
	assert.Equal(t, "2", h.Properties[message.PropertyRealQueueID])
	assert.Equal(t, "true", h.Properties[message.PropertyTransactionPrepared])
	assert.Equal(t, int32(0), h.SysFlag&message.TransactionMask, "transaction bits reset")
	assert.Empty(t, h.Properties[message.PropertyDelayTimeLevel], "the delay waits for the commit")
}

func TestCommitRollbackAndDuplicates(t *testing.T) {
	e := open(t, t.TempDir(), nil, newClock(), false)
	a := e.prepare("Orders", 1, "PG", "a")
	b := e.prepare("Orders", 1, "PG", "b")

	tests := []struct {
		name       string
		pos        store.Position
		group      string
		typ        int32
		wantCode   int32
		wantRemark string
	}{
		{"commit a", a, "PG", message.TransactionCommit, remoting.Success, ""},
		{"commit a again", a, "PG", message.TransactionCommit, remoting.Success, "transaction already decided"},
		{"rollback a after commit", a, "PG", message.TransactionRollback, remoting.Success, "transaction already decided"},
		{"unknown b", b, "PG", message.TransactionNotType, remoting.Success, ""},
		{"wrong group", b, "OTHER", message.TransactionCommit, remoting.SystemError, ""},
		{"rollback b", b, "PG", message.TransactionRollback, remoting.Success, ""},
		{"commit b after rollback", b, "PG", message.TransactionCommit, remoting.Success, "transaction already decided"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.end(tt.group, tt.pos, tt.typ)
			assert.Equal(t, tt.wantCode, resp.Code, resp.Remark)
			if tt.wantCode == remoting.Success {
				assert.Equal(t, tt.wantRemark, resp.Remark)
			}
		})
	}
	real := e.read("Orders", 1)
	require.Len(t, real, 1, "exactly one committed message")
	m := real[0]
	assert.Equal(t, "a", string(m.Body))
	assert.Equal(t, message.TransactionCommit, m.SysFlag&message.TransactionMask)
	assert.Equal(t, a.CommitLogOffset, m.PreparedTransactionOffset)
	assert.Equal(t, "3", m.Properties[message.PropertyDelayTimeLevel], "delay restored on commit")
	for _, k := range []string{message.PropertyTransactionPrepared, message.PropertyRealTopic, message.PropertyRealQueueID} {
		assert.NotContains(t, m.Properties, k)
	}
	assert.Equal(t, "PG", m.Properties[message.PropertyProducerGroup])
	ops := e.read(protocol.TransOpHalfTopic, 0)
	require.Len(t, ops, 2, "one op per decided half message")
	assert.Equal(t, "d", ops[0].Tags())
	assert.Equal(t, []string{"0", "1"}, []string{string(ops[0].Body), string(ops[1].Body)})
}

func TestEndTransactionChecksTheHalfMessage(t *testing.T) {
	e := open(t, t.TempDir(), nil, newClock(), false)
	a := e.prepare("Orders", 0, "PG", "a")
	tests := []struct {
		name string
		give store.Position
	}{
		{"queue offset mismatch", store.Position{QueueOffset: a.QueueOffset + 5, CommitLogOffset: a.CommitLogOffset}},
		{"no message at commit-log offset", store.Position{QueueOffset: a.QueueOffset, CommitLogOffset: a.CommitLogOffset + 1<<20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.end("PG", tt.give, message.TransactionCommit)
			assert.Equal(t, remoting.SystemError, resp.Code)
		})
	}
	// A normal message is not a half message.
	pos, err := e.b.Put(context.Background(), []*message.Ext{{Message: message.Message{Topic: "Plain", Body: []byte("p"), Properties: message.Properties{message.PropertyProducerGroup: "PG"}}}})
	require.NoError(t, err)
	assert.Equal(t, remoting.SystemError, e.end("PG", pos[0], message.TransactionCommit).Code)
	assert.Empty(t, e.read("Orders", 0))
}

func TestConcurrentCommitsDecideOnce(t *testing.T) {
	e := open(t, t.TempDir(), nil, newClock(), false)
	a := e.prepare("Orders", 0, "PG", "a")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			typ := message.TransactionCommit
			if i%4 == 3 {
				typ = message.TransactionRollback
			}
			assert.Equal(t, remoting.Success, e.end("PG", a, typ).Code)
		}(i)
	}
	wg.Wait()
	assert.LessOrEqual(t, len(e.read("Orders", 0)), 1)
	assert.Len(t, e.read(protocol.TransOpHalfTopic, 0), 1, "one op")
}

// TestOpLogRecovery shows the decided set rebuilt from the op topic after
// a restart: late and duplicate END_TRANSACTIONs are ignored, undecided
// half messages can still be decided, and the check offset survives.
func TestOpLogRecovery(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	e := open(t, dir, nil, clk, false)
	p0 := e.prepare("Orders", 0, "PG", "m0")
	p1 := e.prepare("Orders", 0, "PG", "m1")
	p2 := e.prepare("Orders", 0, "PG", "m2")
	p3 := e.prepare("Orders", 0, "PG", "m3")
	require.Equal(t, remoting.Success, e.end("PG", p0, message.TransactionCommit).Code)
	require.Equal(t, remoting.Success, e.end("PG", p2, message.TransactionRollback).Code)
	// A check round advances the check offset over m0 and stops at m1.
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())
	assert.Equal(t, int64(1), e.s.checkOffset)
	e.close()

	tests := []struct {
		name string
		// restart reopens the store and the service before the step.
		give store.Position
		typ  int32
		want string
	}{
		{"m0 committed before the restart", p0, message.TransactionCommit, "transaction already decided"},
		{"m2 rolled back before the restart", p2, message.TransactionCommit, "transaction already decided"},
		{"m1 undecided", p1, message.TransactionCommit, ""},
		{"m1 decided after the restart", p1, message.TransactionRollback, "transaction already decided"},
		{"m3 undecided", p3, message.TransactionRollback, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := open(t, dir, nil, clk, false)
			defer e.close()
			assert.Equal(t, int64(1), e.s.checkOffset, "check offset persisted")
			resp := e.end("PG", tt.give, tt.typ)
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			assert.Equal(t, tt.want, resp.Remark)
		})
	}
	e = open(t, dir, nil, clk, false)
	var bodies []string
	for _, m := range e.read("Orders", 0) {
		bodies = append(bodies, string(m.Body))
	}
	assert.Equal(t, []string{"m0", "m1"}, bodies, "one delivery each for committed messages")
	for _, p := range []store.Position{p0, p1, p2, p3} {
		assert.True(t, e.s.Decided(p.QueueOffset))
	}
	// Everything is decided: the next round moves the check offset to the end.
	e.s.CheckNow(context.Background())
	assert.Equal(t, int64(4), e.s.checkOffset)
	assert.Empty(t, e.s.decided)
	e.close()
	e = open(t, dir, nil, clk, false)
	assert.Equal(t, int64(4), e.s.checkOffset)
	assert.Empty(t, e.s.decided)
	assert.Equal(t, remoting.Success, e.end("PG", p1, message.TransactionCommit).Code)
	assert.Len(t, e.read("Orders", 0), 2)
}

// producerClient is a raw producer connection that records check-backs and
// can answer them.
type producerClient struct {
	c      *remoting.Client
	addr   string
	checks chan *remoting.Command
}

func newProducerClient(t *testing.T, addr, clientID, group string) *producerClient {
	t.Helper()
	pc := &producerClient{addr: addr, checks: make(chan *remoting.Command, 16)}
	pc.c = remoting.NewClient(transports().Dial, remoting.HandlerFunc(func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.CheckTransactionState {
			pc.checks <- req
		}
		return nil
	}), nil, remoting.PeerOptions{})
	t.Cleanup(func() { pc.c.Close() })
	hb, err := json.Marshal(map[string]any{"clientID": clientID, "producerDataSet": []map[string]string{{"groupName": group}}, "consumerDataSet": []any{}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pc.c.Invoke(ctx, addr, remoting.NewRequest(remoting.HeartBeat, nil, hb))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	return pc
}

func (pc *producerClient) nextCheck(t *testing.T) *remoting.Command {
	t.Helper()
	select {
	case c := <-pc.checks:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no CHECK_TRANSACTION_STATE")
		return nil
	}
}

func (pc *producerClient) noCheck(t *testing.T) {
	t.Helper()
	select {
	case c := <-pc.checks:
		t.Fatalf("unexpected check %v", c.ExtFields)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestCheckBackAndDiscard(t *testing.T) {
	clk := newClock()
	cfg := NewConfig()
	cfg.CheckInterval = time.Hour // rounds are driven by CheckNow
	cfg.CheckMax = 2
	e := open(t, t.TempDir(), cfg, clk, true)
	addr := e.b.Addrs()[0]

	a := e.prepare("Orders", 3, "PG", "a")
	// Too young: no check.
	pc := newProducerClient(t, addr, "127.0.0.1@p1", "PG")
	e.s.CheckNow(context.Background())
	pc.noCheck(t)

	clk.add(30 * time.Second) // past transaction.timeout (6s) even when the setup above took seconds (-race under load)
	e.s.CheckNow(context.Background())
	chk := pc.nextCheck(t)
	assert.Equal(t, strconv.FormatInt(a.QueueOffset, 10), chk.Ext("tranStateTableOffset"))
	assert.Equal(t, strconv.FormatInt(a.CommitLogOffset, 10), chk.Ext("commitLogOffset"))
	assert.Equal(t, "U-a", chk.Ext("msgId"))
	assert.Equal(t, "U-a", chk.Ext("transactionId"))
	assert.Equal(t, message.OffsetMsgID(e.b.StoreHost(), a.CommitLogOffset), chk.Ext("offsetMsgId"))
	assert.True(t, chk.IsOneway())
	m, _, err := message.DecodeStored(chk.Body)
	require.NoError(t, err)
	assert.Equal(t, "Orders", m.Topic)
	assert.Equal(t, int32(3), m.QueueID)
	assert.Equal(t, "PG", m.Properties[message.PropertyProducerGroup])
	assert.Equal(t, "1", m.Properties[message.PropertyTransactionCheckTimes])
	assert.Equal(t, 1, e.s.CheckTimes(a.QueueOffset))

	// Another producer of the group that is not the sender may answer.
	other := newProducerClient(t, addr, "127.0.0.1@p2", "PG")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := other.c.Invoke(ctx, addr, endReq("PG", a, message.TransactionCommit, true))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, e.read("Orders", 3), 1)

	// A decided message is not checked again.
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())
	pc.noCheck(t)
	other.noCheck(t)
	assert.Equal(t, a.QueueOffset+1, e.s.checkOffset)

	// An unanswered one is checked check_max times, then discarded.
	b := e.prepare("Orders", 0, "PG", "b")
	clk.add(time.Minute)
	for i := 1; i <= 2; i++ {
		e.s.CheckNow(context.Background())
		var got *remoting.Command
		select {
		case got = <-pc.checks:
		case got = <-other.checks:
		case <-time.After(5 * time.Second):
			t.Fatalf("check %d not sent", i)
		}
		m, _, err := message.DecodeStored(got.Body)
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i), m.Properties[message.PropertyTransactionCheckTimes])
	}
	e.s.CheckNow(context.Background())
	pc.noCheck(t)
	other.noCheck(t)
	assert.True(t, e.s.Decided(b.QueueOffset))
	kept := e.read(protocol.TransCheckMaxTopic, 0)
	require.Len(t, kept, 1)
	assert.Equal(t, "b", string(kept[0].Body))
	assert.Equal(t, "Orders", kept[0].Properties[message.PropertyRealTopic])
	tc, ok := e.b.TopicConfig(protocol.TransCheckMaxTopic)
	require.True(t, ok, "the discard topic exists for inspection")
	assert.Equal(t, int32(protocol.PermRead|protocol.PermWrite), tc.Perm)
	// A late commit after the discard is ignored.
	resp = e.end("PG", b, message.TransactionCommit)
	assert.Equal(t, "transaction already decided", resp.Remark)
	assert.Empty(t, e.read("Orders", 0))
}

func TestCheckWaitsForAProducerAndImmunity(t *testing.T) {
	clk := newClock()
	cfg := NewConfig()
	cfg.CheckInterval = time.Hour
	e := open(t, t.TempDir(), cfg, clk, true)
	a := e.prepare("Orders", 0, "PG", "a")
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())
	assert.Equal(t, 0, e.s.CheckTimes(a.QueueOffset), "no producer online: not counted")

	// A message with CHECK_IMMUNITY_TIME_IN_SECONDS=600 waits 10 minutes.
	m := &message.Ext{Message: message.Message{Topic: "Orders", Body: []byte("imm"), Properties: message.Properties{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "PG", message.PropertyCheckImmunityTime: "600"}},
		SysFlag: message.TransactionPrepared}
	pos, err := e.b.Put(context.Background(), []*message.Ext{m})
	require.NoError(t, err)
	pc := newProducerClient(t, e.b.Addrs()[0], "127.0.0.1@p1", "PG")
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())
	chk := pc.nextCheck(t)
	assert.Equal(t, strconv.FormatInt(a.QueueOffset, 10), chk.Ext("tranStateTableOffset"))
	pc.noCheck(t)
	assert.Equal(t, 0, e.s.CheckTimes(pos[0].QueueOffset))
	clk.add(10 * time.Minute)
	e.s.CheckNow(context.Background())
	got := map[string]bool{}
	got[pc.nextCheck(t).Ext("tranStateTableOffset")] = true
	got[pc.nextCheck(t).Ext("tranStateTableOffset")] = true
	assert.True(t, got[strconv.FormatInt(pos[0].QueueOffset, 10)])
}

func TestDisabledRefusesTransactionalSends(t *testing.T) {
	cfg := NewConfig()
	cfg.Enabled = false
	e := open(t, t.TempDir(), cfg, newClock(), false)
	m := &message.Ext{Message: message.Message{Topic: "Orders", Body: []byte("x"), Properties: message.Properties{message.PropertyTransactionPrepared: "true"}}, SysFlag: message.TransactionPrepared}
	_, err := e.b.Put(context.Background(), []*message.Ext{m})
	assert.ErrorIs(t, err, ErrDisabled)
	var re *broker.RejectError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, remoting.NoPermission, re.Code)
	assert.Equal(t, ErrDisabled.Error(), err.Error(), "said once")
	assert.Empty(t, e.read(protocol.TransHalfTopic, 0))
	assert.Empty(t, e.read("Orders", 0))
}

// TestDisabledRefusalRemark: a client sending a prepared message to a
// broker with transactions off gets NO_PERMISSION and the reason once.
func TestDisabledRefusalRemark(t *testing.T) {
	cfg := NewConfig()
	cfg.Enabled = false
	e := open(t, t.TempDir(), cfg, newClock(), true)
	_, err := e.b.EnsureTopic(&protocol.TopicConfig{TopicName: "Orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
	c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	props := message.Properties{message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "PG"}
	resp, err := c.Invoke(ctx, e.b.Addrs()[0], remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": "Orders", "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": strconv.Itoa(int(message.TransactionPrepared)), "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte("x")))
	require.NoError(t, err)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, ErrDisabled.Error(), resp.Remark)
	assert.Empty(t, e.read("Orders", 0))
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*Config)
		want string
	}{
		{"defaults", func(*Config) {}, ""},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "transaction.timeout"},
		{"interval", func(c *Config) { c.CheckInterval = -time.Second }, "transaction.check_interval"},
		{"max", func(c *Config) { c.CheckMax = 0 }, "transaction.check_max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig()
			tt.give(c)
			err := c.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestHalfTopicsCannotBePulled(t *testing.T) {
	e := open(t, t.TempDir(), nil, newClock(), true)
	e.prepare("Orders", 0, "PG", "a")
	c := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	for _, topic := range []string{protocol.TransHalfTopic, protocol.TransOpHalfTopic} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.Invoke(ctx, e.b.Addrs()[0], remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "Snoop", "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil))
		cancel()
		require.NoError(t, err)
		assert.Equal(t, remoting.NoPermission, resp.Code, "%s: %s", topic, resp.Remark)
	}
}

func TestCheckTimesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	cfg := NewConfig()
	cfg.CheckInterval = time.Hour
	cfg.CheckMax = 3
	e := open(t, dir, cfg, clk, true)
	a := e.prepare("Orders", 0, "PG", "a")
	pc := newProducerClient(t, e.b.Addrs()[0], "127.0.0.1@p1", "PG")
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())
	pc.nextCheck(t)
	e.s.CheckNow(context.Background())
	pc.nextCheck(t)
	require.Equal(t, 2, e.s.CheckTimes(a.QueueOffset))
	e.close()

	e = open(t, dir, cfg, clk, true)
	assert.Equal(t, 2, e.s.CheckTimes(a.QueueOffset), "check count persisted")
	pc = newProducerClient(t, e.b.Addrs()[0], "127.0.0.1@p1", "PG")
	e.s.CheckNow(context.Background())
	m, _, err := message.DecodeStored(pc.nextCheck(t).Body)
	require.NoError(t, err)
	assert.Equal(t, "3", m.Properties[message.PropertyTransactionCheckTimes])
	e.s.CheckNow(context.Background())
	pc.noCheck(t)
	assert.True(t, e.s.Decided(a.QueueOffset), "discarded after check_max")
}
