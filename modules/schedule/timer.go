package schedule

import (
	"container/heap"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// timerDoc is the wheel's persisted progress.
const timerDoc = "timerWheel"

const (
	// wheelSlot is the time span of one wheel file.
	wheelSlot = time.Minute
	// prefetch loads a slot this long before it starts.
	prefetch = 2 * time.Second
	// saveEvery bounds how often progress is made durable while busy; at
	// most this much work is redone after a crash.
	saveEvery = 20 * time.Millisecond
	// deliverBatch bounds one Put.
	deliverBatch = 128
)

// timerState is what the wheel persists: the next timer-topic offset to
// index, and the cursor: every indexed timer ordered before
// (CursorMs, CursorOffset) has been delivered.
type timerState struct {
	IndexOffset  int64 `json:"indexOffset"`
	CursorMs     int64 `json:"cursorMs"`
	CursorOffset int64 `json:"cursorOffset"`
}

// timerService indexes the timer topic into the wheel and delivers due
// timers. One goroutine runs it; only close is called from elsewhere,
// after that goroutine ended.
type timerService struct {
	s    *Service
	w    *wheel
	wake chan struct{}

	st            timerState
	cursor        entry
	due           entryHeap // loaded timers (slots ≤ loadedThrough) not yet delivered
	loadedThrough int64
	dirty         bool
	lastSave      time.Time

	delivered atomic.Int64
	pending   atomic.Int64 // timers in memory

	// recalls are Recall's requests (recall.go); pendingRecalls wait
	// for the index to reach their message; recalled are the recalled
	// entries not yet passed by the saved cursor, skipped when due.
	recalls        chan *recallReq
	pendingRecalls []*recallReq
	recalled       map[entry]recalledEntry
	skipped        atomic.Int64 // recalled timers skipped
	// recalledCopy is the durable recalled set as last saved, for
	// GET_ALL_DELAY_OFFSET's answer (read by other goroutines); merges
	// are a master's recalled entries for a slave (applyMasterProgress).
	recalledCopy atomic.Pointer[[]recalledEntry]
	merges       chan *mergeReq
	// indexedLog is past the commit-log offset of the last timer record
	// indexed since the start: the timer queue is in log order, so every
	// timer record below it is indexed.
	indexedLog int64
}

func newTimerService(s *Service) (*timerService, error) {
	slot := wheelSlot
	if s.cfg.wheelSlot > 0 {
		slot = s.cfg.wheelSlot
	}
	w, err := openWheel(filepath.Join(s.b.DataDir(), "timerwheel"), slot.Milliseconds())
	if err != nil {
		return nil, err
	}
	t := &timerService{s: s, w: w, wake: make(chan struct{}, 1), recalls: make(chan *recallReq, 16), merges: make(chan *mergeReq, 1)}
	if _, err := s.b.LoadMeta(timerDoc, &t.st); err != nil {
		w.close()
		return nil, fmt.Errorf("schedule: %w", err)
	}
	if err := t.loadRecalled(); err != nil {
		w.close()
		return nil, err
	}
	t.cursor = entry{At: t.st.CursorMs, Offset: t.st.CursorOffset}
	t.loadedThrough = w.slotOf(t.cursor.At) - 1
	return t, nil
}

func (t *timerService) run(ctx context.Context) {
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	var res store.ReadResult
	defer t.failMerges()
	defer t.failRecalls()
	for ctx.Err() == nil {
		more := t.index(ctx, &res)
		now := t.s.now().UnixMilli()
		t.load(now + prefetch.Milliseconds())
		t.serveRecalls(ctx)
		t.serveMerges()
		retry := false
		if err := t.deliver(ctx, now); err != nil {
			if ctx.Err() != nil {
				return
			}
			t.s.log.Warn("deliver timer messages", "err", err)
			retry = true
		}
		if len(t.due) == 0 || t.due[0].At > now {
			// Everything due is delivered: move the cursor to now.
			if c := (entry{At: now + 1}); t.cursor.less(c) {
				t.cursor = c
			}
		}
		wait := maxSleep
		if t.dirty && t.consistent() {
			if time.Since(t.lastSave) >= saveEvery {
				t.persist()
			} else {
				wait = saveEvery
			}
		}
		// The waits below count from now, after the delivery and the
		// save: a Put or an fsync under load can take hundreds of
		// milliseconds, and a wait counted from before them would
		// deliver the next timer that much late.
		now = t.s.now().UnixMilli()
		switch {
		case retry:
			wait = time.Second
		case more:
			wait = 0
		default:
			if len(t.due) > 0 {
				wait = min(wait, time.Duration(t.due[0].At-now)*time.Millisecond)
			}
			if ns, ok := t.w.next(t.loadedThrough); ok {
				wait = min(wait, time.Duration(t.w.slotStart(ns)-prefetch.Milliseconds()-now)*time.Millisecond)
			}
		}
		if len(t.pendingRecalls) > 0 {
			wait = min(wait, 10*time.Millisecond) // the index is behind a recall
		}
		if wait > 0 {
			sleep(ctx, tm, wait, t.wake)
		}
	}
}

// index reads new messages of the timer topic into the wheel; it reports
// whether more are waiting.
func (t *timerService) index(ctx context.Context, res *store.ReadResult) bool {
	q := store.Queue{Topic: broker.TimerTopic}
	min, max, err := t.s.b.Store().Offsets(q)
	if err != nil {
		t.s.log.Warn("timer queue offsets", "err", err)
		return false
	}
	if t.st.IndexOffset < min || t.st.IndexOffset > max {
		t.s.log.Warn("timer index offset outside the queue, clamped", "offset", t.st.IndexOffset, "min", min, "max", max)
		t.st.IndexOffset = clamp(t.st.IndexOffset, min, max)
		t.dirty = true
	}
	if t.st.IndexOffset >= max {
		return false
	}
	res.Reset()
	if err := t.s.b.Store().Read(ctx, q, t.st.IndexOffset, store.ReadOptions{MaxMessages: 1024, MaxBytes: 8 << 20}, res); err != nil {
		if ctx.Err() == nil {
			t.s.log.Warn("read timer queue", "offset", t.st.IndexOffset, "err", err)
		}
		return false
	}
	start := t.st.IndexOffset
	for i, rec := range res.Records {
		if err := t.indexOne(rec); err != nil {
			t.s.log.Error("skip timer record", "offset", res.QueueOffsets[i], "err", err)
		}
		t.st.IndexOffset = res.QueueOffsets[i] + 1
	}
	if len(res.Records) == 0 && res.NextOffset > t.st.IndexOffset {
		t.st.IndexOffset = res.NextOffset
	}
	if t.st.IndexOffset != start {
		t.dirty = true
	}
	return t.st.IndexOffset < max && t.st.IndexOffset != start
}

func (t *timerService) indexOne(rec []byte) error {
	m, _, err := message.DecodeStored(rec)
	if err != nil {
		return err
	}
	at, err := strconv.ParseInt(m.Properties[message.PropertyTimerOut], 10, 64)
	if err != nil {
		return fmt.Errorf("schedule: timer message at %d: bad %s: %w", m.CommitLogOffset, message.PropertyTimerOut, err)
	}
	e := entry{At: at, Offset: m.CommitLogOffset}
	t.indexedLog = max(t.indexedLog, e.Offset+1)
	if e.less(t.cursor) {
		// Indexed after its time passed: due now. It is delivered before
		// the next save, so it needs no file.
		heap.Push(&t.due, e)
		t.pending.Add(1)
		return nil
	}
	if err := t.w.add(e); err != nil {
		return err
	}
	if t.w.slotOf(at) <= t.loadedThrough {
		heap.Push(&t.due, e)
		t.pending.Add(1)
	}
	return nil
}

// load brings every slot starting before limitMs into memory.
func (t *timerService) load(limitMs int64) {
	target := t.w.slotOf(limitMs)
	for {
		ns, ok := t.w.next(t.loadedThrough)
		if !ok || ns > target {
			break
		}
		es, err := t.w.load(ns, t.cursor)
		if err != nil {
			t.s.log.Error("load timer slot", "slot", ns, "err", err)
			return
		}
		if len(t.due) == 0 {
			t.due = es // sorted, hence a heap
		} else {
			t.due = append(t.due, es...)
			heap.Init(&t.due)
		}
		t.pending.Add(int64(len(es)))
		t.loadedThrough = ns
	}
	t.loadedThrough = max(t.loadedThrough, target)
}

// deliver puts every loaded timer due at now to its real topic.
func (t *timerService) deliver(ctx context.Context, now int64) error {
	batch := make([]*message.Ext, 0, deliverBatch)
	popped := make([]entry, 0, deliverBatch)
	for len(t.due) > 0 && t.due[0].At <= now {
		batch, popped = batch[:0], popped[:0]
		for len(t.due) > 0 && t.due[0].At <= now && len(popped) < deliverBatch {
			e := heap.Pop(&t.due).(entry)
			popped = append(popped, e)
			rec, err := t.s.b.Lookup(ctx, e.Offset)
			if err == nil {
				var m *message.Ext
				if m, err = release(rec, now); err == nil {
					if t.isRecalled(e, m) {
						t.skipped.Add(1)
						continue
					}
					batch = append(batch, m)
					continue
				}
			}
			if ctx.Err() != nil {
				t.requeue(popped)
				return ctx.Err()
			}
			t.s.log.Error("skip undeliverable timer message", "offset", e.Offset, "at", e.At, "err", err)
		}
		if len(batch) > 0 {
			if _, err := t.s.b.Put(releasing(ctx), batch); err != nil {
				t.requeue(popped)
				return err
			}
		}
		t.pending.Add(-int64(len(popped)))
		t.delivered.Add(int64(len(batch)))
		if last := popped[len(popped)-1]; t.cursor.less(entry{At: last.At, Offset: last.Offset + 1}) {
			t.cursor = entry{At: last.At, Offset: last.Offset + 1}
		}
		t.dirty = true
	}
	return nil
}

func (t *timerService) requeue(es []entry) {
	for _, e := range es {
		heap.Push(&t.due, e)
	}
}

// persist makes the wheel durable, saves the progress and drops the files
// of slots wholly delivered.
func (t *timerService) persist() {
	t.lastSave = time.Now()
	if err := t.w.sync(); err != nil {
		t.s.log.Error("sync timer wheel", "err", err)
		return
	}
	t.st.CursorMs, t.st.CursorOffset = t.cursor.At, t.cursor.Offset
	if err := t.s.b.SaveMeta(timerDoc, t.st); err != nil {
		t.s.log.Error("persist timer progress", "err", err)
		return
	}
	t.dirty = false
	t.pruneRecalled()
	if err := t.w.remove(t.w.slotOf(t.cursor.At) - 1); err != nil {
		t.s.log.Warn("drop delivered timer slots", "err", err)
	}
}

// consistent reports whether the progress may be saved: no timer ordered
// before the cursor waits undelivered (one indexed late and not delivered
// yet has no wheel file; the last saved state indexes it again).
func (t *timerService) consistent() bool {
	return len(t.due) == 0 || !t.due[0].less(t.cursor)
}

func (t *timerService) close() error {
	if t.dirty && t.consistent() {
		t.persist()
	}
	return t.w.close()
}
