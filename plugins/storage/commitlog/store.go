// Package commitlog is Quiver's native storage engine, laid out like
// RocketMQ's DefaultMessageStore: one append-only commit log shared by all
// topics, in fixed-size segment files named by their 20-digit start offset,
// and per topic/queue consume queues of 20-byte entries pointing into it.
//
// Layout under the data directory:
//
//	commitlog/00000000000000000000        segments, segment_size bytes each
//	consumequeue/<topic>/<queueId>/<off>  consume-queue files, named by byte offset
//	checkpoint                            flushed commit-log offset
//	config/<name>.json                    metadata documents (store.Metadata)
//
// Writes are serialized by one mutex; the records of one Append (and of
// the Append calls queued behind it: group write) are encoded straight
// into a shared memory map of the active segment (writemap.go; with a
// pwrite per touched segment where mapping is not possible), then
// dispatched to the consume queues' in-memory tails. A consume-queue entry
// is published only after its record is in the page cache, so readers
// (pread) never see half-written messages.
//
// Durability: in async mode a background loop fsyncs every FlushInterval;
// in sync mode Append returns once an fdatasync that started after its
// bytes were written has succeeded, one fdatasync serving every appender
// below it, several in flight (group commit, groupcommit.go). Each flush
// ends with a checkpoint: the commit-log offset below which the log and
// the consume-queue entries are durable. Open scans from there (or from the
// start of the last segment), verifying records, cutting a torn tail and
// re-dispatching consume-queue entries.
//
// v1 limits: the key index lives in memory and is rebuilt by scanning the
// whole log on open (key_index: false skips it); tag codes of records
// re-dispatched by recovery are recomputed (TAGS hash, or the delivery time
// from the default delay-level table for SCHEDULE_TOPIC_XXXX), not the
// broker's.
package commitlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// minSegmentSize is the smallest segment Open accepts (tests use small
// segments to exercise rolling and retention).
const minSegmentSize = 4 << 10

// defaultFlushInterval is used when Settings.FlushInterval is not set.
const defaultFlushInterval = 500 * time.Millisecond

// blankMagic is message.BlankMagicCode as a variable (its uint32
// conversion is not constant).
var blankMagic = message.BlankMagicCode

// maxKeptWriteBuffer bounds the append buffer kept between calls.
const maxKeptWriteBuffer = 8 << 20

// Interface guards.
var (
	_ store.Store        = (*Store)(nil)
	_ store.Flusher      = (*Store)(nil)
	_ store.QueueLister  = (*Store)(nil)
	_ store.TopicDeleter = (*Store)(nil)
	_ store.Metadata     = (*Store)(nil)
	_ store.KeyIndexer   = (*Store)(nil)
)

