// Package e2etrace is the broker's end-to-end timeline (issue 44): in a
// tracing build (go build -tags e2etrace) the remoting reader and the
// broker's send and pull paths record, per message, when its SEND frame
// was read, when it was stored, when the held pull waiting on its queue
// was found, when the pull answer carrying it was built and written, and
// when the consumer's next PULL frame for that queue was read. The events
// go to a fixed-size ring (Ring) dumped to a file (Dump) on SIGUSR1 and
// at shutdown; Analyze turns a dump into per-segment percentiles and
// attributes the slowest messages to GC cycles.
//
// Without the tag On is the constant false: every hook sits behind
// `if e2etrace.On`, so the untagged broker compiles to the same machine
// code as without the hooks (no clock read, no allocation, no call).
//
// The recorder is enabled by the environment of the tagged binary:
//
//	QUIVER_E2ETRACE=/path/to/dump       where dumps are written (required)
//	QUIVER_E2ETRACE_EVENTS=2097152      ring size in events (64 bytes each)
//
// and a dump is analysed with
//
//	go run ./bench/e2etrace [-gctrace broker-stderr.log] /path/to/dump
package e2etrace

// Kind says what an Event records.
type Kind uint8

// The events of a message's path, in the order they happen.
const (
	// KindRead: a SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE or PULL_MESSAGE
	// frame handed by the transport to the connection's dispatch (Peer,
	// Opaque; Aux is the request code).
	KindRead Kind = 1 + iota
	// KindStored: a message appended to the store, taken after the
	// store's Append returned and before held pulls are woken (Topic,
	// Queue, Offset).
	KindStored
	// KindSendDone: a send handler's put returned; links the request
	// (Peer, Opaque) to its messages (Topic, Queue, Offset up to Next).
	KindSendDone
	// KindPull: a PULL_MESSAGE parsed (Peer, Opaque, Topic, Queue,
	// Offset).
	KindPull
	// KindHeld: a pull parked on an empty queue (as KindPull).
	KindHeld
	// KindFound: a held pull found by a stored message, on the storing
	// goroutine (as KindPull; Next is the queue's max offset).
	KindFound
	// KindWritten: a pull answer carrying messages written to the
	// socket: T is when the write returned, Built when the answer was
	// read from the store and encoded (as KindPull; Offset up to Next are
	// the queue offsets it covers, Aux the records it carries).
	KindWritten
	kindEnd
)

var kindNames = [...]string{KindRead: "read", KindStored: "stored", KindSendDone: "send-done", KindPull: "pull",
	KindHeld: "held", KindFound: "found", KindWritten: "written"}

func (k Kind) String() string {
	if k > 0 && k < kindEnd {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one point of the timeline. T and Built are nanoseconds on the
// recorder's monotonic clock (Meta.EpochUnixNano is its zero on the wall
// clock); Topic indexes Meta.Topics.
type Event struct {
	T      int64
	Kind   Kind
	Topic  uint32
	Queue  int32
	Peer   uint64
	Opaque int32
	Aux    int32
	Offset int64
	Next   int64
	Built  int64
}

// eventWords is an event's size in 64-bit words (in the ring and the
// dump).
const eventWords = 7

// maxTopics bounds the topic ids an event carries (24 bits).
const maxTopics = 1 << 24

func (e *Event) pack(w *[eventWords]uint64) {
	w[0] = uint64(e.T)
	w[1] = e.Peer
	w[2] = uint64(e.Kind)<<56 | uint64(e.Topic&(maxTopics-1))<<32 | uint64(uint32(e.Queue))
	w[3] = uint64(uint32(e.Opaque))<<32 | uint64(uint32(e.Aux))
	w[4] = uint64(e.Offset)
	w[5] = uint64(e.Next)
	w[6] = uint64(e.Built)
}

func (e *Event) unpack(w *[eventWords]uint64) {
	*e = Event{
		T: int64(w[0]), Peer: w[1],
		Kind: Kind(w[2] >> 56), Topic: uint32(w[2]>>32) & (maxTopics - 1), Queue: int32(uint32(w[2])),
		Opaque: int32(uint32(w[3] >> 32)), Aux: int32(uint32(w[3])),
		Offset: int64(w[4]), Next: int64(w[5]), Built: int64(w[6]),
	}
}

// Request codes recorded by FrameRead (core/remoting's codes; a test
// checks they agree).
const (
	codeSendMessage      = 10
	codePullMessage      = 11
	codeSendMessageV2    = 310
	codeSendBatchMessage = 320
)

// traced reports whether FrameRead records a request of code.
func traced(code int32) bool {
	switch code {
	case codeSendMessage, codePullMessage, codeSendMessageV2, codeSendBatchMessage:
		return true
	}
	return false
}
