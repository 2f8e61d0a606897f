// Package pebblestore is a storage engine on Pebble (an LSM key-value
// store): no pre-allocated files, a footprint bounded by a few settings,
// and the broker's metadata documents as files beside it (meta.go: damage
// to the database cannot take them). It has the semantics of
// the CommitLog engine: dense per-queue offsets, a global physical offset
// that grows by each record's size (so offsetMsgIds and Lookup work as
// with the commit log), records kept in the RocketMQ stored layout.
//
// The database lives in <storage.dir>/pebble. Key layout (be = big-endian,
// so keys sort numerically; topics never contain 0x00):
//
//	'q' topic 0x00 be32(qid) be64(offset)   -> be64(tagsCode) record
//	'm' be64(phys)                          -> be64(storeTS) be32(size) be32(qid) be64(offset) topic
//	'k' be32(bucket) topic 0x00 key 0x00 be64(phys) -> be64(storeTS) be32(qid) be64(offset)
//	'Q' topic 0x00 be32(qid)                -> be64(start): the queue's min offset
//	'M' name                                -> copy of a metadata document (meta.go)
//	'S' "version" / "min_phys"              -> format version / first stored phys
//
// A queue's entries are contiguous and hold the whole record, so a pull is
// one forward scan of one key range (no random reads), tag-code
// pre-filtering reads the 8 bytes in front of each record, and deleting a
// topic frees its records at once. The 'm' keys map a physical offset to
// its queue entry (Lookup is two point reads). The 'k' index of UNIQ_KEY
// and KEYS is bucketed by store hour (bucket = storeTS / 3600000), so
// QueryByKey visits only the buckets of its time range and retention drops
// whole buckets with one range deletion. Keys containing 0x00 are not
// indexed.
//
// On open, a queue's max offset is derived from its last entry (or its
// start when it has none), the next physical offset from the last 'm' key
// (or min_phys), so appends write nothing but their own keys plus a 'Q'
// key for a new queue.
//
// Appends and durability: every Append is one Pebble batch (entries,
// 'm' keys, key index) committed atomically. Offset assignment and the
// batch commit (WAL write + memtable insert, no fsync) happen under one
// mutex, so batches become visible in offset order: a reader never sees
// offset n+1 before n, and a failed commit cannot leave a hole behind a
// later success. Pebble commits concurrent batches in its own sequence
// order, which need not be ours, so committing outside the lock would let
// readers see gaps. The expensive part, the WAL fsync, is outside the
// lock: in sync mode each Append then asks for a WAL sync (an empty
// LogData with pebble.Sync); a WAL sync covers every record written before
// it, Pebble's commit pipeline folds concurrent sync requests into one
// fsync, and an Append whose batch a finished sync already covered skips
// its own. Records are readable once committed, before their fsync, as in
// the CommitLog engine. In async mode the WAL is synced every
// flush_interval and by Flush and Close.
//
// Pebble treats WAL and manifest I/O errors as fatal (it calls
// Logger.Fatalf or panics). The store's logger panics instead of exiting;
// a panic raised in an Append, sync, SaveMeta or retention call is turned
// into an error wrapping store.ErrNotDurable and the store refuses further
// writes until it is reopened. A panic in Pebble's background goroutines
// still ends the process, as with Pebble's default logger.
//
// Retention: DeleteBefore finds the first record stored at or after the
// cut (store time never decreases with the physical offset), then in one
// synced batch range-deletes the records and 'm' keys before it, each
// queue's entries below its new min, and the key-index buckets that end
// before it. Disk space comes back as Pebble compacts the deleted ranges
// (delete-only compactions drop sstables a tombstone covers). There is no
// disk-ratio trigger: the broker calls DeleteBefore.
package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// defaultFlushInterval is used when Settings.FlushInterval is not set.
const defaultFlushInterval = 500 * time.Millisecond

// maxKeptBuffer bounds the scratch buffers kept between appends.
const maxKeptBuffer = 1 << 20

