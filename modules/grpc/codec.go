package grpc

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/broker"
)

// A SendMessage request is counted on the wire before it is decoded: one
// of many small messages fits under gRPC's receive limit (max_message_size
// + 1MiB) yet decodes into one object per message (80,000 messages of a
// 5MB request are about 100MiB until the next GC) before the handler's
// count check would refuse it. The endpoint's codec counts the request's
// top-level messages fields first; over broker.MaxBatchMessages the
// request is decoded as empty, carrying only the count, and SendMessage
// refuses it as it refuses any batch over the limit. Everything else is
// the standard proto codec, with the endpoint's buffers (bufpool.go)
// in place of grpc-go's default pool.

// sendMessagesField is SendMessageRequest.messages' field number.
const sendMessagesField protowire.Number = 1

// refusedCountField is the unknown field a refused SendMessageRequest
// carries its message count in (never a field of the API: the highest
// number protobuf allows).
const refusedCountField protowire.Number = protowire.MaxValidNumber

// sendCodec is the server's codec: proto, with SendMessage requests
// counted before they are decoded.
type sendCodec struct{ std encoding.CodecV2 }

func newSendCodec() encoding.CodecV2 {
	return sendCodec{std: encoding.GetCodecV2(protocodec.Name)}
}

func (c sendCodec) Name() string { return protocodec.Name }

// Marshal encodes v into a buffer of the endpoint's pool (one of at most
// 1.5× its size; grpc-go's codec takes a 1MiB one for anything over
// 32KiB); messages of a few hundred bytes are plain allocations.
func (c sendCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.std.Marshal(v)
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := endpointBuffers.Get(size)
	b, err := proto.MarshalOptions{}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		endpointBuffers.Put(buf)
		return nil, fmt.Errorf("marshal %T: %w", v, err)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, endpointBuffers)}, nil
}

func (c sendCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.std.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(endpointBuffers)
	defer buf.Free()
	b := buf.ReadOnlyData()
	req, ok := v.(*grpcapi.SendMessageRequest)
	if !ok {
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("unmarshal %T: %w", v, err)
		}
		return nil
	}
	n, err := countField(b, sendMessagesField)
	if err != nil {
		return fmt.Errorf("send message request: %w", err)
	}
	if n > broker.MaxBatchMessages {
		req.Reset()
		req.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, refusedCountField, protowire.VarintType), uint64(n)))
		return nil
	}
	if err := proto.Unmarshal(b, req); err != nil {
		return fmt.Errorf("send message request: %w", err)
	}
	return nil
}

// countField counts the occurrences of the top-level field num in the
// wire bytes b, without decoding anything.
func countField(b []byte, num protowire.Number) (int, error) {
	count := 0
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return 0, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num {
			count++
		}
	}
	return count, nil
}

// refusedCount is the message count of a request the codec refused to
// decode (0: it was decoded).
func refusedCount(req *grpcapi.SendMessageRequest) int {
	b := req.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0
		}
		b = b[l:]
		if n == refusedCountField && typ == protowire.VarintType {
			v, vl := protowire.ConsumeVarint(b)
			if vl < 0 {
				return 0
			}
			return int(min(v, 1<<31))
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return 0
		}
		b = b[l:]
	}
	return 0
}
