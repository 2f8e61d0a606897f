// Package schedule is the scheduled-message module: RocketMQ 4 delay
// levels (a message with property DELAY=n waits in SCHEDULE_TOPIC_XXXX
// queue n-1 and a per-level scheduler delivers it when due) and RocketMQ 5
// style timers (__STARTDELIVERTIME, TIMER_DELIVER_MS, TIMER_DELAY_MS: the
// message waits in rmq_sys_wheel_timer and a file-backed timing wheel
// delivers it at its time).
//
// Both paths keep their progress in broker metadata documents and deliver
// through broker.Put, so a restart neither skips nor repeats deliveries
// (beyond at-least-once at the instant of a crash).
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// progressDoc is the per-level delivery progress (RocketMQ delayOffset.json):
// level → next queue offset to deliver.
const progressDoc = "delayOffset"

// maxSleep bounds every wait so clock jumps and missed wakes heal.
const maxSleep = 5 * time.Second

// Service runs the delay-level schedulers and the timer wheel of a broker.
type Service struct {
	cfg    *Config
	b      *broker.Broker
	log    *slog.Logger
	levels []time.Duration
	now    func() time.Time

	lv    []*level
	timer *timerService

	saveMu sync.Mutex // serializes progressDoc saves

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped chan struct{} // closed by Stop: Recall calls return
	stop    sync.Once
}

type level struct {
	n      int // 1-based
	delay  time.Duration
	wake   chan struct{}
	mu     sync.Mutex
	offset int64
}

type levelDoc struct {
	OffsetTable map[string]int64 `json:"offsetTable"`
}

// delayOffsetsBody is GET_ALL_DELAY_OFFSET's answer: Java's
// DelayOffsetSerializeWrapper, plus the recalled timers not yet passed
// (recall.go) for slaves to copy. Java reads the body with fastjson, which
// ignores the extra field, as do Quiver's other readers (modules/metrics);
// a Java master's answer has none (no recalled timers to merge), and its
// offsetTable keys are unquoted numbers (read with UnmarshalFastjson).
type delayOffsetsBody struct {
	OffsetTable   map[string]int64 `json:"offsetTable"`
	TimerRecalled []recalledEntry  `json:"timerRecalled,omitempty"`
}