// Interface guards.
var (
	_ store.Store        = (*Store)(nil)
	_ store.Flusher      = (*Store)(nil)
	_ store.QueueLister  = (*Store)(nil)
	_ store.TopicDeleter = (*Store)(nil)
	_ store.Metadata     = (*Store)(nil)
	_ store.KeyIndexer   = (*Store)(nil)
)

// Store is the Pebble engine. All methods are safe for concurrent use.
type Store struct {
	cfg      Config
	log      *slog.Logger
	dir      string
	mode     store.FlushMode
	interval time.Duration
	maxMsg   int
	db       *pebble.DB

	// life keeps db open under every operation: they hold it for reading,
	// Close for writing (Pebble panics when used after Close).
	life   sync.RWMutex
	closed atomic.Bool
	// space is the full-disk state (diskfull.go): while the disk is full
	// Append fails at once with ENOSPC instead of queueing behind a write
	// stall (the broker answers SERVICE_NOT_AVAILABLE, disk full), and
	// accepts appends again by itself once space returns.
	space spaceState
	// stallStart is when the current Pebble write stall began (UnixNano,
	// 0 when none); stallLog limits the stall lines.
	stallStart atomic.Int64
	stallLog   logLimiter

	// mu serializes offset assignment and batch commits (see the package
	// documentation). The fields below it are the writer's state.
	mu      sync.Mutex
	next    int64 // next physical offset
	lastTS  int64 // store time of the last append (kept monotonic)
	keyBuf  []byte
	valBuf  []byte
	propBuf []byte
	touched []*queueState

	// end is the published next physical offset: every record below it
	// is committed. minPhys is the first physical offset still stored.
	end     atomic.Int64
	minPhys atomic.Int64
	// lastStoreTS is lastTS published for readers.
	lastStoreTS atomic.Int64

	// committed counts committed batches; synced is the count the last
	// WAL sync covered.
	committed atomic.Int64
	synced    atomic.Int64
	syncs     atomic.Int64 // WAL sync requests issued, for tests

	queues *store.QueueTable[queueState]

	damage   damageLog
	walStops *walStops

	failMu sync.Mutex
	failed error // sticky: once set, writes fail with ErrNotDurable
	// horked: Pebble panicked inside a commit (see guard).
	horked atomic.Bool

	retMu sync.Mutex // serializes DeleteBefore, DeleteTopic
	stop  chan struct{}
	wg    sync.WaitGroup
}

// queueState is one queue's offsets. min and max are published with
// atomics; the fields after them belong to the writer (under Store.mu).
type queueState struct {
	q   store.Queue
	min atomic.Int64
	max atomic.Int64

	persisted bool  // its 'Q' key is written
	touched   bool  // in the append being built
	pend      int64 // next offset while building an append
}

func (qs *queueState) offsets() (int64, int64) {
	mn := qs.min.Load() // min first: min <= max at any instant
	return mn, qs.max.Load()
}

