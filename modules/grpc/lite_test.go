package grpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// liteFlush is the store's flush mode in the lite tests: sync, so that a
// restart loses nothing; the soak's million sends flush async.
var liteFlush = store.FlushSync

// liteLog, when set, is the endpoint's logger in openLiteNode.
var liteLog *slog.Logger

// liteNode is a broker, pop service and gRPC endpoint on a data directory
// that a test can stop and open again (a restart).
type liteNode struct {
	t    testing.TB
	dir  string
	st   store.Store
	b    *broker.Broker
	ps   *pop.Service
	srv  *grpcmod.Server
	conn *grpclib.ClientConn
	cli  grpcapi.MessagingServiceClient
	cfg  func(*grpcmod.Config)
}

func openLiteNode(t testing.TB, dir string, cfg func(*grpcmod.Config)) *liteNode {
	t.Helper()
	st, err := commitlog.Open(commitlog.NewConfig(), store.Deps{Settings: store.Settings{
		Dir: dir, Flush: liteFlush, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4<<20 + store.RecordReserve,
	}})
	require.NoError(t, err)
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	ts := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: ts, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	ps, err := pop.New(pop.NewConfig(), b)
	require.NoError(t, err)
	gc := grpcmod.NewConfig()
	gc.Enabled = true
	gc.Listen = "127.0.0.1:0"
	if cfg != nil {
		cfg(gc)
	}
	srv, err := grpcmod.New(gc, grpcmod.Deps{Broker: b, Pop: ps, Logger: liteLog})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.Start(ctx))
	require.NoError(t, srv.Start(ctx))
	conn, err := grpclib.NewClient(srv.Addr().String(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	n := &liteNode{t: t, dir: dir, st: st, b: b, ps: ps, srv: srv, conn: conn, cli: grpcapi.NewMessagingServiceClient(conn), cfg: cfg}
	t.Cleanup(n.close)
	return n
}

func (n *liteNode) close() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(n.t, n.conn.Close())
	require.NoError(n.t, n.srv.Stop(ctx))
	require.NoError(n.t, n.ps.Close())
	require.NoError(n.t, n.b.Stop(ctx))
	require.NoError(n.t, n.st.Close())
	n.srv = nil
}

// restart stops the node and opens it again on its directory.
func (n *liteNode) restart() *liteNode {
	n.close()
	return openLiteNode(n.t, n.dir, n.cfg)
}

func (n *liteNode) ctxAs(id string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", id, "x-mq-language", "GOLANG", "x-mq-protocol", "v2")
}

func (n *liteNode) parent(name string, queues int32) {
	n.t.Helper()
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypeLite}})
	require.NoError(n.t, err)
}

// send sends one lite message and answers its status.
func (n *liteNode) send(parent, lite, body string) *grpcapi.Status {
	n.t.Helper()
	sp := &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_LITE, LiteTopic: &lite}
	r, err := n.cli.SendMessage(n.ctxAs("producer@1"), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{
		msg(parent, fmt.Sprintf("%s-%s-%d", lite, body, time.Now().UnixNano()), body, sp)}})
	require.NoError(n.t, err)
	return r.GetStatus()
}

func (n *liteNode) sync(client, parent, group string, action grpcapi.LiteSubscriptionAction, opt *grpcapi.OffsetOption, lites ...string) *grpcapi.Status {
	n.t.Helper()
	r, err := n.cli.SyncLiteSubscription(n.ctxAs(client), &grpcapi.SyncLiteSubscriptionRequest{
		Action: action, Topic: res(parent), Group: res(group), LiteTopicSet: lites, OffsetOption: opt})
	require.NoError(n.t, err)
	return r.GetStatus()
}

func (n *liteNode) receive(client, parent, group string, batch int32, wait time.Duration) (*grpcapi.Status, []*grpcapi.Message) {
	n.t.Helper()
	rs, err := n.cli.ReceiveMessage(n.ctxAs(client), &grpcapi.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(parent), Id: -1},
		BatchSize: batch, InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(wait),
	})
	require.NoError(n.t, err)
	var st *grpcapi.Status
	var msgs []*grpcapi.Message
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return st, msgs
		}
		require.NoError(n.t, err)
		if r.GetStatus() != nil {
			st = r.GetStatus()
		}
		if r.GetMessage() != nil {
			msgs = append(msgs, r.GetMessage())
		}
	}
}