// New creates the schedule and timer topics, loads progress and registers
// the put hook and store listener on b. Start runs the schedulers.
func New(cfg *Config, b *broker.Broker) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, b: b, log: b.Logger().With("component", "schedule"), levels: cfg.Levels(), now: time.Now, stopped: make(chan struct{})}
	if cfg.now != nil {
		s.now = cfg.now
	}
	n := int32(len(s.levels))
	if _, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: protocol.ScheduleTopic, ReadQueueNums: n, WriteQueueNums: n, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	if _, err := b.EnsureTopic(&protocol.TopicConfig{TopicName: broker.TimerTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	var doc levelDoc
	if _, err := b.LoadMeta(progressDoc, &doc); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	for i, d := range s.levels {
		l := &level{n: i + 1, delay: d, wake: make(chan struct{}, 1), offset: doc.OffsetTable[strconv.Itoa(i+1)]}
		s.lv = append(s.lv, l)
	}
	t, err := newTimerService(s)
	if err != nil {
		return nil, err
	}
	s.timer = t
	b.AddPutHook(s.hook)
	b.AddStoredListener(s.stored)
	b.Router().Register(remoting.GetAllDelayOffset, s.handleDelayOffsets)
	b.Router().Register(remoting.RecallMessage, s.handleRecall, remoting.Mode{KeepsNothing: true}) // recall_remoting.go
	b.SetSendAnswerExt(s.sendAnswerExt)
	b.AddReplicaMeta(broker.ReplicaMeta{Name: "delay offsets", Code: remoting.GetAllDelayOffset, Apply: s.applyMasterProgress})
	return s, nil
}

// applyMasterProgress takes the master's delay progress and recalled
// timers on a slave (GET_ALL_DELAY_OFFSET, copied by modules/ha), so that
// a slave promoted by failover does not deliver again what the master
// delivered, nor what was recalled on the master. Each level's offset is
// capped at what this slave's schedule queue holds: an asynchronous slave
// may lack the master's last schedule records, and progress past its own
// end would skip the records the new master writes there. The recalled
// timers are merged into this broker's (mergeRecalled) and durable when
// it returns.
func (s *Service) applyMasterProgress(body []byte) error {
	if !s.b.IsSlave() {
		return nil // promoted meanwhile: this broker's own progress rules
	}
	// A Java master writes the table with fastjson: integer keys unquoted,
	// {"offsetTable":{1:5,2:0}}.
	var doc delayOffsetsBody
	if err := protocol.UnmarshalFastjson(body, &doc); err != nil {
		return fmt.Errorf("schedule: master's delay offsets: %w", err)
	}
	errLevels := s.applyLevels(doc.OffsetTable)
	n, err := s.mergeRecalled(doc.TimerRecalled)
	if n > 0 {
		s.log.Info("copied recalled timers from master", "new", n)
	}
	return errors.Join(errLevels, err)
}

// applyLevels takes the master's per-level progress (applyMasterProgress).
func (s *Service) applyLevels(table map[string]int64) error {
	changed := false
	for _, l := range s.lv {
		off, ok := table[strconv.Itoa(l.n)]
		if !ok || off < 0 {
			continue
		}
		_, max, err := s.b.Store().Offsets(store.Queue{Topic: protocol.ScheduleTopic, ID: int32(l.n - 1)})
		if err != nil {
			max = 0 // this slave holds none of the level's records yet
		}
		off = min(off, max)
		l.mu.Lock()
		if l.offset != off {
			l.offset, changed = off, true
		}
		l.mu.Unlock()
	}
	if !changed {
		return nil
	}
	return s.saveLevels()
}

// Start runs one goroutine per delay level and the timer wheel.
func (s *Service) Start(context.Context) error {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, l := range s.lv {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runLevel(s.ctx, l)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.timer.run(s.ctx)
	}()
	return nil
}

// Stop stops the schedulers, waits for them and closes the wheel.
func (s *Service) Stop(context.Context) error {
	s.stop.Do(func() { close(s.stopped) })
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	return s.timer.close()
}

// Levels returns the delay of each level.
func (s *Service) Levels() []time.Duration { return append([]time.Duration(nil), s.levels...) }

// ClampLevel maps a requested level onto the table: 0 for none, levels
// above the maximum to the maximum.
func ClampLevel(level, n int) int {
	switch {
	case level <= 0:
		return 0
	case level > n:
		return n
	}
	return level
}

// DueMs is when a message stored at storeMs in a level of delay d is due.
func DueMs(storeMs int64, d time.Duration) int64 { return storeMs + d.Milliseconds() }

// deliverTime reads a timer message's delivery time (epoch ms). ok is
// false when the message carries no timer property.
func deliverTime(p message.Properties, nowMs int64) (ms int64, ok bool, err error) {
	for _, k := range [...]string{message.PropertyStartDeliverTime, message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS} {
		v, has := p[k]
		if !has || v == "" {
			continue
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			return 0, true, &broker.RejectError{Code: remoting.MessageIllegal, Reason: fmt.Sprintf("schedule: property %s=%q is not a time in milliseconds", k, v)}
		}
		if k == message.PropertyTimerDelayMS {
			n += nowMs
		}
		return n, true, nil
	}
	return 0, false, nil
}

// hook moves delayed and timer messages to their holding topics.
func (s *Service) hook(ctx context.Context, m *message.Ext) (int64, bool, error) {
	if m.Topic == protocol.ScheduleTopic || m.Topic == broker.TimerTopic || ctx.Value(releasingKey{}) != nil {
		return 0, false, nil
	}
	if tx := m.SysFlag & message.TransactionMask; tx == message.TransactionPrepared || tx == message.TransactionRollback {
		return 0, false, nil
	}
	now := s.now().UnixMilli()
	at, ok, err := deliverTime(m.Properties, now)
	if err != nil {
		return 0, false, err
	}
	if ok {
		if at <= now {
			return 0, false, nil
		}
		if at-now > s.cfg.MaxDelay.Milliseconds() {
			return 0, false, &broker.RejectError{Code: remoting.MessageIllegal,
				Reason: fmt.Sprintf("schedule: delivery time %s is more than schedule.max_delay %s ahead", time.UnixMilli(at).UTC().Format(time.RFC3339Nano), s.cfg.MaxDelay)}
		}
		hold(m, broker.TimerTopic, 0)
		m.Properties[message.PropertyTimerOut] = strconv.FormatInt(at, 10)
		return at, true, nil
	}
	lvl := ClampLevel(m.DelayLevel(), len(s.levels))
	if lvl == 0 {
		return 0, false, nil
	}
	m.Properties[message.PropertyDelayTimeLevel] = strconv.Itoa(lvl)
	hold(m, protocol.ScheduleTopic, int32(lvl-1))
	return DueMs(now, s.levels[lvl-1]), true, nil
}

func hold(m *message.Ext, topic string, queue int32) {
	if m.Properties == nil {
		m.Properties = message.Properties{}
	}
	m.Properties[message.PropertyRealTopic] = m.Topic
	m.Properties[message.PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Topic, m.QueueID = topic, queue
}

// stored wakes the scheduler of every level or the wheel that got a message.
func (s *Service) stored(msgs []*message.Ext, _ []store.Position) {
	for _, m := range msgs {
		switch m.Topic {
		case protocol.ScheduleTopic:
			if int(m.QueueID) < len(s.lv) {
				signal(s.lv[m.QueueID].wake)
			}
		case broker.TimerTopic:
			signal(s.timer.wake)
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// release rebuilds the message to deliver from a held record, as Java's
// ScheduleMessageService.messageTimeUp and TimerMessageStore.convertMessage
// do: the real topic and queue are restored and every stored property is
// kept. Java stores the held message's properties string unchanged (it
// clears DELAY, REAL_TOPIC and REAL_QID only from the map its own hooks
// read), so a consumer of a delayed message sees DELAY, REAL_TOPIC and
// REAL_QID — its getDelayTimeLevel() is the level — and of a timer message
// TIMER_DELIVER_MS (RocketMQ 5's delivery_timestamp) and TIMER_OUT_MS.
// A timer message also gets TIMER_ENQUEUE_MS (the held record's store time)
// and TIMER_DEQUEUE_MS (nowMs); dequeueMs < 0 adds neither (delay levels).
// The store assigns a new store time. Deliver with releasing(ctx), so that
// the schedule hook does not hold the message again.
func release(rec []byte, dequeueMs int64) (*message.Ext, error) {
	old, _, err := message.DecodeStored(rec)
	if err != nil {
		return nil, err
	}
	p := old.Properties
	topic := p[message.PropertyRealTopic]
	if topic == "" {
		return nil, fmt.Errorf("schedule: held message at %d has no %s", old.CommitLogOffset, message.PropertyRealTopic)
	}
	q, _ := strconv.Atoi(p[message.PropertyRealQueueID])
	if dequeueMs >= 0 {
		p[message.PropertyTimerEnqueue] = strconv.FormatInt(old.StoreTimestamp, 10)
		p[message.PropertyTimerDequeue] = strconv.FormatInt(dequeueMs, 10)
	}
	return &message.Ext{
		Message: message.Message{Topic: topic, Flag: old.Flag, Properties: p, Body: old.Body},
		QueueID: int32(q), SysFlag: old.SysFlag, BornTimestamp: old.BornTimestamp, BornHost: old.BornHost,
		ReconsumeTimes: old.ReconsumeTimes, PreparedTransactionOffset: old.PreparedTransactionOffset,
	}, nil
}

// releasingKey marks the context of a delivery's Put: the released
// messages still carry DELAY or a past timer property, and the hook lets
// them through instead of holding them again.
type releasingKey struct{}

func releasing(ctx context.Context) context.Context {
	return context.WithValue(ctx, releasingKey{}, true)
}

// sleep waits d (bounded by maxSleep), a wake or ctx.
func sleep(ctx context.Context, t *time.Timer, d time.Duration, wake <-chan struct{}) {
	d = min(d, maxSleep)
	if d <= 0 {
		return
	}
	t.Reset(d)
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	}
	t.Stop()
}

func (s *Service) runLevel(ctx context.Context, l *level) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	var res store.ReadResult
	for ctx.Err() == nil {
		wait, idle := s.deliverLevel(ctx, l, &res)
		if wait <= 0 {
			continue
		}
		// A new message only matters when the queue is drained: otherwise
		// the head is not due yet and everything behind it is later still.
		var wake <-chan struct{}
		if idle {
			wake = l.wake
		}
		sleep(ctx, t, wait, wake)
	}
}

// deliverLevel delivers the due messages at the head of a level's queue;
// it returns how long to wait before trying again (0: go on at once) and
// whether the queue is drained (a put should wake the level).
func (s *Service) deliverLevel(ctx context.Context, l *level, res *store.ReadResult) (time.Duration, bool) {
	if s.b.IsSlave() {
		// The master delivers; a slave copies its progress
		// (applyMasterProgress) and delivers once promoted.
		return time.Second, true
	}
	q := store.Queue{Topic: protocol.ScheduleTopic, ID: int32(l.n - 1)}
	l.mu.Lock()
	off := l.offset
	l.mu.Unlock()
	min, max, err := s.b.Store().Offsets(q)
	if err != nil {
		s.log.Warn("schedule queue offsets", "level", l.n, "err", err)
		return time.Second, true
	}
	if off < min || off > max {
		s.log.Warn("schedule progress outside the queue, clamped", "level", l.n, "offset", off, "min", min, "max", max)
		off = clamp(off, min, max)
		s.setLevel(l, off)
	}
	if off >= max {
		return maxSleep, true
	}
	res.Reset()
	if err := s.b.Store().Read(ctx, q, off, store.ReadOptions{MaxMessages: 64, MaxBytes: 4 << 20}, res); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read schedule queue", "level", l.n, "offset", off, "err", err)
		}
		return time.Second, true
	}
	now := s.now().UnixMilli()
	next := off
	var headDue int64 // when the first record not due yet is due; 0: none
	var batch []*message.Ext
	for i, rec := range res.Records {
		h, err := message.PeekHeader(rec)
		if err != nil {
			s.log.Error("skip malformed schedule record", "level", l.n, "offset", res.QueueOffsets[i], "err", err)
			next = res.QueueOffsets[i] + 1
			continue
		}
		if due := DueMs(h.StoreTimestamp, l.delay); due > now {
			headDue = due
			break
		}
		m, err := release(rec, -1)
		if err != nil {
			s.log.Error("skip undeliverable schedule record", "level", l.n, "offset", res.QueueOffsets[i], "err", err)
		} else {
			batch = append(batch, m)
		}
		next = res.QueueOffsets[i] + 1
	}
	if headDue == 0 && len(res.Records) == 0 && res.NextOffset > next {
		next = res.NextOffset
	}
	if len(batch) > 0 {
		if _, err := s.b.Put(releasing(ctx), batch); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("deliver scheduled messages", "level", l.n, "n", len(batch), "err", err)
			}
			return time.Second, false
		}
	}
	if next != off {
		s.setLevel(l, next)
		if err := s.saveLevels(); err != nil {
			s.log.Error("persist schedule progress", "err", err)
		}
	}
	if headDue == 0 {
		if next == off {
			return maxSleep, true
		}
		return 0, true
	}
	// Counted from now, after the Put and the save: under load they can
	// take hundreds of milliseconds, and a wait counted from before them
	// would deliver the head that much late. Due meanwhile: go on at once.
	return time.Duration(headDue-s.now().UnixMilli()) * time.Millisecond, false
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