// Store is the CommitLog engine. All methods are safe for concurrent use.
type Store struct {
	cfg      Config
	log      *slog.Logger
	dir      string
	clDir    string
	cqDir    string
	metaDir  string
	mode     store.FlushMode
	syncMode bool
	interval time.Duration
	maxMsg   int
	segSize  int64
	perFile  int64

	// mu serializes appends (and topic deletion). The fields below it are
	// the writer's state and scratch.
	mu      sync.Mutex
	wmap    writeMap
	pop     *populator // async mode only, where the writer maps segments (populator.go)
	wbuf    []byte     // records to pwrite when the segment is not mapped
	propBuf []byte     // encoded properties of a request's messages, one after another
	propEnd []int      // end of each message's properties in propBuf
	sizes   []int      // stored size of each message of a request
	disp    []dispatch
	touched []*consumeQueue
	chunks  []chunk
	created []*segment
	group   []*appendReq
	lastQ   *consumeQueue // the queue of the last message (most appends go to one)
	lastTS  int64

	// pending holds the Append calls waiting for mu (group write); npend
	// is its length.
	pendMu  sync.Mutex
	pending []*appendReq
	npend   atomic.Int32

	// wrote is the end of the written and dispatched commit log: every
	// byte below it is readable.
	wrote atomic.Int64
	// minPhys is the first commit-log offset still stored.
	minPhys atomic.Int64

	segMu sync.RWMutex
	segs  []*segment // contiguous, oldest first; the last is active

	queues *store.QueueTable[consumeQueue]

	dirtyMu   sync.Mutex
	dirtyQ    map[*consumeQueue]struct{} // queues with a tail to write
	dirtyCQ   map[*cqFile]struct{}
	dirtyDirs map[string]struct{}

	// flushMu guards the group-commit state after it (groupcommit.go).
	flushMu   sync.Mutex
	flushed   int64
	flushErr  error        // sticky: once set, appends fail with ErrNotDurable
	rounds    []*syncRound // started, not settled, in start order
	gathering *syncRound   // the next round, gathering writers
	startedTo int64        // target of the last started round
	lastSync  time.Duration
	expect    int           // writers the next round may expect (gatherLocked)
	gatherMax time.Duration // maxGather (tests lengthen it)
	inAppend  atomic.Int32  // sync mode: Append calls encoding or writing
	syncs     atomic.Int64  // commit-log fsync rounds, for tests
	syncStats syncTimer
	writes    atomic.Int64 // group writes, for tests
	pwrites   atomic.Int64 // pwrites of group writes, for tests
	ra        readAhead    // Read's span reads: counter and A/B switch (read_span.go)

	ckMu    sync.Mutex
	ckFile  *os.File
	ckOff   int64 // last offset written to the checkpoint
	ckValid bool

	lock *os.File // holds the directory lock

	keys *keyIndex
	// fullScan makes recovery scan the whole log even without the key
	// index (mq store verify).
	fullScan bool
	damage   damageLog

	// syncFault, when set (tests), fails the fdatasyncs of segments and
	// consume queues with the error it returns for their path.
	syncFault func(path string) error

	// full is the full-disk state (diskfull.go): a condition that clears
	// when space returns, unlike flushErr.
	full fullState
	// floors holds deleted topics' floors (scan.go), guarded by mu.
	floors map[string]int64

	retMu  sync.Mutex // serializes DeleteBefore
	metaMu sync.Mutex

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

type dispatch struct {
	cq       *consumeQueue
	phys     int64
	size     int32
	tagsCode int64
}

// Open opens (creating if needed) the store in deps.Settings.Dir and
// recovers it. It can be used without fx.
func Open(cfg *Config, deps store.Deps) (*Store, error) {
	if cfg == nil {
		cfg = NewConfig()
	}
	c := *cfg
	set := deps.Settings
	switch {
	case c.SegmentSize < minSegmentSize:
		return nil, fmt.Errorf("commitlog: segment_size %d is below %d: %w", c.SegmentSize, minSegmentSize, store.ErrBadArgument)
	case c.CQEntriesPerFile < 1:
		return nil, fmt.Errorf("commitlog: cq_entries_per_file %d is below 1: %w", c.CQEntriesPerFile, store.ErrBadArgument)
	case set.Dir == "":
		return nil, fmt.Errorf("commitlog: no data directory: %w", store.ErrBadArgument)
	}
	mode := set.Flush
	switch mode {
	case "":
		mode = store.FlushAsync
	case store.FlushAsync, store.FlushSync:
	default:
		return nil, fmt.Errorf("commitlog: flush mode %q is neither async nor sync: %w", mode, store.ErrBadArgument)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		cfg:       c,
		log:       log,
		dir:       set.Dir,
		clDir:     filepath.Join(set.Dir, "commitlog"),
		gatherMax: maxGather,
		cqDir:     filepath.Join(set.Dir, "consumequeue"),
		metaDir:   filepath.Join(set.Dir, "config"),
		mode:      mode,
		syncMode:  mode == store.FlushSync,
		interval:  set.FlushInterval,
		maxMsg:    set.MaxMessageSize,
		segSize:   int64(c.SegmentSize),
		perFile:   int64(c.CQEntriesPerFile),
		floors:    map[string]int64{},
		dirtyQ:    map[*consumeQueue]struct{}{},
		dirtyCQ:   map[*cqFile]struct{}{},
		dirtyDirs: map[string]struct{}{},
		stop:      make(chan struct{}),
	}
	s.queues = store.NewQueueTable(func(q store.Queue) *consumeQueue {
		return newConsumeQueue(q, filepath.Join(s.cqDir, q.Topic, fmt.Sprint(q.ID)), s.perFile)
	})
	if !s.syncMode {
		s.pop = newPopulator() // the writer maps segments (writemap.go)
	}
	if s.interval <= 0 {
		s.interval = defaultFlushInterval
	}
	if s.maxMsg <= 0 {
		s.maxMsg = message.DefaultMaxMessageSize
	}
	if c.KeyIndex {
		s.keys = newKeyIndex()
	}
	// The store's directory, and any parent created for it, is made
	// durable (parents fsynced): a power loss soon after the first start
	// must not lose the directory entry and with it the whole store.
	if err := durable.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("commitlog: create %s: %w", s.dir, err)
	}
	lock, err := lockDir(s.dir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.checkpoint(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.wg.Add(1)
	go s.checkpointLoop()
	if c.ScrubInterval > 0 {
		s.wg.Add(1)
		go s.scrubLoop(c.ScrubInterval, max(int64(c.ScrubRate), 1<<20))
	}
	if s.pop != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pop.run(s.stop)
		}()
	}
	s.log.Info("commitlog opened", "dir", s.dir, "flush", string(s.mode), "min", s.minPhys.Load(), "max", s.wrote.Load(), "queues", s.queues.Len())
	return s, nil
}