func (n *liteNode) ack(client, parent, group string, m *grpcapi.Message) *grpcapi.Status {
	n.t.Helper()
	lite := m.GetSystemProperties().GetLiteTopic()
	r, err := n.cli.AckMessage(n.ctxAs(client), &grpcapi.AckMessageRequest{Group: res(group), Topic: res(parent),
		Entries: []*grpcapi.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), LiteTopic: &lite}}})
	require.NoError(n.t, err)
	return r.GetStatus()
}

// readAll receives and acks until want messages of lite came, answering
// their bodies in order.
func (n *liteNode) readAll(client, parent, group string, want int) []string {
	n.t.Helper()
	var got []string
	for range 200 {
		if len(got) >= want {
			break
		}
		_, msgs := n.receive(client, parent, group, 8, 2*time.Second)
		for _, m := range msgs {
			got = append(got, string(m.GetBody()))
			require.Equal(n.t, grpcapi.Code_OK, n.ack(client, parent, group, m).GetCode())
		}
	}
	return got
}

func tokens(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, "tok"+strconv.Itoa(i))
	}
	return out
}

// TestLiteTokenStream: an LLM writes tokens in order to one lite topic per
// session; a gateway reads one session, stops after 20 acked tokens, and a
// new gateway process (another client id) resumes from the group's
// committed offset, with nothing lost, repeated or out of order.
func TestLiteTokenStream(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 4)
	for i := range 50 {
		for _, s := range []string{"session-1", "session-2", "session-3"} {
			require.Equal(t, grpcapi.Code_OK, n.send("chat", s, "tok"+strconv.Itoa(i)).GetCode(), "the lite topic is made by its first send")
		}
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-1", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "session-2").GetCode())
	var got []string
	for len(got) < 20 {
		_, msgs := n.receive("gw-1", "chat", "gateway", 4, time.Second)
		require.NotEmpty(t, msgs)
		for _, m := range msgs {
			if len(got) == 20 {
				break // received, not acked: goes to the next reader
			}
			sp := m.GetSystemProperties()
			assert.Equal(t, "session-2", sp.GetLiteTopic())
			assert.Equal(t, grpcapi.MessageType_LITE, sp.GetMessageType())
			assert.Equal(t, int64(len(got)), sp.GetQueueOffset(), "queue_offset is the lite offset")
			got = append(got, string(m.GetBody()))
			require.Equal(t, grpcapi.Code_OK, n.ack("gw-1", "chat", "gateway", m).GetCode())
		}
	}
	// A reconnecting gateway, another process: LAST resumes from the
	// group's committed offset.
	last := &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_LAST}}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-2", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, last, "session-2").GetCode())
	got = append(got, n.readAll("gw-2", "chat", "gateway", 30)...)
	assert.Equal(t, tokens(0, 50), got)
	st, msgs := n.receive("gw-1", "chat", "gateway", 4, 100*time.Millisecond)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode(), "gw-1 no longer reads session-2")
	assert.Empty(t, msgs)
}

// TestLiteOffsetOption: MIN, MAX, an offset, tail_n and a timestamp.
func TestLiteOffsetOption(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 2)
	for i := range 10 {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s", "tok"+strconv.Itoa(i)).GetCode())
	}
	time.Sleep(5 * time.Millisecond) // a store timestamp after the first ten
	mid := time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	for i := 10; i < 15; i++ {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s", "tok"+strconv.Itoa(i)).GetCode())
	}
	for _, c := range []struct {
		name string
		opt  *grpcapi.OffsetOption
		want []string
	}{
		{"min", &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_MIN}}, tokens(0, 15)},
		{"offset", &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Offset{Offset: 7}}, tokens(7, 15)},
		{"tail", &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_TailN{TailN: 3}}, tokens(12, 15)},
		{"timestamp", &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Timestamp{Timestamp: mid}}, tokens(10, 15)},
	} {
		g := "g-" + c.name
		require.Equal(t, grpcapi.Code_OK, n.sync("c", "chat", g, grpcapi.LiteSubscriptionAction_PARTIAL_ADD, c.opt, "s").GetCode(), c.name)
		assert.Equal(t, c.want, n.readAll("c", "chat", g, len(c.want)), c.name)
	}
	maxOpt := &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_MAX}}
	require.Equal(t, grpcapi.Code_OK, n.sync("c", "chat", "g-max", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, maxOpt, "s").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "s", "tok15").GetCode())
	assert.Equal(t, []string{"tok15"}, n.readAll("c", "chat", "g-max", 1), "MAX: only what comes after")
}

