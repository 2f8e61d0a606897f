// Package store is the storage seam: the interface every message store
// implements (the native CommitLog engine, Pebble, ...), its sentinel
// errors, and the descriptor plugins register with the kernel. The shared
// conformance suite lives in storetest.
//
// A store keeps messages in the RocketMQ stored layout (message.AppendStored)
// so that pull responses are the stored records concatenated. Every message
// belongs to a queue (topic + queue id) in which it gets a dense, increasing
// queue offset, and has a unique commit-log (physical) offset.
//
// # Ownership: what an implementation may keep
//
// The broker hands a store memory it is about to reuse, so nothing passed
// to a call may be kept once the call returns; an engine copies (or
// encodes) what it needs before returning:
//
//   - Append: the msgs slice is the caller's scratch, reused for the next
//     batch; each *message.Ext is the broker's (it writes the positions
//     into it afterwards); Body aliases the network frame the request
//     arrived in, which the transport recycles for the next request
//     (transport.FrameRecycler) as soon as the send handler returns; the
//     Properties map is rebuilt for the next message. Strings (Topic,
//     property values) are immutable and may be kept.
//   - Read: ReadOptions.Filter and Match are called only during the call.
//   - Metadata.SaveMeta: data is the caller's buffer.
//   - Replicator.AppendReplica: recs alias the replication connection's
//     read buffer.
//
// In the other direction, what a store returns: Read's records stay valid
// until the next Read into the same ReadResult (they may alias the
// result's buffer or an engine's mapped file, so callers must not write
// to them); Lookup and KeyIndexer.QueryByKey return records the caller
// owns. storetest.CheckBorrowedInputs (run by storetest.Run) checks these
// rules by scribbling over every input after the call returns.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/quivermq/quiver/core/message"
)

// Sentinel errors. Implementations wrap them with context.
var (
	ErrClosed           = errors.New("store: closed")
	ErrNotFound         = errors.New("store: not found")
	ErrOffsetOutOfRange = errors.New("store: offset out of range")
	ErrBadArgument      = errors.New("store: bad argument")
	ErrTooLarge         = errors.New("store: message too large")
	// ErrNotDurable is returned when a write could not be made durable (full
	// disk, I/O error). Nothing was acknowledged; the caller must not
	// report success.
	ErrNotDurable = errors.New("store: write not durable")
)

// CorruptionError reports damaged data found in a store file. Engines
// return it from reads that meet damage and list what they found (and
// skipped) through Verifier.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
	// Length is how many bytes the damage spans (0 when unknown).
	Length int64
	// Copy, when set, is the file the damaged bytes were copied to before
	// the engine skipped or cut them.
	Copy string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("store: corruption in %s at %d: %s", e.File, e.Offset, e.Reason)
}

// PropertyRecordCRC is the property RocketMQ 5 ends a stored record's
// properties with when enabledAppendPropCRC is on (MessageConst
// PROPERTY_CRC32): the CRC-32 of every byte of the record before it, as 10
// decimal digits, least significant first. Engines that write it verify
// whole records with it; clients see it as one more property.
const PropertyRecordCRC = "__CRC32#"

// RecordCRCLen is the length of that property in a record: name, separator,
// 10 digits, separator (Java's CRC32_RESERVED_LEN).
const RecordCRCLen = len(PropertyRecordCRC) + 1 + 10 + 1

// Queue names one consume queue.
type Queue struct {
	Topic string
	ID    int32
}

func (q Queue) String() string { return fmt.Sprintf("%s/%d", q.Topic, q.ID) }

// Message is one message to append, with the tag code its consume-queue
// entry carries (the TAGS hash, or the delivery time for scheduled
// messages; the broker decides).
type Message struct {
	*message.Ext
	TagsCode int64
}

// Position is where an appended message landed.
type Position struct {
	CommitLogOffset int64
	Size            int32
	QueueOffset     int64
	StoreTimestamp  int64
}

// ReadStatus classifies a read like RocketMQ's GetMessageStatus.
type ReadStatus int

// Read outcomes.
const (
	Found ReadStatus = iota
	NoMatchedMessage
	NoMessageInQueue
	OffsetTooSmall
	OffsetOverflowOne
	OffsetOverflowBadly
	OffsetFoundNull
)

var statusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL"}