// appendReq is one Append call waiting for the writer.
type appendReq struct {
	msgs []store.Message
	pos  []store.Position
	one  [1]store.Position // pos of a one-message call (no second allocation)
	end  int64             // end of the request's last record
	err  error
	done bool // guarded by Store.mu
}

// maxGroup bounds how many waiting Append calls one writer pass takes.
const maxGroup = 64

// Append implements store.Store.
//
// Calls that arrive while another is writing are written together (group
// write): whoever gets the write lock encodes every waiting call into one
// buffer and writes it with one pwrite; each call still succeeds or fails
// on its own.
func (s *Store) Append(ctx context.Context, msgs []store.Message) ([]store.Position, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i := range msgs {
		if err := checkMessage(&msgs[i]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("commitlog: append: %w", err)
	}
	req := &appendReq{msgs: msgs}
	if s.syncMode {
		s.inAppend.Add(1)
	}
	if s.mu.TryLock() {
		// Nobody writing: no queue to go through, but take whoever queued
		// meanwhile.
		group := append(s.group[:0], req) //nolint:gocritic // reuses s.group's array; s.group is reset after the group is written
		if s.npend.Load() > 0 {
			group = s.takePending(group)
		}
		s.writeGroup(group)
		clear(group)
		s.group = group[:0]
	} else {
		s.pendMu.Lock()
		s.pending = append(s.pending, req)
		s.npend.Store(int32(len(s.pending)))
		s.pendMu.Unlock()
		s.mu.Lock()
		// One pass takes at most maxGroup calls: with more queued, req
		// may be behind them, so keep writing groups until it is done.
		for !req.done {
			group := s.takePending(s.group[:0])
			s.writeGroup(group)
			clear(group)
			s.group = group[:0]
		}
	}
	s.mu.Unlock()
	if s.syncMode {
		s.inAppend.Add(-1)
	}
	if req.err != nil {
		return nil, req.err
	}
	if s.mode == store.FlushSync {
		if err := s.waitDurable(ctx, req.end); err != nil {
			return nil, err
		}
	}
	return req.pos, nil
}

// takePending moves up to maxGroup queued calls to group. Called with
// s.mu held.
func (s *Store) takePending(group []*appendReq) []*appendReq {
	s.pendMu.Lock()
	k := min(len(s.pending), maxGroup)
	group = append(group, s.pending[:k]...)
	n := copy(s.pending, s.pending[k:])
	clear(s.pending[n:])
	s.pending = s.pending[:n]
	s.npend.Store(int32(n))
	s.pendMu.Unlock()
	return group
}

// writeGroup appends the requests' messages and marks each request done.
// Called with s.mu held.
func (s *Store) writeGroup(group []*appendReq) {
	var err error
	switch {
	case s.closed.Load():
		err = fmt.Errorf("commitlog: append: %w", store.ErrClosed)
	default:
		if ferr := s.failure(); ferr != nil {
			err = fmt.Errorf("commitlog: append after earlier failure: %w: %w", store.ErrNotDurable, ferr)
		} else {
			// While a consume-queue tail waits for space, write it first.
			err = s.fullRefusal()
		}
	}
	if err == nil {
		s.appendLocked(group)
	}
	for _, r := range group {
		if err != nil {
			r.err = err
		}
		r.done = true
	}
}

func checkMessage(m *store.Message) error {
	switch {
	case m.Ext == nil:
		return fmt.Errorf("commitlog: append: nil message: %w", store.ErrBadArgument)
	case m.QueueID < 0:
		return fmt.Errorf("commitlog: append: queue id %d: %w", m.QueueID, store.ErrBadArgument)
	}
	return checkTopic(m.Topic)
}

func checkTopic(topic string) error {
	switch {
	case topic == "", topic == ".", topic == "..":
		return fmt.Errorf("commitlog: topic %q: %w", topic, store.ErrBadArgument)
	case len(topic) > message.MaxTopicLength:
		return fmt.Errorf("commitlog: topic of %d bytes is over %d: %w", len(topic), message.MaxTopicLength, store.ErrBadArgument)
	case strings.ContainsAny(topic, "/\\\x00"):
		return fmt.Errorf("commitlog: topic %q has a path separator: %w", topic, store.ErrBadArgument)
	}
	return nil
}

// chunk is the part of one group write that goes to one segment, from pos
// up to wpos; where the segment is not mapped, its bytes are
// wbuf[start:end], to pwrite at pos.
type chunk struct {
	seg        *segment
	base       int64
	pos, wpos  int64
	start, end int
	mapped     bool
}

// appendLocked encodes, writes and dispatches the messages of the
// requests, setting each request's positions or error. A request with a
// bad message fails alone, before any of it is encoded; a write failure
// fails them all. Called with s.mu held.
func (s *Store) appendLocked(group []*appendReq) {
	now := time.Now().UnixMilli()
	if now < s.lastTS {
		now = s.lastTS // keep store time monotonic so OffsetByTime can bisect
	}
	start := s.wrote.Load()
	active := s.activeSegment()
	s.chunks = append(s.chunks[:0], chunk{seg: active, base: active.base, pos: start - active.base, wpos: start - active.base})
	s.wbuf = s.wbuf[:0]
	s.disp = s.disp[:0]
	s.touched = s.touched[:0]
	s.created = s.created[:0]
	defer func() {
		for _, cq := range s.touched {
			cq.touched = false
			cq.pend = cq.pend[:0]
		}
		if cap(s.wbuf) > maxKeptWriteBuffer {
			s.wbuf = nil
		}
		if cap(s.propBuf) > maxKeptWriteBuffer {
			s.propBuf = nil
		}
		clear(s.chunks)
		s.chunks = s.chunks[:0]
		clear(s.created)
		s.created = s.created[:0]
	}()
	live, err := s.encodeGroup(group, now)
	if err == nil && live > 0 {
		// Where the segment is not mapped: one pwrite per segment.
		for i := range s.chunks {
			ch := &s.chunks[i]
			if ch.end == ch.start {
				continue
			}
			if _, werr := ch.seg.f.WriteAt(s.wbuf[ch.start:ch.end], ch.pos); werr != nil {
				err = fmt.Errorf("commitlog: write segment %s: %w", ch.seg.name(), werr)
				break
			}
			s.pwrites.Add(1)
		}
	}
	if err != nil {
		// Nothing of the group is published: cut what it wrote so that
		// recovery cannot bring it back. A full disk clears by itself:
		// the next append tries again (diskfull.go).
		if isNoSpace(err) {
			s.noteFull(nil, err)
		}
		s.undoWrite(s.chunks, s.created)
		err = fmt.Errorf("commitlog: append: %w: %w", store.ErrNotDurable, err)
		for _, cq := range s.touched {
			cq.next = cq.saved
		}
		for _, r := range group {
			if r.err == nil {
				r.pos, r.err = nil, err
			}
		}
		return
	}
	if live == 0 {
		return
	}
	s.writes.Add(1)
	last := &s.chunks[len(s.chunks)-1]
	end := last.base + last.wpos

	// Dispatch to the consume queues: the entries go to each queue's
	// in-memory tail (written out every cqTailFlush bytes and at each
	// checkpoint) and max is published after them.
	flushErr := s.dispatchEntries()
	if flushErr == nil {
		s.noteWritten()
	}
	for i := range s.chunks {
		s.chunks[i].seg.lastTS.Store(now)
	}
	if s.keys != nil {
		s.keys.mu.Lock()
		for _, r := range group {
			for i := range r.pos {
				s.keys.addLocked(r.msgs[i].Topic, r.msgs[i].Properties, r.pos[i].CommitLogOffset)
			}
		}
		s.keys.mu.Unlock()
	}
	s.lastTS = now
	s.wrote.Store(end)
	if flushErr != nil {
		// The records are in the commit log and readable, but their index
		// cannot be written: stop accepting writes; recovery rebuilds it.
		flushErr = fmt.Errorf("commitlog: dispatch: %w: %w", store.ErrNotDurable, flushErr)
		s.setFailure(flushErr)
		for _, r := range group {
			if r.err == nil {
				r.pos, r.err = nil, flushErr
			}
		}
	}
}

// dispatchEntries moves the entries of s.disp to their consume queues'
// in-memory tails (a full tail is written out) and marks the touched
// queues for the next checkpoint. It returns the first tail write error;
// a tail that cannot be written for lack of space is not an error of this
// append (its entries stay in the tail, readable) but stops the next ones
// until it is written (diskfull.go). appendLocked and appendReplicaLocked
// both dispatch through it, before they publish the new end (wrote).
//
// The queues are marked after their entries are in the tails: a
// checkpoint running meanwhile may take a mark as soon as it is set, and
// must then find the entries to write. Marked first, a checkpoint could
// take the mark of a still empty tail (its offset, read before the end
// was published, did not cover the records, so it was right to write
// nothing), and the next checkpoint, whose offset covers them, found no
// mark and vouched for entries left in memory.
func (s *Store) dispatchEntries() error {
	for _, d := range s.disp {
		var e [cqEntrySize]byte
		putEntry(e[:], d.phys, d.size, d.tagsCode)
		d.cq.pend = append(d.cq.pend, e[:]...)
	}
	var flushErr error
	for _, cq := range s.touched {
		if len(cq.pend) == 0 {
			continue
		}
		if cq.appendTail(cq.pend, cq.next) && flushErr == nil {
			if err := s.flushTail(cq); isNoSpace(err) {
				s.noteFull(cq, err)
			} else {
				flushErr = err
			}
		}
	}
	s.dirtyMu.Lock()
	for _, cq := range s.touched {
		s.dirtyQ[cq] = struct{}{}
	}
	s.dirtyMu.Unlock()
	return flushErr
}

// encodeGroup encodes the requests' records at the end of the log,
// rolling segments as needed, and assigns their queue offsets. A request
// that fails its checks fails alone; the error returned (a segment that
// cannot be created, mapped pages without space, a fault while writing
// them) fails the group. It returns how many requests were encoded.
func (s *Store) encodeGroup(group []*appendReq, now int64) (live int, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	for _, r := range group {
		if err := s.sizeRequest(r); err != nil {
			r.pos, r.err = nil, err
			continue
		}
		if len(r.msgs) == 1 {
			r.pos = r.one[:]
		} else {
			r.pos = make([]store.Position, len(r.msgs))
		}
		for i := range r.msgs {
			m := &r.msgs[i]
			size := int64(s.sizes[i])
			props := s.propBuf[s.propEnd[i]-s.propLen(i) : s.propEnd[i]]
			cq := s.writerQueue(m.Topic, m.QueueID)
			if !cq.touched {
				cq.touched, cq.saved = true, cq.next
				s.touched = append(s.touched, cq)
			}
			if ch := &s.chunks[len(s.chunks)-1]; ch.wpos+size+blankSize > s.segSize {
				// Close the segment with an end-of-file blank and roll.
				next, blank := ch.base+s.segSize, uint32(s.segSize-ch.wpos)
				b, err := s.reserve(blankSize)
				if err != nil {
					return live, err
				}
				be.PutUint32(b, blank)
				be.PutUint32(b[4:], uint32(blankMagic))
				seg, err := s.createSegment(next)
				if err != nil {
					return live, err
				}
				s.created = append(s.created, seg)
				s.chunks = append(s.chunks, chunk{seg: seg, base: seg.base, start: len(s.wbuf), end: len(s.wbuf)})
			}
			ch := &s.chunks[len(s.chunks)-1]
			phys := ch.base + ch.wpos
			b, err := s.reserve(size)
			if err != nil {
				return live, err
			}
			rec, err := message.AppendStored(b[:0], m.Ext, props)
			if err != nil || len(rec) != len(b) || &rec[0] != &b[0] {
				// sizeRequest checked what AppendStored checks.
				return live, fmt.Errorf("commitlog: encode a record of %d bytes for %s: %d bytes, %v", size, cq.q, len(rec), err)
			}
			message.PatchStored(rec, cq.next, phys, now)
			sealRecord(rec)
			r.pos[i] = store.Position{CommitLogOffset: phys, Size: int32(size), QueueOffset: cq.next, StoreTimestamp: now}
			s.disp = append(s.disp, dispatch{cq: cq, phys: phys, size: int32(size), tagsCode: m.TagsCode})
			cq.next++
		}
		ch := &s.chunks[len(s.chunks)-1]
		r.end = ch.base + ch.wpos
		live++
	}
	return live, nil
}

// sizeRequest encodes the properties of r's messages into s.propBuf and
// computes their stored sizes, checking every limit AppendStored and the
// segment impose. Called with s.mu held.
func (s *Store) sizeRequest(r *appendReq) error {
	s.propBuf, s.propEnd, s.sizes = s.propBuf[:0], s.propEnd[:0], s.sizes[:0]
	limit := min(int64(s.maxMsg), s.segSize-blankSize)
	for i := range r.msgs {
		m := &r.msgs[i]
		k := len(s.propBuf)
		s.propBuf = appendProps(s.propBuf, m.Properties)
		s.propBuf = appendCRCPlaceholder(s.propBuf, k)
		pl := len(s.propBuf) - k
		q := store.Queue{Topic: m.Topic, ID: m.QueueID}
		if pl > message.MaxPropertiesLength {
			return fmt.Errorf("commitlog: append to %s: %w: %w: %d bytes", q, store.ErrBadArgument, message.ErrBadProperty, pl)
		}
		size := message.StoredSize(m.Ext, pl)
		if int64(size) > limit {
			return fmt.Errorf("commitlog: append: record of %d bytes to %s is over the %d byte limit: %w", size, q, limit, store.ErrTooLarge)
		}
		s.propEnd = append(s.propEnd, len(s.propBuf))
		s.sizes = append(s.sizes, size)
	}
	return nil
}

// propLen is the length of message i's properties in s.propBuf.
func (s *Store) propLen(i int) int {
	if i == 0 {
		return s.propEnd[0]
	}
	return s.propEnd[i] - s.propEnd[i-1]
}

// reserve returns the next n bytes of the group's last chunk to encode
// into: in the mapped segment, or in wbuf to pwrite. A record of at least
// pwriteMin bytes is pwritten even where the segment is mapped (writemap.go:
// on these machines a pwrite into new page-cache pages costs a fraction
// of populating the map's pages and copying into them). Called with s.mu
// held.
func (s *Store) reserve(n int64) ([]byte, error) {
	ch := &s.chunks[len(s.chunks)-1]
	pos := ch.wpos
	var b []byte
	if n < pwriteMin {
		var err error
		if b, err = s.room(ch.seg, pos, n); err != nil {
			return nil, err
		}
	}
	if b != nil {
		if ch.end != ch.start {
			// After pwritten bytes: the mapped ones are a chunk of their own.
			ch = s.nextChunk(ch)
		}
		ch.mapped = true
		ch.wpos += n
		return b, nil
	}
	if ch.mapped {
		// After mapped bytes (a big record, or a segment that could not
		// be mapped again): the pwritten ones are a chunk of their own.
		ch = s.nextChunk(ch)
	}
	k := len(s.wbuf)
	s.wbuf = slices.Grow(s.wbuf, int(n))[:k+int(n)]
	ch.end = len(s.wbuf)
	ch.wpos += n
	return s.wbuf[k : k+int(n) : k+int(n)], nil
}

// nextChunk starts a chunk of ch's segment where ch ends and returns it.
// Called with s.mu held.
func (s *Store) nextChunk(ch *chunk) *chunk {
	s.chunks = append(s.chunks, chunk{seg: ch.seg, base: ch.base, pos: ch.wpos, wpos: ch.wpos, start: len(s.wbuf), end: len(s.wbuf)})
	return &s.chunks[len(s.chunks)-1]
}

// writerQueue is queues.GetOrCreate for the writer, remembering the last queue.
// Called with s.mu held.
func (s *Store) writerQueue(topic string, id int32) *consumeQueue {
	if cq := s.lastQ; cq != nil && cq.q.ID == id && cq.q.Topic == topic {
		return cq
	}
	cq := s.queues.GetOrCreate(store.Queue{Topic: topic, ID: id})
	s.lastQ = cq
	return cq
}

// undoWrite returns the segments written by a failed append to their state
// before it: the bytes are cut off (which also frees their blocks) and new
// segments are removed. When that fails too, the store stops accepting
// writes.
func (s *Store) undoWrite(written []chunk, created []*segment) {
	for _, ch := range written {
		if ch.seg == nil {
			continue
		}
		err := ch.seg.f.Truncate(ch.pos)
		s.forgetPopulated(ch.seg, ch.pos)
		if err == nil {
			err = ch.seg.f.Truncate(s.segSize)
			if err == nil {
				continue
			}
			s.setFailure(fmt.Errorf("commitlog: undo write in %s: %w", ch.seg.name(), err))
		} else {
			s.setFailure(fmt.Errorf("commitlog: undo write in %s: %w", ch.seg.name(), err))
		}
	}
	if len(created) > 0 {
		s.segMu.Lock()
		s.segs = s.segs[:len(s.segs)-len(created)]
		s.segMu.Unlock()
		for _, seg := range created {
			if s.wmap.seg == seg {
				s.unmapWriter()
			}
			seg.f.Close()
			if err := os.Remove(seg.path); err != nil {
				s.setFailure(fmt.Errorf("commitlog: undo segment %s: %w", seg.name(), err))
			}
		}
	}
}

// Offsets implements store.Store.
func (s *Store) Offsets(q store.Queue) (int64, int64, error) {
	if s.closed.Load() {
		return 0, 0, fmt.Errorf("commitlog: offsets: %w", store.ErrClosed)
	}
	cq := s.queues.Get(q)
	if cq == nil {
		return 0, 0, nil
	}
	mn, mx := cq.offsets()
	return mn, mx, nil
}

// Queues implements store.QueueLister: the queues holding or having held
// messages, sorted by topic and id.
func (s *Store) Queues() []store.Queue {
	return s.queues.Sorted(func(cq *consumeQueue) bool { return cq.max.Load() > 0 })
}

// failure returns the sticky write failure, if any.
func (s *Store) failure() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if errors.Is(s.flushErr, store.ErrClosed) {
		return nil
	}
	return s.flushErr
}