// Open opens (creating if needed) the store in deps.Settings.Dir/pebble.
// It can be used without fx.
func Open(cfg *Config, deps store.Deps) (*Store, error) {
	if err := checkArch(hostArch); err != nil {
		return nil, err // arch.go
	}
	if cfg == nil {
		cfg = NewConfig()
	}
	c := *cfg
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("pebblestore: %w: %w", store.ErrBadArgument, err)
	}
	set := deps.Settings
	if set.Dir == "" {
		return nil, fmt.Errorf("pebblestore: no data directory: %w", store.ErrBadArgument)
	}
	mode := set.Flush
	switch mode {
	case "":
		mode = store.FlushAsync
	case store.FlushAsync, store.FlushSync:
	default:
		return nil, fmt.Errorf("pebblestore: flush mode %q is neither async nor sync: %w", mode, store.ErrBadArgument)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		cfg:      c,
		log:      log,
		dir:      filepath.Join(set.Dir, "pebble"),
		mode:     mode,
		interval: set.FlushInterval,
		maxMsg:   set.MaxMessageSize,
		queues:   store.NewQueueTable(func(q store.Queue) *queueState { return &queueState{q: q} }),
		stop:     make(chan struct{}),
		walStops: &walStops{},
	}
	if s.interval <= 0 {
		s.interval = defaultFlushInterval
	}
	if s.maxMsg <= 0 {
		s.maxMsg = message.DefaultMaxMessageSize
	}
	if c.FS == nil {
		// Pebble fsyncs its own directory but not the parents it creates:
		// make them durable first, or a power loss soon after the first
		// start can lose the whole store.
		if err := durable.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("pebblestore: create %s: %w", s.dir, err)
		}
	}
	var walDmg []walDamage
	var walLater []walLog
	if c.FS == nil {
		walDmg, walLater = s.checkWALs() // before Pebble replays (and drops) them
	}
	opts := s.pebbleOptions()
	if len(walDmg) > 0 && opts.FS == nil {
		// This open may fail on the damage: Pebble does not stop the
		// disk-health checker it wraps the default FS in when Open fails.
		opts.FS = vfs.Default
	}
	db, err := pebble.Open(s.dir, opts)
	if err != nil && len(walDmg) > 0 && pebble.IsCorruptionError(err) {
		// A damaged WAL Pebble must replay in full: cut it before the
		// damage (copied aside first) and open again.
		s.log.Error("pebblestore: open refused a damaged WAL; cutting it before the damage", "err", err)
		for i := range walDmg {
			if rerr := s.repairWAL(&walDmg[i]); rerr != nil {
				return nil, fmt.Errorf("pebblestore: open %s: %w (repair: %w)", s.dir, err, rerr)
			}
		}
		db, err = pebble.Open(s.dir, s.pebbleOptions())
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", s.dir, err)
	}
	s.db = db
	if err := s.reapplyWAL(s.confirmWALDamage(walDmg, s.walStops), walLater); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.recover(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.mode == store.FlushAsync {
		s.wg.Add(1)
		go s.flushLoop()
	}
	s.log.Info("pebble store opened", "dir", s.dir, "flush", string(s.mode), "min", s.minPhys.Load(), "max", s.end.Load(), "queues", s.queues.Len())
	return s, nil
}

func (s *Store) pebbleOptions() *pebble.Options {
	c := s.cfg
	n := c.MaxConcurrentCompactions
	fs := c.FS
	if fs == nil {
		fs = vfs.Default
	}
	o := &pebble.Options{
		// Writes go through spaceFS: a full disk waits or is refused, a
		// failed fsync is sticky (diskfull.go).
		FS:     spaceFS{FS: fs, s: s},
		Logger: pebbleLogger{log: s.log, limit: &logLimiter{}, stops: s.walStops},
		EventListener: &pebble.EventListener{
			// Corruption is reported and contained, not fatal (damage.go).
			DataCorruption: s.dataCorruption,
			BackgroundError: func(err error) {
				if errors.Is(err, syscall.ENOSPC) {
					s.full("background", err)
				}
			},
			// A write stall holds every Append: say so, with Pebble's
			// reason, and how long it lasted (at most a line a second).
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				s.stallStart.Store(time.Now().UnixNano())
				s.stallLog.warn(s.log, "pebble write stall: appends wait", "reason", info.Reason)
			},
			WriteStallEnd: func() {
				if t0 := s.stallStart.Swap(0); t0 != 0 {
					s.stallLog.warn(s.log, "pebble write stall ended", "after", time.Since(time.Unix(0, t0)).Round(time.Millisecond))
				}
			},
			FlushEnd: func(info pebble.FlushInfo) {
				switch {
				case info.Err == nil:
					s.space.noSpace.Store(false)
				case errors.Is(info.Err, syscall.ENOSPC):
					s.full("flush", info.Err)
				}
			},
		},
		MemTableSize:                uint64(c.MemTableSize),
		MemTableStopWritesThreshold: memTableStops(int64(c.MemTableSize)),
		CacheSize:                   int64(c.BlockCacheSize),
		MaxOpenFiles:                c.MaxOpenFiles,
		L0CompactionThreshold:       c.L0CompactionThreshold,
		L0StopWritesThreshold:       l0Stops(c.L0StopWritesThreshold, int64(c.MemTableSize)),
		CompactionConcurrencyRange:  func() (int, int) { return 1, n },
		FormatMajorVersion:          pebble.FormatNewest,
	}
	cs := compressions[c.Compression]
	o.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return cs })
	return o
}