func (s ReadStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("ReadStatus(%d)", int(s))
}

// ReadOptions bound one read.
type ReadOptions struct {
	// MaxMessages and MaxBytes bound what is returned (defaults 32 and
	// 256 KiB). At least one message is returned when any matches.
	MaxMessages int
	MaxBytes    int
	// Filter, when set, pre-filters consume-queue entries by tag code;
	// entries it rejects are skipped but still advance NextOffset.
	Filter func(tagsCode int64) bool
	// Match, when set, is checked on each candidate record after Filter
	// (exact tag or property check); rejected records are skipped.
	Match func(rec []byte) bool
	// MaxScan bounds how many consume-queue entries one read scans
	// (default max(800, MaxMessages*20)).
	MaxScan int
}

// ReadResult is filled by Read. Records are complete stored records; they
// stay valid until the next Read into the same result.
type ReadResult struct {
	Status  ReadStatus
	Records [][]byte
	// Runs, when an engine sets it, holds Records' bytes as few contiguous
	// slices, in order (their concatenation is Records'): a pull answer
	// writes them instead of one part per record. Engines that do not
	// know leave it empty.
	Runs         [][]byte
	QueueOffsets []int64
	NextOffset   int64
	MinOffset    int64
	MaxOffset    int64
	// Bytes is the total size of Records.
	Bytes int
	buf   []byte
}

// Reset empties r for reuse, keeping its buffers.
func (r *ReadResult) Reset() {
	r.Status = Found
	r.Records = r.Records[:0]
	r.Runs = r.Runs[:0]
	r.QueueOffsets = r.QueueOffsets[:0]
	r.NextOffset, r.MinOffset, r.MaxOffset, r.Bytes = 0, 0, 0, 0
	r.buf = r.buf[:0]
}

// Buffer returns scratch space owned by r that implementations may use to
// hold record bytes (it is reused across reads).
func (r *ReadResult) Buffer(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, 0, n)
	}
	return r.buf[:0]
}

// SetBuffer keeps b as r's scratch space.
func (r *ReadResult) SetBuffer(b []byte) { r.buf = b }

// Store is the storage seam. All methods are safe for concurrent use.
type Store interface {
	// Append stores msgs in order. Messages of one call that share a queue
	// get consecutive queue offsets. On success every message is readable
	// and durable within the promise of the flush mode; on error none is
	// acknowledged (the error wraps ErrNotDurable when durability failed).
	// Append keeps nothing of msgs after it returns: bodies alias recycled
	// network frames (see the package doc, "Ownership").
	Append(ctx context.Context, msgs []Message) ([]Position, error)
	// Read reads queue q from offset, filling into.
	Read(ctx context.Context, q Queue, offset int64, opts ReadOptions, into *ReadResult) error
	// Lookup returns the stored record at a commit-log offset, in a slice
	// the caller owns.
	Lookup(ctx context.Context, commitLogOffset int64) ([]byte, error)
	// Offsets returns the queue's min offset and its next offset to write
	// (max). A queue never written has 0, 0.
	Offsets(q Queue) (min, max int64, err error)
	// OffsetByTime returns the offset of the first message stored at or
	// after ts (epoch ms), or max when none is.
	OffsetByTime(ctx context.Context, q Queue, ts int64) (int64, error)
	// DeleteBefore drops whole stored units (segments) whose messages were
	// all stored before t; it returns how many bytes were freed.
	DeleteBefore(ctx context.Context, t time.Time) (int64, error)
	// Close flushes and releases the store.
	Close() error
}

// KeyIndexer is implemented by stores that index UNIQ_KEY and KEYS.
type KeyIndexer interface {
	// QueryByKey returns up to max records of topic whose KEYS or UNIQ_KEY
	// contain key and whose store time is within [begin, end] (ms).
	QueryByKey(ctx context.Context, topic, key string, begin, end int64, max int) ([][]byte, error)
}

// SyncStats are a store's fsync figures since it opened.
type SyncStats struct {
	Syncs int64
	Total time.Duration
	Max   time.Duration
}

// SyncObserver is implemented by stores that time their fsyncs (metrics).
type SyncObserver interface {
	SyncStats() SyncStats
}

// Flusher is implemented by stores that can be flushed on demand.
type Flusher interface {
	Flush(ctx context.Context) error
}