// setFailure records a write or sync failure: nothing after it can be
// acknowledged until the store is reopened and recovered.
func (s *Store) setFailure(err error) {
	s.flushMu.Lock()
	s.failLocked(err)
	s.flushMu.Unlock()
}

// checkpointLoop flushes (async mode) and checkpoints every interval.
func (s *Store) checkpointLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	var last string // log a failure once, not every interval
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		err := s.checkpoint()
		switch {
		case err != nil && err.Error() != last:
			s.log.Error("commitlog: flush", "err", err)
			last = err.Error()
		case err == nil && last != "":
			s.log.Info("commitlog: flush works again")
			last = ""
		}
	}
}

// Flush implements store.Flusher: it syncs the commit log and the consume
// queues and writes the checkpoint.
func (s *Store) Flush(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("commitlog: flush: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commitlog: flush: %w", err)
	}
	if err := s.checkpoint(); err != nil {
		return fmt.Errorf("%w: %w", store.ErrNotDurable, err)
	}
	return nil
}

// Close implements store.Store. It flushes, stops the background
// goroutines and closes the files. It is safe to call more than once.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Wait for an append in progress.
	s.mu.Lock() //nolint:staticcheck // SA2001: an empty critical section as a barrier
	//lint:ignore SA2001 empty critical section: a barrier for an append in progress.
	s.mu.Unlock() //nolint:staticcheck // SA2001 (see above)
	close(s.stop)
	s.wg.Wait()
	err := s.checkpoint()
	s.flushMu.Lock()
	if s.flushErr == nil {
		s.flushErr = store.ErrClosed
	}
	s.wakeGatheringLocked()
	s.flushMu.Unlock()
	s.retMu.Lock()
	s.closeFiles()
	s.retMu.Unlock()
	if err != nil {
		return fmt.Errorf("commitlog: close: %w", err)
	}
	s.log.Info("commitlog closed", "dir", s.dir, "max", s.wrote.Load())
	return nil
}

func (s *Store) closeFiles() {
	s.mu.Lock()
	s.unmapWriter()
	s.mu.Unlock()
	s.segMu.Lock()
	for _, seg := range s.segs {
		seg.f.Close()
	}
	s.segMu.Unlock()
	s.queues.Exclusive((*consumeQueue).closeFiles)
	s.ckMu.Lock()
	if s.ckFile != nil {
		s.ckFile.Close()
	}
	s.ckMu.Unlock()
	if s.lock != nil {
		s.lock.Close() // releases the lock
	}
}

// closedErr maps errors of files closed under a reader to ErrClosed.
func (s *Store) closedErr(op string, err error) error {
	if s.closed.Load() || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("commitlog: %s: %w", op, store.ErrClosed)
	}
	return err
}