// minMemTableQueue is the memtable memory (the active one and those
// queued for flushing) Pebble may hold before writes stall. With Pebble's
// usual stop at two memtables, a small memtable_size stalls writes every
// time one flush takes longer than filling one memtable: at 256KiB and
// 5 MB/s of messages, 50 ms. Small memtables are allowed more of them, up
// to this much memory, and a flush writes all queued ones at once (at
// 2MiB and 4 MiB, half of a loaded 2-core machine's flushes still stalled
// on "memtable count limit reached").
const minMemTableQueue = 8 << 20

// memTableStops is Pebble's MemTableStopWritesThreshold for memtables of
// size bytes: at least 2, and enough to queue minMemTableQueue.
func memTableStops(size int64) int {
	return int(max(2, (minMemTableQueue+size-1)/max(size, 1)))
}

// l0Stops is Pebble's L0StopWritesThreshold for l0_stop_writes_threshold
// stops and memtables of size bytes. Every flush adds an L0 file, so
// memtables smaller than the default fill L0 proportionally faster: the
// threshold is scaled up so that it stands for at least as much L0 data
// as stops × the default memtable. The issue-29 stall (256KiB memtables,
// 5,000 msg/s of 1 KiB, one compaction at a time on a loaded 2-core
// machine) was this limit: "L0 file count limit exceeded", many times a
// second, while compactions of the tiny files lagged.
func l0Stops(stops int, size int64) int {
	if size <= 0 || size >= DefaultMemTableSize {
		return stops
	}
	return int((int64(stops)*DefaultMemTableSize + size - 1) / size)
}

// pebbleLogger routes Pebble's log to slog. Fatalf panics instead of
// exiting the process (see the package documentation).
type pebbleLogger struct {
	log   *slog.Logger
	limit *logLimiter
	stops *walStops // where WAL replay stopped (walcheck.go)
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct{ msg string }

func (e fatalError) Error() string { return "pebble: fatal: " + e.msg }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.stops.noteInfo(format, args)
	l.log.Debug(strings.TrimSpace(fmt.Sprintf(format, args...)), "source", "pebble")
}

// Errorf logs at most one line a second, with the count of those not
// logged: on a full disk Pebble retries its flushes and reports each
// failure (about 300 lines a second).
func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.limit != nil {
		n, ok := l.limit.allow()
		if !ok {
			return
		}
		if n > 0 {
			l.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)), "source", "pebble", "suppressed", n)
			return
		}
	}
	l.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)), "source", "pebble")
}

// logLimiter lets one line a second through and counts the others.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// warn logs msg at Warn if allowed, with the count of lines suppressed
// since the last one.
func (l *logLimiter) warn(log *slog.Logger, msg string, args ...any) {
	if n, ok := l.allow(); ok {
		if n > 0 {
			args = append(args, "suppressed", n)
		}
		log.Warn(msg, args...)
	}
}

func (l *logLimiter) allow() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.last) < time.Second {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	l.log.Error(msg, "source", "pebble", "fatal", true)
	panic(fatalError{msg})
}