// TopicDeleter is implemented by stores that can drop a topic's queues.
type TopicDeleter interface {
	DeleteTopic(ctx context.Context, topic string) error
}

// QueueLister is implemented by stores that can list their queues.
type QueueLister interface {
	Queues() []Queue
}

// Metadata is implemented by stores that keep the broker's small state
// documents (topic config, consumer offsets, ...) themselves. Brokers fall
// back to files in the data directory otherwise.
type Metadata interface {
	LoadMeta(name string) ([]byte, error) // ErrNotFound when absent
	// SaveMeta stores a copy of data: the caller reuses its buffer.
	SaveMeta(name string, data []byte) error
}

// LogReader is implemented by stores with one commit log that a replica
// can follow (master side of replication, modules/ha).
type LogReader interface {
	// LogOffsets returns the first retained commit-log offset and the
	// offset the next record will be written at.
	LogOffsets() (min, max int64)
	// ReadLog returns whole stored records from commit-log offset from on
	// (from must be a record boundary, as returned by an earlier ReadLog
	// or LogOffsets), at least one when any is stored there and about
	// maxBytes in all, and the offset after the last one. Padding between
	// storage units is skipped.
	ReadLog(ctx context.Context, from int64, maxBytes int) (recs [][]byte, next int64, err error)
}

// Replicator is implemented by stores that can append records read from
// another store's LogReader (slave side of replication). The records keep
// their commit-log offsets, queue offsets and store times; the first must
// sit at this store's LogOffsets max (or where the source started a new
// storage unit after it), and each must carry its queue's next offset.
// Consume queues and indexes are rebuilt from the records. recs alias the
// caller's read buffer: nothing of them may be kept after the call.
type Replicator interface {
	AppendReplica(ctx context.Context, recs [][]byte) error
}

// VerifyOptions bound one Verifier.Verify pass.
type VerifyOptions struct {
	// BytesPerSecond rate-limits the reading (0: as fast as the disk
	// allows); a background scrub sets it so it does not starve serving.
	BytesPerSecond int64
}

// VerifyReport is what one Verify pass found.
type VerifyReport struct {
	Records int64 // records read and checked
	Bytes   int64 // bytes read
	// Entries is the number of index (consume-queue) entries checked
	// against the records they point at.
	Entries int64
	// Damage lists what this pass found, in store order.
	Damage []CorruptionError
}

// Verifier is implemented by stores that can check their data (the
// scrubber, mq store verify) and report the damage they met and skipped.
type Verifier interface {
	// Verify reads every stored record, checks its checksums and the
	// index entries pointing at it, and reports what it found. It does not
	// stop at damage; it returns an error only when it cannot go on
	// (closed store, cancelled context, I/O error).
	Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error)
	// Damage lists the damage found since the store opened (by recovery,
	// reads and Verify), oldest first; Skipped counts every record or
	// entry skipped because of damage (a damaged record a read meets
	// twice counts twice).
	Damage() []CorruptionError
	Skipped() int64
}

// FlushMode selects when appends are acknowledged.
type FlushMode string

// Flush modes.
const (
	FlushAsync FlushMode = "async"
	FlushSync  FlushMode = "sync"
)

// Settings are the engine-independent storage keys (storage.*).
type Settings struct {
	Dir           string
	Flush         FlushMode
	FlushInterval time.Duration
	Retention     time.Duration
	// MaxMessageSize bounds one stored record. The kernel sets it to
	// storage.max_message_size, the largest body (Java's maxMessageSize),
	// plus RecordReserve.
	MaxMessageSize int
}

// RecordReserve is the room a record has beyond its body for the header,
// topic and properties: RocketMQ's CommitLog encoder accepts records of up
// to maxMessageSize + 64 KiB, so a body of exactly maxMessageSize is
// stored whatever its topic and properties (properties are at most 32 KiB,
// a topic 127 bytes).
const RecordReserve = 64 << 10

// Deps are what the kernel hands a storage engine.
type Deps struct {
	Logger   *slog.Logger
	Settings Settings
}

// Provider describes one storage engine plugin (fx group "storage").
// Write one with Define (a typed config, no conversion by hand).
type Provider interface {
	ID() string
	NewConfig() any
	Open(ctx context.Context, cfg any, deps Deps) (Store, error)
}
