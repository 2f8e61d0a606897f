package grpc_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/broker"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// receiveFor is one ReceiveMessage long-polling up to wait: its status
// and messages.
func (n *node) receiveFor(ctx context.Context, group, topic string, wait time.Duration) (*grpcapi.Status, int, error) {
	rs, err := n.cli.ReceiveMessage(ctx, &grpcapi.ReceiveMessageRequest{
		Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(topic), Id: -1},
		BatchSize: 1, InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(wait),
	})
	if err != nil {
		return nil, 0, err
	}
	var st *grpcapi.Status
	got := 0
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return st, got, nil
		}
		if err != nil {
			return st, got, err
		}
		if r.GetStatus() != nil {
			st = r.GetStatus()
		}
		if r.GetMessage() != nil {
			got++
		}
	}
}

// TestReceiveWaitsBounded: at most grpc.max_receive_waits receives wait
// for messages at once; the next one, finding nothing, is answered
// TOO_MANY_REQUESTS at once (its long poll is 30s: a wait would outlast
// the test's context), and one finding a message still gets it.
func TestReceiveWaitsBounded(t *testing.T) {
	n := startNodeWith(t, true, withConfig(func(c *grpcmod.Config) { c.MaxReceiveWaits = 2 }))
	n.topic("WaitT", 1)
	n.topic("OtherT", 1)
	ctx, cancel := context.WithCancel(n.ctx())
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := n.receiveFor(ctx, "WaitG", "WaitT", 30*time.Second)
			done <- err
		}()
	}
	eventually(t, 10*time.Second, func() bool { return n.srv.ReceiveWaits() == 2 }, "two receives wait")

	st, got, err := n.receiveFor(n.ctx(), "OtherG", "OtherT", 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_TOO_MANY_REQUESTS, st.GetCode(), st.GetMessage())
	assert.Contains(t, st.GetMessage(), "max_receive_waits")
	assert.Zero(t, got)

	resp, err := n.cli.SendMessage(n.ctx(), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("OtherT", "w1", "x", nil)}})
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	st, got, err = n.receiveFor(n.ctx(), "OtherG", "OtherT", 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
	assert.Equal(t, 1, got, "a receive over the bound still takes what is there")

	cancel()
	for range 2 {
		<-done
	}
	eventually(t, 10*time.Second, func() bool { return n.srv.ReceiveWaits() == 0 }, "the slots are given back")
}

// bigSend is the wire bytes of a SendMessageRequest of count messages.
func bigSend(t *testing.T, count int) []byte {
	req := &grpcapi.SendMessageRequest{}
	for i := range count {
		req.Messages = append(req.Messages, msg("BatchT", "id-"+strconv.Itoa(i), "x", nil))
	}
	b, err := proto.Marshal(req)
	require.NoError(t, err)
	return b
}

// TestSendCodecCountsFirst: a SendMessageRequest of more messages than
// broker.MaxBatchMessages is not decoded: the codec answers an empty
// request (the handler refuses it PAYLOAD_TOO_LARGE, as
// TestSendMessageBounded shows end to end) with a handful of allocations,
// where decoding it allocates several per message.
func TestSendCodecCountsFirst(t *testing.T) {
	codec := grpcmod.SendCodec()
	over := bigSend(t, 80000)
	var req grpcapi.SendMessageRequest
	allocs := testing.AllocsPerRun(3, func() {
		req = grpcapi.SendMessageRequest{}
		require.NoError(t, codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(over)}, &req))
	})
	assert.Zero(t, len(req.GetMessages()), "nothing decoded")
	assert.Less(t, allocs, 20.0, "the 80,000 messages were decoded")

	within := bigSend(t, broker.MaxBatchMessages)
	req = grpcapi.SendMessageRequest{}
	require.NoError(t, codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(within)}, &req))
	assert.Len(t, req.GetMessages(), broker.MaxBatchMessages, "a batch within the limit is decoded")

	require.Error(t, codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 0x01})}, &grpcapi.SendMessageRequest{}), "truncated bytes")

	// Other requests go to the standard codec.
	hb, err := proto.Marshal(&grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
	require.NoError(t, err)
	var h grpcapi.HeartbeatRequest
	require.NoError(t, codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(hb)}, &h))
	assert.Equal(t, grpcapi.ClientType_PRODUCER, h.GetClientType())
}

// TestConnectionBuffersSmall: the endpoint's per-connection read buffer
// is below grpc-go's 32KiB default, so 1,000 idle connections do not hold
// 64MiB (the write buffer is pooled between writes: SharedWriteBuffer).
func TestConnectionBuffersSmall(t *testing.T) {
	assert.Less(t, grpcmod.ConnReadBuffer, 32<<10)
	assert.LessOrEqual(t, grpcmod.ConnWriteBuffer, 32<<10)
}

// TestEncodedMessagesSizedToFit: an encoded answer is held in a buffer
// little larger than itself until the transport has written it. With
// grpc-go's default pool a message of 33KiB to 1MiB took a 1MiB buffer,
// so 24 answers of a 64KiB message queued for consumers that stopped
// reading held 24MiB; here about 2.4MiB.
func TestEncodedMessagesSizedToFit(t *testing.T) {
	codec := grpcmod.SendCodec()
	resp := &grpcapi.ReceiveMessageResponse{Content: &grpcapi.ReceiveMessageResponse_Message{Message: &grpcapi.Message{
		Topic: res("T"), Body: make([]byte, 64<<10), SystemProperties: &grpcapi.SystemProperties{MessageId: "01ABCDEF"}}}}
	const n = 24
	held := make([]mem.BufferSlice, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		bs, err := codec.Marshal(resp)
		require.NoError(t, err)
		held = append(held, bs)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	size := proto.Size(resp)
	t.Logf("%d encoded answers of %d bytes: heap grew %d bytes", n, size, grown)
	assert.Less(t, grown, int64(n*size*2), "encoded answers hold buffers far larger than themselves")

	var back grpcapi.ReceiveMessageResponse
	require.NoError(t, codec.Unmarshal(held[0], &back))
	assert.Len(t, back.GetMessage().GetBody(), 64<<10, "an encoded answer decodes")
	for _, bs := range held {
		bs.Free()
	}
}
