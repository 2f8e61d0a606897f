// Package migrate copies a broker's stored state from one store.Store to
// another (CommitLog to Pebble and back): every queue's messages in their
// queue offsets, with their tag codes, keys and properties, and every
// metadata document (topics, consumerOffset, subscriptionGroup, ...).
//
// Messages are copied in the source's physical order (a merge of the
// queues by commit-log offset), so the target's physical order, and with
// it store time, stays monotonic, as both engines require for retention
// and OffsetByTime. Records move as stored bytes. What changes:
//
//   - the physical (commit-log) offset, always: the target assigns its
//     own, so offsetMsgIds change (UNIQ_KEY, the client's message id, does
//     not);
//   - the store timestamp, only when the target lacks StoredAppender: it
//     then stamps the copy with the time of the migration (the CommitLog
//     engine is such a target today);
//   - the queue offset, only with Options.AllowRebase when the source's
//     min offset is above 0 and the target lacks OffsetSetter (the
//     CommitLog engine again): the queue then starts at 0 and Report.Rebased
//     gives the shift; consumer offsets in the copied metadata are not
//     rewritten. Without AllowRebase such a migration is refused before
//     anything is copied.
//
// A migration writes a marker document (MarkerName) into the target before
// the first message and removes it (or marks it done) at the end. The
// target must be empty or hold the marker of an unfinished migration, in
// which case the migration resumes: each target queue's max says how much
// of it was copied (appends are atomic and a crash loses only a suffix of
// the copy), so copying restarts from there.
package migrate

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// OffsetSetter is implemented by stores that can start an empty queue at
// a given offset.
type OffsetSetter interface {
	SetQueueStart(q store.Queue, offset int64) error
}

// StoredAppender is implemented by stores that can append records in the
// stored layout keeping their store timestamps: each record goes to the
// queue of its topic and queue id; the store patches in its own queue and
// physical offsets.
type StoredAppender interface {
	AppendRaw(ctx context.Context, records [][]byte, tagsCodes []int64) ([]store.Position, error)
}

// MetaLister is implemented by stores that can list their metadata
// documents.
type MetaLister interface {
	MetaNames() ([]string, error)
}

// MetaDeleter is implemented by stores that can delete a metadata
// document.
type MetaDeleter interface {
	DeleteMeta(name string) error
}

// MarkerName is the metadata document marking a migration into a store.
const MarkerName = "quiver.migration"

// DefaultMetaNames are the broker's documents, copied when the source
// cannot list its own.
var DefaultMetaNames = []string{"topics", "consumerOffset", "subscriptionGroup", "delayOffset"}

// Errors.
var (
	ErrTargetNotEmpty = errors.New("migrate: target is not empty")
	ErrOffsetGap      = errors.New("migrate: queue offsets cannot be kept")
	ErrUnsupported    = errors.New("migrate: store lacks a needed interface")
	ErrVerify         = errors.New("migrate: verification failed")
)

// Options tune a migration.
type Options struct {
	// Source names the source in the marker (e.g. "commitlog:/var/mq");
	// resuming requires the same name.
	Source string
	// MetaNames are the documents to copy when the source is no
	// MetaLister (default DefaultMetaNames). Absent ones are skipped.
	MetaNames []string
	// BatchMessages and BatchBytes bound one append to the target
	// (defaults 256 and 4MiB).
	BatchMessages int
	BatchBytes    int
	// ReadBytes bounds the records read ahead over all queues (default
	// 32MiB; each queue gets at least 8KiB).
	ReadBytes int
	// AllowRebase lets queues whose source min is above 0 start at 0 in a
	// target without OffsetSetter (see the package documentation).
	AllowRebase bool
	// Verify re-reads both stores after the copy and compares every
	// message field by field.
	Verify bool
	// Progress, when set, is called after every append to the target and
	// once per phase.
	Progress func(Progress)
}

// Progress is a migration's state.
type Progress struct {
	Phase    string // "copy", "metadata", "verify", "done"
	Messages int64  // copied so far (this run)
	Total    int64  // to copy in this run
	Bytes    int64
}