// TestLiteRefusals: names and types a lite send or subscription refuses.
func TestLiteRefusals(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), func(c *grpcmod.Config) { c.Lite.TopicQuota = 3; c.Lite.SubscriptionQuota = 2 })
	n.parent("chat", 2)
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: "plain", ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_ILLEGAL_LITE_TOPIC, n.send("plain", "s", "x").GetCode(), "a lite topic on a topic that is not LITE")
	assert.Equal(t, grpcapi.Code_ILLEGAL_LITE_TOPIC, n.send("chat", "bad name!", "x").GetCode())
	r, err := n.cli.SendMessage(n.ctxAs("p"), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("chat", "id-1", "x", nil)}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, r.GetStatus().GetCode(), "a LITE parent takes lite messages only")

	for _, s := range []string{"a", "b", "c"} {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", s, "x").GetCode())
	}
	assert.Equal(t, grpcapi.Code_LITE_TOPIC_QUOTA_EXCEEDED, n.send("chat", "d", "x").GetCode(), "grpc.lite.topic_quota 3")
	assert.Equal(t, grpcapi.Code_OK, n.send("chat", "a", "y").GetCode(), "an existing lite topic still takes messages")
	assert.Equal(t, grpcapi.Code_LITE_TOPIC_QUOTA_EXCEEDED, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "e").GetCode(), "a subscription makes lite topics too")

	assert.Equal(t, grpcapi.Code_OK, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "a", "b").GetCode())
	assert.Equal(t, grpcapi.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "c").GetCode(), "grpc.lite.subscription_quota 2")
	assert.Equal(t, grpcapi.Code_OK, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_REMOVE, nil, "b").GetCode())
	assert.Equal(t, grpcapi.Code_OK, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "c").GetCode(), "room again after a remove")
	assert.Equal(t, grpcapi.Code_ILLEGAL_LITE_TOPIC, n.sync("c", "plain", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "a").GetCode())
	assert.Equal(t, grpcapi.Code_ILLEGAL_LITE_TOPIC, n.sync("c", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "x/y").GetCode())
}

// telemetry opens a lite consumer's Telemetry stream and answers it once
// its settings are answered.
func (n *liteNode) telemetry(client, group string) grpcapi.MessagingService_TelemetryClient {
	n.t.Helper()
	ctx, cancel := context.WithCancel(n.ctxAs(client))
	n.t.Cleanup(cancel)
	stream, err := n.cli.Telemetry(ctx)
	require.NoError(n.t, err)
	settings := &grpcapi.Settings{ClientType: grpcapi.ClientType_LITE_PUSH_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res(group)}}}
	require.NoError(n.t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: settings}}))
	got, err := stream.Recv()
	require.NoError(n.t, err)
	require.Equal(n.t, grpcapi.Code_OK, got.GetStatus().GetCode())
	assert.Equal(n.t, int32(grpcmod.NewConfig().Lite.SubscriptionQuota), got.GetSettings().GetSubscription().GetLiteSubscriptionQuota())
	assert.Equal(n.t, int32(64), got.GetSettings().GetSubscription().GetMaxLiteTopicSize())
	return stream
}

// TestLiteExclusive: one reader per group and lite topic; the one taken
// over is told on its Telemetry stream.
func TestLiteExclusive(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 2)
	a := n.telemetry("gw-a", "gateway")
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-a", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s1", "s2").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-b", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s2").GetCode())
	cmd, err := a.Recv()
	require.NoError(t, err)
	assert.Equal(t, "s2", cmd.GetNotifyUnsubscribeLiteCommand().GetLiteTopic())
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-c", "chat", "other", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s2").GetCode(), "another group reads it too")
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "s1", "one").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "s2", "two").GetCode())
	assert.Equal(t, []string{"one"}, n.readAll("gw-a", "chat", "gateway", 1))
	assert.Equal(t, []string{"two"}, n.readAll("gw-b", "chat", "gateway", 1))
	assert.Equal(t, []string{"two"}, n.readAll("gw-c", "chat", "other", 1))
	st, _ := n.receive("gw-a", "chat", "gateway", 4, 100*time.Millisecond)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode())
}

