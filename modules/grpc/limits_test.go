package grpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/broker"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// withConfig changes the endpoint's configuration.
func withConfig(f func(*grpcmod.Config)) nodeOpt {
	return func(c *grpcmod.Config, _ *grpcmod.Deps) { f(c) }
}

// dialFrom is a client of the node whose connections come from the local
// address ip (127.0.0.2 is loopback too: another address to the server).
func (n *node) dialFrom(ip string) grpcapi.MessagingServiceClient {
	n.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := grpclib.NewClient(n.srv.Addr().String(), grpclib.WithTransportCredentials(insecure.NewCredentials()),
		grpclib.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	require.NoError(n.t, err)
	n.t.Cleanup(func() { _ = conn.Close() })
	return grpcapi.NewMessagingServiceClient(conn)
}

func (n *node) heartbeat(cli grpcapi.MessagingServiceClient) error {
	ctx, cancel := context.WithTimeout(n.ctx(), 5*time.Second)
	defer cancel()
	resp, err := cli.Heartbeat(ctx, &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
	if err == nil {
		require.Equal(n.t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	}
	return err
}

// TestConnectionsPerIP: beyond grpc.max_connections_per_ip connections
// from one address are closed at once while another address is served; a
// closed connection gives its slot back.
func TestConnectionsPerIP(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.MaxConnectionsPerIP = 2 }))
	a1, a2, a3 := n.dialFrom("127.0.0.1"), n.dialFrom("127.0.0.1"), n.dialFrom("127.0.0.1")
	require.NoError(t, n.heartbeat(a1))
	require.NoError(t, n.heartbeat(a2))
	err := n.heartbeat(a3)
	require.Error(t, err, "a third connection from 127.0.0.1")
	assert.Equal(t, codes.Unavailable, grpcstatus.Code(err), err.Error())
	require.NoError(t, n.heartbeat(n.dialFrom("127.0.0.2")), "another address is served")
	open, refused := n.srv.Conns()
	assert.Equal(t, 3, open)
	assert.Positive(t, refused)
}

// TestConnectionsInAll: beyond grpc.max_connections every address is
// refused.
func TestConnectionsInAll(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.MaxConnections = 1 }))
	require.NoError(t, n.heartbeat(n.dialFrom("127.0.0.1")))
	err := n.heartbeat(n.dialFrom("127.0.0.2"))
	assert.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
}

// TestIdleConnectionClosed: a connection without a call open is closed
// after grpc.idle_timeout.
func TestIdleConnectionClosed(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.IdleTimeout = 200 * time.Millisecond }))
	require.NoError(t, n.heartbeat(n.dialFrom("127.0.0.1")))
	open, _ := n.srv.Conns()
	require.Equal(t, 1, open)
	eventually(t, 10*time.Second, func() bool { open, _ := n.srv.Conns(); return open == 0 }, "the idle connection is closed")
}

// TestConcurrentStreamsPerConnection: a connection has at most
// grpc.max_concurrent_streams calls open; another call waits for one of
// them to end (the client queues it) and never reaches a handler.
func TestConcurrentStreamsPerConnection(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.MaxConcurrentStreams = 2 }))
	n.topic("StreamsT", 1)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := n.tryPull5x("SG", "StreamsT", 0, 0, 32, "", 20*time.Second)
			done <- err
		}()
	}
	eventually(t, 5*time.Second, func() bool { return n.srv.WaitingPulls() == 2 }, "two pulls are waiting")
	ctx, cancel := context.WithTimeout(n.ctx(), 300*time.Millisecond)
	defer cancel()
	stream, err := n.cli.PullMessage(ctx, &grpcapi.PullMessageRequest{Group: res("SG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("StreamsT")},
		BatchSize: 1, LongPollingTimeout: durationpb.New(20 * time.Second)})
	if err == nil {
		_, err = stream.Recv()
	}
	assert.Equal(t, codes.DeadlineExceeded, grpcstatus.Code(err), "the third call waits for a stream: %v", err)
	assert.Equal(t, 2, n.srv.WaitingPulls())
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	require.NoError(t, n.srv.Stop(ctx2)) // answers the waiting pulls
	for range 2 {
		require.NoError(t, <-done)
	}
}

