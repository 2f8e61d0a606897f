// Package transport is the seam between Quiver's remoting layer and the
// networks it runs over. A transport carries whole frames, not a byte
// stream: TCP frames them with a length prefix, QUIC may put each frame on a
// stream of its own, NATS carries one frame per NATS message. The
// RemotingCommand codec and request/response matching live above, in
// core/remoting.
//
// A frame, as passed through this package, is a RocketMQ remoting frame
// without its leading 4-byte total length: the int32 serialize-type/header
// length, the header and the body.
package transport

import (
	"context"
	"errors"
	"log/slog"
)

// Sentinel errors shared by every transport.
var (
	// ErrClosed is returned by operations on a closed Conn or Listener.
	ErrClosed = errors.New("transport: closed")
	// ErrFrameTooLarge is returned when a frame exceeds the configured limit,
	// either on write or when a peer declares a larger length. A write
	// refused with it wrote nothing: the connection stays usable.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrBadFrame reports a frame that cannot be a remoting frame.
	ErrBadFrame = errors.New("transport: malformed frame")
)

// Conn is a bidirectional, frame-oriented connection. ReadFrame is called
// from one goroutine at a time; WriteFrame is safe for concurrent use and
// writes a frame atomically with respect to other writers.
type Conn interface {
	// ReadFrame returns the next whole frame. The returned slice is owned by
	// the caller (until it hands it back through FrameRecycler, when the
	// Conn has it). It returns ErrClosed (possibly wrapped) or io.EOF once
	// the connection is gone.
	ReadFrame(ctx context.Context) ([]byte, error)
	// WriteFrame writes one frame made of the concatenation of parts. The
	// parts are borrowed: the Conn keeps nothing of them once WriteFrame
	// returns (remoting gives its header buffers back to a pool at once),
	// so a transport that sends later copies them first.
	WriteFrame(ctx context.Context, parts ...[]byte) error
	// LocalAddr and RemoteAddr are "host:port" strings; RemoteAddr is what
	// logs, ACL white lists and client tables show.
	LocalAddr() string
	RemoteAddr() string
	// Close fully closes the connection in both directions and unblocks
	// pending reads and writes. It is idempotent.
	Close() error
}

// FrameDeliverer is a Conn that can hand each received frame straight to a
// function, on the goroutine that read it, instead of queueing it for
// ReadFrame: a transport with a reader per stream (QUIC) saves a goroutine
// hand-off per frame that way. Remoting uses it where a Conn has it.
type FrameDeliverer interface {
	// DeliverFrames calls deliver with every frame received, those queued
	// before the call first, until the connection ends or ctx does. deliver
	// may run on several goroutines at once and owns the frame. It may
	// take its time (remoting runs a request's handler in it): a
	// FrameDeliverer holds up no other frame while one call runs. When it
	// returns an error the connection is closed and DeliverFrames returns
	// that error; otherwise it returns what ReadFrame would. It returns only
	// once no call of deliver is running, and none starts after. Call it
	// instead of ReadFrame, once.
	DeliverFrames(ctx context.Context, deliver func(frame []byte) error) error
}

// FrameRecycler is a Conn whose ReadFrame buffers can be used again:
// RecycleFrame takes back a frame ReadFrame returned once nothing refers
// to it (remoting does so after a handler that keeps nothing of its
// request). Frames it does not recognise are left to the garbage
// collector. This is why the layers above borrow request bodies (the
// ownership rules of store.Store.Append and auth.Request): a recycled
// frame holds the next request. A recycled frame must not change frames
// ReadFrame returned earlier and that were not recycled.
type FrameRecycler interface {
	RecycleFrame(frame []byte)
}

// FrameBatcher is a Conn that can write several frames with one flush
// (one write system call): remoting's writer goroutine uses it, where a
// Conn has it, to send the frames queued while the last write ran.
// WriteFrames writes frames in order, each the concatenation of its parts,
// atomically with respect to other writers; like WriteFrame it keeps
// nothing of the parts after it returns; a batch holding a frame above
// MaxFrameSize (the largest frame the Conn sends) fails whole with
// ErrFrameTooLarge before anything is written. transporttest checks both.
type FrameBatcher interface {
	WriteFrames(ctx context.Context, frames [][][]byte) error
	MaxFrameSize() int
}

// Listener accepts frame connections.
type Listener interface {
	Accept(ctx context.Context) (Conn, error)
	// Addr is the bound "host:port" (with the real port when 0 was asked).
	Addr() string
	Close() error
}

// Deps are what the kernel hands every transport.
type Deps struct {
	Logger *slog.Logger
	// MaxFrameSize bounds frames in both directions (remoting.max_frame_size).
	MaxFrameSize int
}

// Provider describes one transport plugin. The kernel collects providers
// from the fx group "transport" and picks them by ID. Write one with
// Define (a typed config, no conversion by hand).
type Provider interface {
	// ID is the configuration name: "tcp", "quic", "nats".
	ID() string
	// NewConfig returns a pointer to the transport's default configuration;
	// the kernel decodes the section transport.<ID> into it.
	NewConfig() any
	// Listen binds addr synchronously, so a bad address fails start-up.
	Listen(ctx context.Context, addr string, cfg any, deps Deps) (Listener, error)
	// Dial connects to addr.
	Dial(ctx context.Context, addr string, cfg any, deps Deps) (Conn, error)
}

// DefaultMaxFrameSize is RocketMQ's frame limit, 16 MiB.
const DefaultMaxFrameSize = 16 << 20