// TestLiteTTL: a lite topic nothing was sent to for grpc.lite.ttl is
// deleted and its reader told; one of the same name starts again at lite
// offset 0 without the old messages, across a restart too.
func TestLiteTTL(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), func(c *grpcmod.Config) { c.Lite.TTL = 50 * time.Millisecond })
	n.parent("chat", 2)
	a := n.telemetry("gw-a", "gateway")
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "old", "a").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-a", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "old").GetCode())
	assert.Equal(t, []string{"a"}, n.readAll("gw-a", "chat", "gateway", 1))
	cmd, err := a.Recv() // the sweep runs every second
	require.NoError(t, err)
	assert.Equal(t, "old", cmd.GetNotifyUnsubscribeLiteCommand().GetLiteTopic())

	n = n.restart()
	require.Equal(t, grpcapi.Code_OK, n.send("chat", "old", "b").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.sync("gw-b", "chat", "g2", grpcapi.LiteSubscriptionAction_PARTIAL_ADD,
		&grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_MIN}}, "old").GetCode())
	_, msgs := n.receive("gw-b", "chat", "g2", 8, time.Second)
	require.Len(t, msgs, 1, "the deleted topic's message is gone")
	assert.Equal(t, "b", string(msgs[0].GetBody()))
	assert.Equal(t, int64(0), msgs[0].GetSystemProperties().GetQueueOffset())
}

// TestLiteRestart: the index and the group's committed offsets survive a
// restart: a reader resumes where it acked, and new sends go on from the
// lite topic's next offset.
func TestLiteRestart(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 4)
	for i := range 10 {
		for _, s := range []string{"s1", "s2"} {
			require.Equal(t, grpcapi.Code_OK, n.send("chat", s, "tok"+strconv.Itoa(i)).GetCode())
		}
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s1").GetCode())
	assert.Equal(t, tokens(0, 4), n.readAll("gw", "chat", "gateway", 4)[:4])
	n.srv.CompactLite() // the journal rewritten while serving keeps the offsets

	n = n.restart()
	for i := 10; i < 12; i++ {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s1", "tok"+strconv.Itoa(i)).GetCode())
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s1").GetCode())
	rest := n.readAll("gw", "chat", "gateway", 1)
	require.NotEmpty(t, rest)
	first, err := strconv.Atoi(rest[0][3:])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, first, 4, "nothing acked comes again")
	rest = append(rest, n.readAll("gw", "chat", "gateway", 12-first-len(rest))...)
	assert.Equal(t, tokens(first, 12), rest)
}

// TestLiteResyncKeepsInFlight: a reader that syncs its subscription again
// (the clients do it periodically) keeps its delivery in flight: nothing
// goes out twice, and the next messages wait for the acks (order).
func TestLiteResyncKeepsInFlight(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 2)
	for i := range 4 {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s", "tok"+strconv.Itoa(i)).GetCode())
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s").GetCode())
	_, first := n.receive("gw", "chat", "g", 2, time.Second)
	require.Len(t, first, 2)
	last := &grpcapi.OffsetOption{OffsetType: &grpcapi.OffsetOption_Policy_{Policy: grpcapi.OffsetOption_LAST}}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "g", grpcapi.LiteSubscriptionAction_COMPLETE_ADD, last, "s").GetCode())
	st, again := n.receive("gw", "chat", "g", 2, 200*time.Millisecond)
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode(), "in flight, and the rest waits for it")
	assert.Empty(t, again)
	for _, m := range first {
		require.Equal(t, grpcapi.Code_OK, n.ack("gw", "chat", "g", m).GetCode())
	}
	assert.Equal(t, tokens(2, 4), n.readAll("gw", "chat", "g", 2))
}