// Report says what a migration did.
type Report struct {
	Queues   int
	Messages int64 // copied by this run
	Bytes    int64
	// Resumed is set when an unfinished migration was continued; Skipped
	// messages were already in the target.
	Resumed bool
	Skipped int64
	// Meta lists the documents copied.
	Meta []string
	// TimestampsKept says the target kept store timestamps
	// (StoredAppender); Raised counts those it had to raise to keep
	// store time monotonic.
	TimestampsKept bool
	Raised         int64
	// Rebased maps queues started at 0 to their source min offset.
	Rebased map[store.Queue]int64
	// Counted is the number of messages in the target's queues after the
	// copy (it equals the source's); Verified the number compared field
	// by field (Options.Verify).
	Counted  int64
	Verified int64
	Elapsed  time.Duration
}

// marker is the MarkerName document.
type marker struct {
	State   string           `json:"state"` // "copying" or "done"
	Source  string           `json:"source,omitempty"`
	Started time.Time        `json:"started"`
	Rebased map[string]int64 `json:"rebased,omitempty"` // queue "topic/id" -> source min
}

// queuePlan is one queue to copy.
type queuePlan struct {
	q        store.Queue
	min, max int64 // source offsets
	shift    int64 // target offset = source offset - shift
	from     int64 // first source offset to copy
}

// Migrate copies everything from `from` into `to` (see the package
// documentation). Both stores must be open; nothing else may write to the
// target meanwhile, and the source should not be written either (messages
// appended to it after the start are not copied).
//
// The steps: check what both stores can do, read or start the marker,
// plan every queue, start the target's queues where the copy begins, copy
// the messages and the metadata, verify, and finish the marker.
func Migrate(ctx context.Context, from, to store.Store, opts Options) (Report, error) {
	start := time.Now()
	rep := Report{Rebased: map[store.Queue]int64{}}
	o := opts.withDefaults()
	srcQueues, ok := from.(store.QueueLister)
	if !ok {
		return rep, fmt.Errorf("migrate: source %T cannot list its queues: %w", from, ErrUnsupported)
	}
	tmeta, ok := to.(store.Metadata)
	if !ok {
		return rep, fmt.Errorf("migrate: target %T keeps no metadata: %w", to, ErrUnsupported)
	}
	_, rep.TimestampsKept = to.(StoredAppender)

	mk, err := startMarker(to, tmeta, o, &rep)
	if err != nil {
		return rep, err
	}
	plans, err := planQueues(from, to, srcQueues.Queues(), mk, o, &rep)
	if err != nil {
		return rep, err
	}
	if err := saveMarker(tmeta, mk); err != nil {
		return rep, err
	}
	total, err := startTargetQueues(to, plans, &rep)
	if err != nil {
		return rep, err
	}
	rep.Queues = len(plans)

	if err := copyMessages(ctx, from, to, plans, o, total, &rep); err != nil {
		return rep, err
	}
	progress(o, Progress{Phase: "metadata", Messages: rep.Messages, Total: total, Bytes: rep.Bytes})
	if err := copyMeta(from, tmeta, o.MetaNames, &rep); err != nil {
		return rep, err
	}
	progress(o, Progress{Phase: "verify", Messages: rep.Messages, Total: total, Bytes: rep.Bytes})
	if err := verifyCounts(from, to, plans, &rep); err != nil {
		return rep, err
	}
	if o.Verify {
		if err := verifyRecords(ctx, from, to, plans, rep.TimestampsKept, &rep); err != nil {
			return rep, err
		}
	}
	if err := finish(ctx, to, tmeta, mk); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	progress(o, Progress{Phase: "done", Messages: rep.Messages, Total: total, Bytes: rep.Bytes})
	return rep, nil
}