// guard runs f, turning a Pebble panic into an error wrapping
// ErrNotDurable that disables writes until reopen. The cause is kept as
// text: a panicked store does not clear by itself, even when the cause
// was a full disk (writes wait for space instead of failing, diskfull.go,
// so that no longer happens while the store is open). A panic other than
// Logger.Fatalf's may have left Pebble's commit pipeline locked (Pebble
// panics inside it on a failed log write): Close then leaves the database
// to the process's end instead of blocking on it.
func (s *Store) guard(op string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatalError); !ok {
				s.horked.Store(true)
			}
			err = fmt.Errorf("pebblestore: %s: %w: pebble failed: %v", op, store.ErrNotDurable, r)
			s.setFailure(err)
		}
	}()
	return f()
}

// recover loads the store state: the format version, min_phys, the next
// physical offset and the queues.
func (s *Store) recover() error {
	v, err := s.get(stateVersion)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		empty, err := s.isEmpty()
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("pebblestore: %s holds data but no format version: %w", s.dir, store.ErrBadArgument)
		}
		if err := s.db.Set(stateVersion, be.AppendUint32(nil, formatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: write format version: %w", err)
		}
	case pebble.IsCorruptionError(err):
		s.stateDamaged("format version", err) // the data is there: read it as this version
	case err != nil:
		return fmt.Errorf("pebblestore: read format version: %w", err)
	case len(v) != 4 || be.Uint32(v) != formatVersion:
		return fmt.Errorf("pebblestore: %s has format version %x, want %d: %w", s.dir, v, formatVersion, store.ErrBadArgument)
	}
	if v, err := s.get(stateMinPhys); err == nil && len(v) == 8 {
		s.minPhys.Store(int64(be.Uint64(v)))
	} else if pebble.IsCorruptionError(err) {
		s.stateDamaged("min_phys", err)
		s.minPhys.Store(s.firstPhys())
	} else if err != nil && !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("pebblestore: read min_phys: %w", err)
	}
	s.next = s.minPhys.Load()
	physLost := false

	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPhys}, UpperBound: []byte{prefixPhys + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: recover: %w", err)
	}
	if it.Last() {
		phys := int64(be.Uint64(it.Key()[1:]))
		pv, ok := parsePhysValue(it.Value())
		if !ok {
			it.Close()
			return &store.CorruptionError{File: s.dir, Offset: phys, Reason: "bad physical index value"}
		}
		s.next = max(s.next, phys+int64(pv.size))
		s.lastTS = pv.ts
	}
	if err := it.Close(); pebble.IsCorruptionError(err) {
		s.stateDamaged("end of the physical index", err) // found from the queues' last records below
		physLost = true
	} else if err != nil {
		return fmt.Errorf("pebblestore: recover: %w", err)
	}
	s.end.Store(s.next)
	s.lastStoreTS.Store(s.lastTS)

	qit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixQueueState}, UpperBound: []byte{prefixQueueState + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: recover: %w", err)
	}
	defer qit.Close()
	eit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEntry}, UpperBound: []byte{prefixEntry + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: recover: %w", err)
	}
	defer eit.Close()
	var pfx []byte
	for valid := qit.First(); valid; valid = qit.Next() {
		q, ok := parseQueueKey(qit.Key(), false)
		if !ok || len(qit.Value()) != 8 {
			return &store.CorruptionError{File: s.dir, Reason: fmt.Sprintf("bad queue state key %q", qit.Key())}
		}
		qs := &queueState{q: q, persisted: true}
		start := int64(be.Uint64(qit.Value()))
		mx := start
		pfx = appendQueuePrefix(pfx[:0], prefixEntry, q)
		if eit.SeekLT(prefixEnd(pfx)) && bytes.HasPrefix(eit.Key(), pfx) && len(eit.Key()) == len(pfx)+8 {
			mx = max(mx, entryOffset(eit.Key())+1)
		} else if err := eit.Error(); pebble.IsCorruptionError(err) {
			mx = max(mx, s.queueEndFromPhys(q, err))
		} else if err != nil {
			return fmt.Errorf("pebblestore: recover %s: %w", q, err)
		}
		qs.min.Store(start)
		qs.max.Store(mx)
		s.queues.Set(q, qs)
	}
	if err := qit.Error(); pebble.IsCorruptionError(err) {
		s.queuesFromEntries(err) // the queue states Pebble cannot read
	} else if err != nil {
		return fmt.Errorf("pebblestore: recover: %w", err)
	}
	if physLost {
		s.endFromQueues()
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, it.Close()
}