// TestLiteChangeInvisibleAndDLQ: a lite delivery's invisible time set to 0
// sends it again at once (attempt 2, in order); forwarding it to the
// dead-letter queue stores it in %DLQ%<group> and lets the next one go.
func TestLiteChangeInvisibleAndDLQ(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), nil)
	n.parent("chat", 2)
	for i := range 2 {
		require.Equal(t, grpcapi.Code_OK, n.send("chat", "s", "tok"+strconv.Itoa(i)).GetCode())
	}
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "g", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s").GetCode())
	_, got := n.receive("gw", "chat", "g", 1, time.Second)
	require.Len(t, got, 1)
	sp := got[0].GetSystemProperties()
	lite := "s"
	ci, err := n.cli.ChangeInvisibleDuration(n.ctxAs("gw"), &grpcapi.ChangeInvisibleDurationRequest{Group: res("g"), Topic: res("chat"),
		ReceiptHandle: sp.GetReceiptHandle(), InvisibleDuration: durationpb.New(0), LiteTopic: &lite})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, ci.GetStatus().GetCode())
	_, again := n.receive("gw", "chat", "g", 1, time.Second)
	require.Len(t, again, 1)
	assert.Equal(t, "tok0", string(again[0].GetBody()), "the same message first: order")
	assert.Equal(t, int32(2), again[0].GetSystemProperties().GetDeliveryAttempt())

	fw, err := n.cli.ForwardMessageToDeadLetterQueue(n.ctxAs("gw"), &grpcapi.ForwardMessageToDeadLetterQueueRequest{Group: res("g"), Topic: res("chat"),
		ReceiptHandle: again[0].GetSystemProperties().GetReceiptHandle(), LiteTopic: &lite, DeliveryAttempt: 2})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, fw.GetStatus().GetCode())
	_, hi, err := n.st.Offsets(store.Queue{Topic: protocol.DLQGroupPrefix + "g", ID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(1), hi, "tok0 in %%DLQ%%g")
	assert.Equal(t, []string{"tok1"}, n.readAll("gw", "chat", "g", 1))
	bad, err := n.cli.AckMessage(n.ctxAs("gw"), &grpcapi.AckMessageRequest{Group: res("g"), Topic: res("chat"),
		Entries: []*grpcapi.AckMessageEntry{{ReceiptHandle: sp.GetReceiptHandle(), LiteTopic: &lite}}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_INVALID_RECEIPT_HANDLE, bad.GetStatus().GetCode(), "a stale handle")
}

// TestLiteReceiveWaitsBounded: lite receives wait within
// grpc.max_receive_waits as every other receive does: with the one slot
// taken by a waiting lite reader, another answers TOO_MANY_REQUESTS at
// once, and the waiting one still gets its message.
func TestLiteReceiveWaitsBounded(t *testing.T) {
	n := openLiteNode(t, t.TempDir(), func(c *grpcmod.Config) { c.MaxReceiveWaits = 1 })
	n.parent("LW-P", 1)
	require.Equal(t, grpcapi.Code_OK, n.sync("a@1", "LW-P", "LW-G", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s-a").GetCode())
	require.Equal(t, grpcapi.Code_OK, n.sync("b@1", "LW-P", "LW-G", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, "s-b").GetCode())

	type result struct {
		st   *grpcapi.Status
		msgs []*grpcapi.Message
	}
	waiting := make(chan result, 1)
	go func() {
		var st *grpcapi.Status
		var msgs []*grpcapi.Message
		for range 100 { // again if b's probe held the slot when a came
			st, msgs = n.receive("a@1", "LW-P", "LW-G", 1, 8*time.Second)
			if st.GetCode() != grpcapi.Code_TOO_MANY_REQUESTS {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		waiting <- result{st, msgs}
	}()
	require.Eventually(t, func() bool {
		st, _ := n.receive("b@1", "LW-P", "LW-G", 1, 20*time.Millisecond) // short: a finds the slot free between probes
		return st.GetCode() == grpcapi.Code_TOO_MANY_REQUESTS
	}, 5*time.Second, 100*time.Millisecond, "a second waiting lite receive is refused while the only slot is taken")

	require.Equal(t, grpcapi.Code_OK, n.send("LW-P", "s-a", "hello").GetCode())
	r := <-waiting
	require.Equal(t, grpcapi.Code_OK, r.st.GetCode())
	require.Len(t, r.msgs, 1)
	require.Equal(t, "s-a", r.msgs[0].GetSystemProperties().GetLiteTopic())
}