func (s *Service) setLevel(l *level, off int64) {
	l.mu.Lock()
	l.offset = off
	l.mu.Unlock()
}

// saveLevels persists every level's progress.
func (s *Service) saveLevels() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	doc := levelDoc{OffsetTable: make(map[string]int64, len(s.lv))}
	for _, l := range s.lv {
		l.mu.Lock()
		doc.OffsetTable[strconv.Itoa(l.n)] = l.offset
		l.mu.Unlock()
	}
	return s.b.SaveMeta(progressDoc, doc)
}

// handleDelayOffsets answers GET_ALL_DELAY_OFFSET (45) with Java's
// DelayOffsetSerializeWrapper, {"offsetTable":{"<level>":offset}}, and
// the durable recalled timers not yet passed, "timerRecalled":[...]
// (delayOffsetsBody; absent when there are none).
func (s *Service) handleDelayOffsets(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	doc := delayOffsetsBody{OffsetTable: map[string]int64{}}
	for n, off := range s.Progress() {
		doc.OffsetTable[strconv.Itoa(n)] = off
	}
	if p := s.timer.recalledCopy.Load(); p != nil {
		doc.TimerRecalled = *p
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(doc)
	return resp
}

// Progress returns each level's next offset to deliver (level → offset).
func (s *Service) Progress() map[int]int64 {
	out := make(map[int]int64, len(s.lv))
	for _, l := range s.lv {
		l.mu.Lock()
		out[l.n] = l.offset
		l.mu.Unlock()
	}
	return out
}