// get returns a copy of the value of key (pebble.ErrNotFound when absent).
func (s *Store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, v...)
	return out, closer.Close()
}

// enter takes the life lock for an operation; done must be called after.
func (s *Store) enter(op string) error {
	s.life.RLock()
	if s.closed.Load() {
		s.life.RUnlock()
		return fmt.Errorf("pebblestore: %s: %w", op, store.ErrClosed)
	}
	return nil
}

func (s *Store) done() { s.life.RUnlock() }

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, msgs []store.Message) ([]store.Position, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if err := s.spaceRefusal(); err != nil {
		return nil, err
	}
	items := make([]item, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if err := checkMessage(m); err != nil {
			return nil, err
		}
		items[i] = item{q: store.Queue{Topic: m.Topic, ID: m.QueueID}, ext: m.Ext, tags: m.TagsCode}
	}
	return s.append(ctx, items)
}

// item is one message to append: a message to encode, or a stored record
// to copy (raw, with its store timestamp kept).
type item struct {
	q     store.Queue
	ext   *message.Ext
	raw   []byte
	props message.Properties // of raw
	ts    int64              // of raw
	tags  int64
}

func (s *Store) append(ctx context.Context, items []item) ([]store.Position, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pebblestore: append: %w", err)
	}
	if err := s.enter("append"); err != nil {
		return nil, err
	}
	defer s.done()
	if err := s.failure(); err != nil {
		return nil, fmt.Errorf("pebblestore: append after earlier failure: %w: %w", store.ErrNotDurable, err)
	}
	s.mu.Lock()
	pos, seq, err := s.appendLocked(items)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if s.mode == store.FlushSync {
		if err := s.syncTo(seq); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

func checkMessage(m *store.Message) error {
	switch {
	case m.Ext == nil:
		return fmt.Errorf("pebblestore: append: nil message: %w", store.ErrBadArgument)
	case m.QueueID < 0:
		return fmt.Errorf("pebblestore: append: queue id %d: %w", m.QueueID, store.ErrBadArgument)
	}
	return checkTopic(m.Topic)
}

// checkTopic applies the CommitLog engine's topic rules, so that a store
// can be migrated either way.
func checkTopic(topic string) error {
	switch {
	case topic == "", topic == ".", topic == "..":
		return fmt.Errorf("pebblestore: topic %q: %w", topic, store.ErrBadArgument)
	case len(topic) > message.MaxTopicLength:
		return fmt.Errorf("pebblestore: topic of %d bytes is over %d: %w", len(topic), message.MaxTopicLength, store.ErrBadArgument)
	case strings.ContainsAny(topic, "/\\\x00"):
		return fmt.Errorf("pebblestore: topic %q has a path separator: %w", topic, store.ErrBadArgument)
	}
	return nil
}

// appendLocked builds and commits one batch. It returns the positions and
// the batch's commit sequence number. Called with s.mu held.
func (s *Store) appendLocked(items []item) ([]store.Position, int64, error) {
	now := max(time.Now().UnixMilli(), s.lastTS)
	lastTS := s.lastTS
	phys := s.next
	b := s.db.NewBatch()
	defer b.Close()
	positions := make([]store.Position, len(items))
	s.touched = s.touched[:0]
	fail := func(err error) ([]store.Position, int64, error) {
		for _, qs := range s.touched {
			qs.touched = false
		}
		return nil, 0, err
	}
	for i := range items {
		it := &items[i]
		qs := s.queues.GetOrCreate(it.q)
		if !qs.touched {
			qs.touched, qs.pend = true, qs.max.Load()
			s.touched = append(s.touched, qs)
		}
		val := be.AppendUint64(s.valBuf[:0], uint64(it.tags))
		ts := now
		var props message.Properties
		if it.raw != nil {
			ts = max(it.ts, lastTS) // keep store time monotonic
			if len(it.raw) > s.maxMsg {
				return fail(fmt.Errorf("pebblestore: append: record of %d bytes to %s is over the %d byte limit: %w", len(it.raw), it.q, s.maxMsg, store.ErrTooLarge))
			}
			val = append(val, it.raw...)
			props = it.props
		} else {
			enc := it.ext.Properties.AppendEncoded(s.propBuf[:0])
			s.propBuf = enc[:0]
			size := message.StoredSize(it.ext, len(enc))
			if size > s.maxMsg {
				return fail(fmt.Errorf("pebblestore: append: record of %d bytes to %s is over the %d byte limit: %w", size, it.q, s.maxMsg, store.ErrTooLarge))
			}
			var err error
			val, err = message.AppendStored(val, it.ext, enc)
			if err != nil {
				s.valBuf = val[:0]
				return fail(fmt.Errorf("pebblestore: append to %s: %w: %w", it.q, store.ErrBadArgument, err))
			}
			props = it.ext.Properties
		}
		lastTS = ts
		rec := val[entryHeader:]
		size := int32(len(rec))
		off := qs.pend
		message.PatchStored(rec, off, phys, ts)
		key := entryKey(s.keyBuf[:0], it.q, off)
		_ = b.Set(key, val, nil)
		key = physKey(key[:0], phys)
		val = appendPhysValue(val[:0], ts, size, it.q, off)
		_ = b.Set(key, val, nil)
		key, val = s.indexKeys(b, key, val, it.q, props, ts, off, phys)
		if !qs.persisted {
			_ = b.Set(queueStateKey(it.q), be.AppendUint64(nil, uint64(qs.min.Load())), nil)
		}
		s.keyBuf, s.valBuf = key[:0], val[:0]
		positions[i] = store.Position{CommitLogOffset: phys, Size: size, QueueOffset: off, StoreTimestamp: ts}
		qs.pend++
		phys += int64(size)
	}
	err := s.guard("append", func() error { return s.db.Apply(b, pebble.NoSync) })
	if err != nil {
		if !errors.Is(err, store.ErrNotDurable) {
			err = fmt.Errorf("pebblestore: append: %w: %w", store.ErrNotDurable, err)
			s.setFailure(err)
		}
		return fail(err)
	}
	for _, qs := range s.touched {
		qs.max.Store(qs.pend)
		qs.touched, qs.persisted = false, true
	}
	s.next, s.lastTS = phys, lastTS
	s.end.Store(phys)
	s.lastStoreTS.Store(lastTS)
	if cap(s.valBuf) > maxKeptBuffer {
		s.valBuf = nil
	}
	return positions, s.committed.Add(1), nil
}

// indexKeys adds the key-index entries of one message to b.
func (s *Store) indexKeys(b *pebble.Batch, key, val []byte, q store.Queue, props message.Properties, ts, off, phys int64) ([]byte, []byte) {
	if len(props) == 0 {
		return key, val
	}
	bucket := bucketOf(ts)
	put := func(k string) {
		if k == "" || strings.IndexByte(k, 0) >= 0 {
			return
		}
		key = be.AppendUint64(keyPrefix(key[:0], bucket, q.Topic, k), uint64(phys))
		val = appendKeyValue(val[:0], ts, q.ID, off)
		_ = b.Set(key, val, nil)
	}
	put(props[message.PropertyUniqKey])
	for _, k := range strings.Fields(props[message.PropertyKeys]) {
		put(k)
	}
	return key, val
}

// Offsets implements store.Store.
func (s *Store) Offsets(q store.Queue) (int64, int64, error) {
	if s.closed.Load() {
		return 0, 0, fmt.Errorf("pebblestore: offsets: %w", store.ErrClosed)
	}
	qs := s.queues.Get(q)
	if qs == nil {
		return 0, 0, nil
	}
	mn, mx := qs.offsets()
	return mn, mx, nil
}

// Queues implements store.QueueLister: the queues holding or having held
// messages (or given a start offset), sorted by topic and id.
func (s *Store) Queues() []store.Queue {
	return s.queues.Sorted(func(qs *queueState) bool { return qs.max.Load() > 0 })
}

func (s *Store) failure() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failed
}