// TestSendMessageBounded: a SendMessage of more messages than a
// SEND_BATCH_MESSAGE may hold (broker.MaxBatchMessages), or with more body
// bytes than grpc.max_send_bytes (inflated bodies counted), is refused
// whole with PAYLOAD_TOO_LARGE and stores nothing.
func TestSendMessageBounded(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.MaxSendBytes = 1000 }))
	n.topic("BatchT", 1)
	send := func(msgs []*grpcapi.Message) *grpcapi.Status {
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: msgs})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	var msgs []*grpcapi.Message
	for i := range broker.MaxBatchMessages + 1 {
		msgs = append(msgs, msg("BatchT", "id-"+strconv.Itoa(i), "x", nil))
	}
	st := send(msgs)
	assert.Equal(t, grpcapi.Code_PAYLOAD_TOO_LARGE, st.GetCode(), st.GetMessage())
	assert.Contains(t, st.GetMessage(), "16384")
	assert.Empty(t, n.pullAll("BatchT", 1), "nothing stored")

	big := strings.Repeat("b", 400)
	st = send([]*grpcapi.Message{msg("BatchT", "b1", big, nil), msg("BatchT", "b2", big, nil), msg("BatchT", "b3", big, nil)})
	assert.Equal(t, grpcapi.Code_PAYLOAD_TOO_LARGE, st.GetCode(), st.GetMessage())
	assert.Contains(t, st.GetMessage(), "max_send_bytes")
	assert.Empty(t, n.pullAll("BatchT", 1), "nothing stored")

	// Small gzip bodies that inflate past the limit together.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err := zw.Write(make([]byte, 600))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	gz := func(id string) *grpcapi.Message {
		m := msg("BatchT", id, zb.String(), &grpcapi.SystemProperties{BodyEncoding: grpcapi.Encoding_GZIP})
		return m
	}
	st = send([]*grpcapi.Message{gz("z1"), gz("z2")})
	assert.Equal(t, grpcapi.Code_PAYLOAD_TOO_LARGE, st.GetCode(), st.GetMessage())
	assert.Empty(t, n.pullAll("BatchT", 1), "nothing stored")

	// Within the limits: stored.
	st = send([]*grpcapi.Message{msg("BatchT", "ok1", big, nil), gz("ok2")})
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	assert.Len(t, n.pullAll("BatchT", 1), 2)
}

// pubSettings are a producer's settings for topics.
func pubSettings(topics ...string) *grpcapi.Settings {
	var rs []*grpcapi.Resource
	for _, t := range topics {
		rs = append(rs, res(t))
	}
	return &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(), PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{Topics: rs}}}
}

// openTelemetry opens a Telemetry stream, sends settings and returns the
// stream with the server's first answer (or its error).
func (n *node) openTelemetry(ctx context.Context, s *grpcapi.Settings) (grpcapi.MessagingService_TelemetryClient, *grpcapi.TelemetryCommand, error) {
	n.t.Helper()
	stream, err := n.cli.Telemetry(ctx)
	require.NoError(n.t, err)
	// A stream the server refused at once may fail Send with io.EOF: its
	// status is what Recv returns.
	if err := stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: s}}); !errors.Is(err, io.EOF) {
		require.NoError(n.t, err)
	}
	got, err := stream.Recv()
	return stream, got, err
}

// TestTelemetrySettingsBounded: settings over grpc.max_settings_size end
// the stream and are not kept; the settings of a client are dropped when
// its stream closes.
func TestTelemetrySettingsBounded(t *testing.T) {
	n := startNodeWith(t, false, withConfig(func(c *grpcmod.Config) { c.MaxSettingsSize = 2048 }))
	var many []string
	for i := range 100 {
		many = append(many, "a-rather-long-topic-name-for-settings-"+strconv.Itoa(i))
	}
	_, _, err := n.openTelemetry(n.ctxAs("big@1"), pubSettings(many...))
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, grpcstatus.Code(err), err.Error())
	assert.Contains(t, err.Error(), "max_settings_size")
	assert.Zero(t, n.srv.HeldSettings())

	var streams []grpcapi.MessagingService_TelemetryClient
	for i := range 3 {
		s, got, err := n.openTelemetry(n.ctxAs("p"+strconv.Itoa(i)+"@1"), pubSettings(many[:10]...))
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
		streams = append(streams, s)
	}
	assert.Positive(t, n.srv.HeldSettings())
	for _, s := range streams {
		require.NoError(t, s.CloseSend())
		_, err := s.Recv()
		require.ErrorIs(t, err, io.EOF, "the server ends the stream")
	}
	eventually(t, 5*time.Second, func() bool { return n.srv.HeldSettings() == 0 }, "settings dropped with their streams")
}