// withDefaults fills in the options left zero.
func (o Options) withDefaults() Options {
	if o.BatchMessages <= 0 {
		o.BatchMessages = 256
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	if o.ReadBytes <= 0 {
		o.ReadBytes = 32 << 20
	}
	if o.MetaNames == nil {
		o.MetaNames = DefaultMetaNames
	}
	return o
}

// startMarker reads the target's marker: an unfinished migration from the
// same source is resumed (rep.Resumed), a finished one or one from another
// source is refused, and an empty target gets a new marker (not yet saved).
func startMarker(to store.Store, tmeta store.Metadata, o Options, rep *Report) (*marker, error) {
	mk, err := loadMarker(tmeta)
	if err != nil {
		return nil, err
	}
	switch {
	case mk != nil && mk.State == "copying":
		if mk.Source != "" && o.Source != "" && mk.Source != o.Source {
			return nil, fmt.Errorf("migrate: the target holds an unfinished migration from %s, not %s: %w", mk.Source, o.Source, ErrTargetNotEmpty)
		}
		rep.Resumed = true
		return mk, nil
	case mk != nil:
		return nil, fmt.Errorf("migrate: the target holds a finished migration from %s: %w", mk.Source, ErrTargetNotEmpty)
	default:
		if err := checkEmpty(to, tmeta, o.MetaNames); err != nil {
			return nil, err
		}
		return &marker{State: "copying", Source: o.Source, Started: time.Now().UTC(), Rebased: map[string]int64{}}, nil
	}
}

// planQueues plans every non-empty source queue before anything is
// written: its source range and the shift of a rebased queue (kept from
// the marker when resuming). The shifts are recorded in mk and rep.
func planQueues(from, to store.Store, queues []store.Queue, mk *marker, o Options, rep *Report) ([]*queuePlan, error) {
	var plans []*queuePlan
	for _, q := range queues {
		mn, mx, err := from.Offsets(q)
		if err != nil {
			return nil, fmt.Errorf("migrate: source offsets of %s: %w", q, err)
		}
		if mx <= mn && mn == 0 {
			continue
		}
		p := &queuePlan{q: q, min: mn, max: mx}
		if sh, ok := mk.Rebased[q.String()]; ok {
			p.shift = sh
		} else if mn > 0 && !rep.Resumed {
			if _, ok := to.(OffsetSetter); !ok {
				if !o.AllowRebase {
					return nil, fmt.Errorf("migrate: %s starts at offset %d and target %T cannot start a queue there (AllowRebase starts it at 0): %w", q, mn, to, ErrOffsetGap)
				}
				p.shift = mn
			}
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		if p.shift > 0 {
			mk.Rebased[p.q.String()] = p.shift
			rep.Rebased[p.q] = p.shift
		}
	}
	return plans, nil
}

// startTargetQueues sets where each plan's copy begins: an empty target
// queue is started at the source's first offset (less the shift), a queue
// holding a prefix of the copy (an earlier run) continues after it, and
// anything else is refused. It returns how many messages are left to copy.
func startTargetQueues(to store.Store, plans []*queuePlan, rep *Report) (int64, error) {
	var total int64
	for _, p := range plans {
		tmn, tmx, err := to.Offsets(p.q)
		if err != nil {
			return 0, fmt.Errorf("migrate: target offsets of %s: %w", p.q, err)
		}
		want := p.min - p.shift // the target queue's start
		switch {
		case tmn == 0 && tmx == 0:
			if want > 0 {
				os, ok := to.(OffsetSetter)
				if !ok {
					return 0, fmt.Errorf("migrate: %s starts at offset %d and target %T cannot start a queue there: %w", p.q, want, to, ErrOffsetGap)
				}
				if err := os.SetQueueStart(p.q, want); err != nil {
					return 0, fmt.Errorf("migrate: start %s at %d: %w", p.q, want, err)
				}
			}
			p.from = p.min
		case tmn == want && tmx >= want:
			p.from = tmx + p.shift
			rep.Skipped += p.from - p.min
		default:
			return 0, fmt.Errorf("migrate: target %s holds [%d, %d), not a copy of the source's [%d, %d) started at %d: %w", p.q, tmn, tmx, p.min, p.max, want, ErrTargetNotEmpty)
		}
		if p.from > p.max {
			return 0, fmt.Errorf("migrate: target %s holds %d messages, more than the source's [%d, %d): %w", p.q, p.from-p.min, p.min, p.max, ErrTargetNotEmpty)
		}
		total += p.max - p.from
	}
	return total, nil
}

// finish flushes the target and ends the migration: the marker is deleted
// where the target can delete metadata, else saved as done.
func finish(ctx context.Context, to store.Store, tmeta store.Metadata, mk *marker) error {
	if f, ok := to.(store.Flusher); ok {
		if err := f.Flush(ctx); err != nil {
			return fmt.Errorf("migrate: flush target: %w", err)
		}
	}
	var err error
	if d, ok := to.(MetaDeleter); ok {
		err = d.DeleteMeta(MarkerName)
	} else {
		mk.State = "done"
		err = saveMarker(tmeta, mk)
	}
	if err != nil {
		return fmt.Errorf("migrate: finish: %w", err)
	}
	return nil
}

func progress(o Options, p Progress) {
	if o.Progress != nil {
		o.Progress(p)
	}
}

func loadMarker(m store.Metadata) (*marker, error) {
	b, err := m.LoadMeta(MarkerName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: load marker: %w", err)
	}
	var mk marker
	if err := json.Unmarshal(b, &mk); err != nil {
		return nil, fmt.Errorf("migrate: decode marker %s: %w", MarkerName, err)
	}
	if mk.Rebased == nil {
		mk.Rebased = map[string]int64{}
	}
	return &mk, nil
}

func saveMarker(m store.Metadata, mk *marker) error {
	b, err := json.Marshal(mk)
	if err != nil {
		return fmt.Errorf("migrate: encode marker: %w", err)
	}
	if err := m.SaveMeta(MarkerName, b); err != nil {
		return fmt.Errorf("migrate: save marker: %w", err)
	}
	return nil
}

// checkEmpty refuses a target holding queues or documents.
func checkEmpty(to store.Store, tmeta store.Metadata, names []string) error {
	if ql, ok := to.(store.QueueLister); ok {
		if qs := ql.Queues(); len(qs) > 0 {
			return fmt.Errorf("migrate: the target holds %d queues (%s first): %w", len(qs), qs[0], ErrTargetNotEmpty)
		}
	}
	if ml, ok := to.(MetaLister); ok {
		have, err := ml.MetaNames()
		if err != nil {
			return fmt.Errorf("migrate: list target metadata: %w", err)
		}
		names = have
	}
	for _, n := range names {
		_, err := tmeta.LoadMeta(n)
		if err == nil {
			return fmt.Errorf("migrate: the target holds document %s: %w", n, ErrTargetNotEmpty)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("migrate: check target document %s: %w", n, err)
		}
	}
	return nil
}

// cursor reads one source queue ahead.
type cursor struct {
	p     *queuePlan
	next  int64 // next source offset to read
	res   store.ReadResult
	codes []int64
	i     int   // next record in res
	head  int64 // commit-log offset of res.Records[i]
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].head < h[j].head }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// fill reads the cursor's next records; it reports false when the queue
// is done.
func (c *cursor) fill(ctx context.Context, from store.Store, maxBytes int) (bool, error) {
	if c.next >= c.p.max {
		return false, nil
	}
	c.codes = c.codes[:0]
	c.i = 0
	opts := store.ReadOptions{MaxMessages: 64, MaxBytes: maxBytes, MaxScan: 64,
		Filter: func(code int64) bool { c.codes = append(c.codes, code); return true }}
	if err := from.Read(ctx, c.p.q, c.next, opts, &c.res); err != nil {
		return false, fmt.Errorf("migrate: read %s at %d: %w", c.p.q, c.next, err)
	}
	switch c.res.Status {
	case store.Found:
	case store.OffsetTooSmall:
		return false, fmt.Errorf("migrate: %s at %d: the source deleted it (min is now %d): %w", c.p.q, c.next, c.res.MinOffset, ErrOffsetGap)
	default:
		return false, fmt.Errorf("migrate: %s at %d of [%d, %d): source read says %s: %w", c.p.q, c.next, c.p.min, c.p.max, c.res.Status, ErrOffsetGap)
	}
	if len(c.codes) < len(c.res.Records) {
		return false, fmt.Errorf("migrate: %s at %d: source filter saw %d entries for %d records: %w", c.p.q, c.next, len(c.codes), len(c.res.Records), ErrUnsupported)
	}
	for i, off := range c.res.QueueOffsets {
		if off != c.next+int64(i) {
			return false, fmt.Errorf("migrate: %s: the source skipped offset %d (damaged?); offsets cannot be kept: %w", c.p.q, c.next+int64(i), ErrOffsetGap)
		}
	}
	if n := int64(len(c.res.Records)); c.next+n > c.p.max {
		c.res.Records = c.res.Records[:c.p.max-c.next]
	}
	c.next += int64(len(c.res.Records))
	return c.setHead()
}

func (c *cursor) setHead() (bool, error) {
	h, err := message.PeekHeader(c.res.Records[c.i])
	if err != nil {
		return false, fmt.Errorf("migrate: %s: source record: %w", c.p.q, err)
	}
	c.head = h.CommitLogOffset
	return true, nil
}

// advance moves past the head record, refilling when needed.
func (c *cursor) advance(ctx context.Context, from store.Store, maxBytes int) (bool, error) {
	c.i++
	if c.i < len(c.res.Records) {
		return c.setHead()
	}
	return c.fill(ctx, from, maxBytes)
}

// batch is the next append to the target.
type batch struct {
	buf     []byte
	ends    []int
	codes   []int64
	queues  []*queuePlan
	srcOffs []int64
	srcTS   []int64
}

func (b *batch) add(rec []byte, code int64, p *queuePlan, off int64) {
	b.buf = append(b.buf, rec...)
	b.ends = append(b.ends, len(b.buf))
	b.codes = append(b.codes, code)
	b.queues = append(b.queues, p)
	b.srcOffs = append(b.srcOffs, off)
	h, _ := message.PeekHeader(rec)
	b.srcTS = append(b.srcTS, h.StoreTimestamp)
}

func (b *batch) reset() {
	b.buf, b.ends, b.codes, b.queues, b.srcOffs, b.srcTS = b.buf[:0], b.ends[:0], b.codes[:0], b.queues[:0], b.srcOffs[:0], b.srcTS[:0]
}

func (b *batch) records() [][]byte {
	out := make([][]byte, len(b.ends))
	start := 0
	for i, end := range b.ends {
		out[i] = b.buf[start:end:end]
		start = end
	}
	return out
}

func copyMessages(ctx context.Context, from, to store.Store, plans []*queuePlan, o Options, total int64, rep *Report) error {
	perQueue := 8 << 10
	if len(plans) > 0 {
		perQueue = max(perQueue, o.ReadBytes/len(plans))
	}
	h := &cursorHeap{}
	for _, p := range plans {
		c := &cursor{p: p, next: p.from}
		ok, err := c.fill(ctx, from, perQueue)
		if err != nil {
			return err
		}
		if ok {
			*h = append(*h, c)
		}
	}
	heap.Init(h)
	raw, _ := to.(StoredAppender)
	var b batch
	flush := func() error {
		if len(b.ends) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		recs := b.records()
		var pos []store.Position
		var err error
		if raw != nil {
			pos, err = raw.AppendRaw(ctx, recs, b.codes)
		} else {
			msgs := make([]store.Message, len(recs))
			for i, rec := range recs {
				m, _, derr := message.DecodeStored(rec)
				if derr != nil {
					return fmt.Errorf("migrate: %s at %d: decode source record: %w", b.queues[i].q, b.srcOffs[i], derr)
				}
				msgs[i] = store.Message{Ext: m, TagsCode: b.codes[i]}
			}
			pos, err = to.Append(ctx, msgs)
		}
		if err != nil {
			return fmt.Errorf("migrate: append %d messages to the target (first %s at %d): %w", len(recs), b.queues[0].q, b.srcOffs[0], err)
		}
		for i, p := range pos {
			if want := b.srcOffs[i] - b.queues[i].shift; p.QueueOffset != want {
				return fmt.Errorf("migrate: target put %s source offset %d at %d, want %d: %w", b.queues[i].q, b.srcOffs[i], p.QueueOffset, want, ErrOffsetGap)
			}
			if raw != nil && p.StoreTimestamp != b.srcTS[i] {
				rep.Raised++
			}
			rep.Bytes += int64(p.Size)
		}
		rep.Messages += int64(len(pos))
		b.reset()
		progress(o, Progress{Phase: "copy", Messages: rep.Messages, Total: total, Bytes: rep.Bytes})
		return nil
	}
	for h.Len() > 0 {
		c := (*h)[0]
		rec := c.res.Records[c.i]
		if len(b.ends) > 0 && (len(b.ends) >= o.BatchMessages || len(b.buf)+len(rec) > o.BatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		b.add(rec, c.codes[c.i], c.p, c.res.QueueOffsets[c.i])
		ok, err := c.advance(ctx, from, perQueue)
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return flush()
}

func copyMeta(from store.Store, tmeta store.Metadata, names []string, rep *Report) error {
	smeta, ok := from.(store.Metadata)
	if !ok {
		return nil
	}
	if ml, ok := from.(MetaLister); ok {
		have, err := ml.MetaNames()
		if err != nil {
			return fmt.Errorf("migrate: list source metadata: %w", err)
		}
		names = have
	}
	for _, n := range names {
		if n == MarkerName {
			continue
		}
		b, err := smeta.LoadMeta(n)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("migrate: load source document %s: %w", n, err)
		}
		if err := tmeta.SaveMeta(n, b); err != nil {
			return fmt.Errorf("migrate: save document %s: %w", n, err)
		}
		rep.Meta = append(rep.Meta, n)
	}
	return nil
}

func verifyCounts(from, to store.Store, plans []*queuePlan, rep *Report) error {
	var bad []string
	for _, p := range plans {
		tmn, tmx, err := to.Offsets(p.q)
		if err != nil {
			return fmt.Errorf("migrate: verify %s: %w", p.q, err)
		}
		if tmn != p.min-p.shift || tmx != p.max-p.shift {
			bad = append(bad, fmt.Sprintf("%s: source [%d, %d) target [%d, %d)", p.q, p.min, p.max, tmn, tmx))
		}
		rep.Counted += tmx - tmn
	}
	if ql, ok := to.(store.QueueLister); ok {
		want := map[store.Queue]bool{}
		for _, p := range plans {
			want[p.q] = true
		}
		for _, q := range ql.Queues() {
			if !want[q] {
				bad = append(bad, fmt.Sprintf("%s: only in the target", q))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("migrate: %d queues differ: %v: %w", len(bad), bad, ErrVerify)
	}
	return nil
}

// verifyRecords compares every message of both stores.
func verifyRecords(ctx context.Context, from, to store.Store, plans []*queuePlan, keptTS bool, rep *Report) error {
	var rs, rt store.ReadResult
	for _, p := range plans {
		for off := p.min; off < p.max; {
			if err := from.Read(ctx, p.q, off, store.ReadOptions{}, &rs); err != nil {
				return fmt.Errorf("migrate: verify: read source %s at %d: %w", p.q, off, err)
			}
			if err := to.Read(ctx, p.q, off-p.shift, store.ReadOptions{MaxMessages: len(rs.Records)}, &rt); err != nil {
				return fmt.Errorf("migrate: verify: read target %s at %d: %w", p.q, off-p.shift, err)
			}
			if rs.Status != store.Found || rt.Status != store.Found || len(rt.Records) != len(rs.Records) {
				return fmt.Errorf("migrate: verify %s at %d: source %s (%d) target %s (%d): %w", p.q, off, rs.Status, len(rs.Records), rt.Status, len(rt.Records), ErrVerify)
			}
			for i := range rs.Records {
				if err := sameMessage(rs.Records[i], rt.Records[i], p.shift, keptTS); err != nil {
					return fmt.Errorf("migrate: verify %s at %d: %w: %w", p.q, off+int64(i), ErrVerify, err)
				}
				rep.Verified++
			}
			off += int64(len(rs.Records))
		}
	}
	return nil
}

// sameProperties compares properties except the record checksum, which an
// engine writes for each record it stores (store.PropertyRecordCRC).
func sameProperties(a, b message.Properties) bool {
	_, ca := a[store.PropertyRecordCRC]
	_, cb := b[store.PropertyRecordCRC]
	if !ca && !cb {
		return maps.Equal(a, b)
	}
	n := 0
	for k, v := range a {
		if k == store.PropertyRecordCRC {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		n++
	}
	if cb {
		n++
	}
	return n == len(b)
}

// sameMessage compares a source and a target record, except for what a
// migration changes.
func sameMessage(src, dst []byte, shift int64, keptTS bool) error {
	a, _, err := message.DecodeStored(src)
	if err != nil {
		return fmt.Errorf("source record: %w", err)
	}
	b, _, err := message.DecodeStored(dst)
	if err != nil {
		return fmt.Errorf("target record: %w", err)
	}
	switch {
	case a.Topic != b.Topic, a.QueueID != b.QueueID:
		return fmt.Errorf("queue %s/%d became %s/%d", a.Topic, a.QueueID, b.Topic, b.QueueID)
	case a.QueueOffset-shift != b.QueueOffset:
		return fmt.Errorf("queue offset %d became %d", a.QueueOffset, b.QueueOffset)
	case string(a.Body) != string(b.Body), a.BodyCRC&0x7FFFFFFF != b.BodyCRC&0x7FFFFFFF: // older stores wrote the unmasked CRC
		return fmt.Errorf("body differs")
	case !sameProperties(a.Properties, b.Properties):
		return fmt.Errorf("properties %v became %v", a.Properties, b.Properties)
	case a.Flag != b.Flag, a.SysFlag != b.SysFlag, a.ReconsumeTimes != b.ReconsumeTimes,
		a.PreparedTransactionOffset != b.PreparedTransactionOffset:
		return fmt.Errorf("flags differ")
	case a.BornTimestamp != b.BornTimestamp, a.BornHost != b.BornHost, a.StoreHost != b.StoreHost:
		return fmt.Errorf("born or store host differs")
	case keptTS && a.StoreTimestamp != b.StoreTimestamp:
		return fmt.Errorf("store timestamp %d became %d", a.StoreTimestamp, b.StoreTimestamp)
	}
	return nil
}