func (s *Store) setFailure(err error) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failed == nil {
		s.failed = err
		s.log.Error("pebblestore: writes disabled until reopen", "err", err)
	}
}

// syncTo makes the batches up to seq durable (see the package doc).
func (s *Store) syncTo(seq int64) error {
	if s.synced.Load() >= seq {
		return nil
	}
	return s.syncWAL()
}

// syncWAL syncs the WAL, covering every batch committed before the call.
func (s *Store) syncWAL() error {
	target := s.committed.Load()
	s.syncs.Add(1)
	err := s.guard("sync", func() error { return s.db.LogData(nil, pebble.Sync) })
	if err != nil {
		if !errors.Is(err, store.ErrNotDurable) {
			err = fmt.Errorf("pebblestore: sync: %w: %w", store.ErrNotDurable, err)
			s.setFailure(err)
		}
		return err
	}
	for {
		cur := s.synced.Load()
		if cur >= target || s.synced.CompareAndSwap(cur, target) {
			return nil
		}
	}
}

// flushLoop syncs the WAL every interval in async mode.
func (s *Store) flushLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.committed.Load() == s.synced.Load() {
			continue
		}
		if err := s.enter("flush"); err != nil {
			return
		}
		if err := s.syncWAL(); err != nil {
			s.log.Error("pebblestore: flush", "err", err)
		}
		s.done()
	}
}