// TestStalledConsumersBounded: consumers that stop reading hold at most
// grpc.receive_stream_buffer each and grpc.receive_buffer together (the
// module's count of held body bytes); with the budget full a receive is
// answered TOO_MANY_REQUESTS without popping; the messages not sent by
// the receive's deadline (its invisible time) are let go, and the rest
// when the stalled calls end.
func TestStalledConsumersBounded(t *testing.T) {
	const body = 200 << 10
	n := startNodeWith(t, true, withConfig(func(c *grpcmod.Config) {
		c.ReceiveStreamBuffer = 4*body + body/2
		c.ReceiveBuffer = 8 * body
	}))
	n.topic("StallT", 8) // a store read answers one such message: one per queue
	for b := range 2 {
		var msgs []*grpcapi.Message
		for i := range 10 {
			msgs = append(msgs, msg("StallT", "stall-"+strconv.Itoa(b*10+i), strings.Repeat("s", body), nil))
		}
		resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: msgs})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	}
	req := func(batch int32) *grpcapi.ReceiveMessageRequest {
		return &grpcapi.ReceiveMessageRequest{Group: res("StallG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("StallT"), Id: -1},
			BatchSize: batch, InvisibleDuration: durationpb.New(2 * time.Second), LongPollingTimeout: durationpb.New(time.Second)}
	}
	// A stalled consumer: its own connection with a fixed 64 KiB flow
	// window, and it never reads its stream.
	stall := func(batch int32) context.CancelFunc {
		conn, err := grpclib.NewClient(n.srv.Addr().String(), grpclib.WithTransportCredentials(insecure.NewCredentials()),
			grpclib.WithInitialWindowSize(64<<10), grpclib.WithInitialConnWindowSize(64<<10))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		ctx, cancel := context.WithCancel(n.ctx())
		rs, err := grpcapi.NewMessagingServiceClient(conn).ReceiveMessage(ctx, req(batch))
		require.NoError(t, err)
		r, err := rs.Recv() // the status, then nothing more is read
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
		return cancel
	}
	cancelA := stall(4)
	eventually(t, 5*time.Second, func() bool { return n.srv.HeldReceived() == 4*body }, "A holds its 4 messages")
	cancelB := stall(8) // receives 8, keeps what fits receive_stream_buffer
	eventually(t, 5*time.Second, func() bool { return n.srv.HeldReceived() == 8*body }, "B holds 4 of its 8 messages")

	rs, err := n.cli.ReceiveMessage(n.ctx(), req(4))
	require.NoError(t, err)
	r, err := rs.Recv()
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_TOO_MANY_REQUESTS, r.GetStatus().GetCode(), r.GetStatus().GetMessage())
	assert.LessOrEqual(t, n.srv.HeldReceived(), int64(8*body))

	eventually(t, 10*time.Second, func() bool { return n.srv.HeldReceived() < 8*body }, "the unsent messages are let go at the receive's deadline")
	cancelA()
	cancelB()
	eventually(t, 10*time.Second, func() bool { return n.srv.HeldReceived() == 0 }, "nothing held once the stalled calls end")
	st, got := n.receive("StallG", "StallT", "*", time.Minute)
	require.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	assert.NotEmpty(t, got)
	assert.Zero(t, n.srv.HeldReceived(), "a consumer that reads leaves nothing held")
}

// TestStreamFloodSoak (skipped with -short): 2,000 long polls on one
// connection reach the handlers 1,024 (grpc.max_concurrent_streams'
// default) at a time; the rest wait in the client.
func TestStreamFloodSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: 2,000 streams")
	}
	n := startNode(t)
	n.topic("FloodT", 1)
	const calls = 2000
	done := make(chan error, calls)
	for range calls {
		go func() {
			_, err := n.tryPull5x("FG", "FloodT", 0, 0, 1, "", 20*time.Second)
			done <- err
		}()
	}
	eventually(t, 30*time.Second, func() bool { return n.srv.WaitingPulls() == 1024 }, "1,024 pulls are waiting")
	for range 10 {
		require.LessOrEqual(t, n.srv.WaitingPulls(), 1024)
		time.Sleep(50 * time.Millisecond) // sampling, not synchronisation
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, n.srv.Stop(ctx)) // answers the waiting pulls; the queued ones fail
	for range calls {
		<-done
	}
}

// TestSendOverStoreRecordLimit: a message within the broker's max message
// size is stored (the store keeps store.RecordReserve for the
// properties, as the kernel opens it); one whose record the store refuses
// as too large is the client's error MESSAGE_BODY_TOO_LARGE, not a
// retryable INTERNAL_SERVER_ERROR.
func TestSendOverStoreRecordLimit(t *testing.T) {
	limit := int(broker.NewConfig().MaxMessageSize)
	full := func(id string) *grpcapi.Message {
		m := msg("BigT", id, strings.Repeat("b", limit), nil)
		m.UserProperties = map[string]string{"p": strings.Repeat("v", 1000)}
		return m
	}
	n := startNode(t)
	n.topic("BigT", 1)
	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{full("01AABBCCDDEEFF00112233445577")}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())

	tight := startNodeStore(t, limit, false) // no room for properties
	tight.topic("BigT", 1)
	resp, err = tight.cli.SendMessage(tight.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{full("01AABBCCDDEEFF00112233445578")}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_MESSAGE_BODY_TOO_LARGE, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	assert.Contains(t, resp.GetStatus().GetMessage(), "message too large")
}