// Flush implements store.Flusher: it syncs the WAL. A sync cannot end
// while a log write waits for disk space (diskfull.go), which lasts until
// space returns or the store closes: Flush then says so at once, and
// returns when ctx ends whatever holds the sync up (the sync goes on,
// and Close waits for it, ending the wait for space).
func (s *Store) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pebblestore: flush: %w", err)
	}
	if err := s.enter("flush"); err != nil {
		return err
	}
	if err := s.failure(); err != nil {
		s.done()
		return fmt.Errorf("pebblestore: flush after earlier failure: %w: %w", store.ErrNotDurable, err)
	}
	if n := s.space.waiting.Load(); n > 0 {
		s.done()
		return fmt.Errorf("pebblestore: flush: %w: %d log writes wait for space: %w", store.ErrNotDurable, n, syscall.ENOSPC)
	}
	synced := make(chan error, 1)
	go func() {
		defer s.done()
		synced <- s.syncWAL()
	}()
	select {
	case err := <-synced:
		return err
	case <-ctx.Done():
		return fmt.Errorf("pebblestore: flush: %w (a log write may be waiting for disk space)", ctx.Err())
	}
}

// Close implements store.Store: it syncs the WAL and closes the database.
// It is safe to call more than once.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	s.wg.Wait()
	// Wait for the operations in progress.
	s.life.Lock()
	defer s.life.Unlock()
	var err error
	if s.failure() == nil {
		err = s.guard("close", func() error { return s.db.LogData(nil, pebble.Sync) })
	}
	cerr := func() (cerr error) {
		if s.horked.Load() {
			// Closing would wait forever for the commit lock Pebble left
			// held (guard); its files close when the process ends.
			return errors.New("pebble panicked in a commit: database left open until the process ends")
		}
		defer func() {
			if r := recover(); r != nil {
				cerr = fmt.Errorf("pebble failed: %v", r)
			}
		}()
		return s.db.Close()
	}()
	if err = firstErr(err, cerr); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	s.log.Info("pebble store closed", "dir", s.dir, "max", s.end.Load())
	return nil
}
