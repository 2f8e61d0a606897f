package schedule

// Recalling timer messages (RocketMQ 5.3's RecallMessage).
//
// A timer message's send is answered with a recall handle in Java's format
// (common/producer/RecallMessageHandle.HandleV1): base64url of
// "v1 <topic> <brokerName> <deliverMs+1> <messageId>". Recall decodes it,
// checks that the topic is the request's and the broker is this one, and
// asks the timer goroutine (the only writer of the wheel's state) to find
// the held message: an entry of the wheel at the handle's delivery time
// whose record has the handle's message id and real topic. A handle that
// names no held message is refused (NOT_FOUND), so a made-up handle never
// recalls another message; Java's broker answers success and writes a
// delete marker whatever the handle names.
//
// A recalled entry is kept in a metadata document (recallDoc, written
// before Recall answers) and in memory; the wheel skips it when it comes
// due — the entry's delivery time and commit-log offset, and the held
// record's message id and real topic, all match — and it is dropped from
// the document once the saved cursor is past it. The document is the
// schedule module's own state, beside the wheel's progress, so it is the
// same on both storage engines and survives a restart.
//
// Java writes a delete marker into the timer topic instead, which HA
// copies to slaves. Quiver copies the document: the master's answer to
// GET_ALL_DELAY_OFFSET carries the recalled entries beside Java's
// offsetTable (field timerRecalled, which Java's fastjson and Quiver's
// other readers ignore), the slave copies it with the delay progress
// (modules/ha, every ha.meta_interval, once its log holds what the
// master's held) and merges it into its own set and document before the
// copy is acknowledged (mergeRecalled). A slave promoted by failover then
// skips those messages as the master would. The copy is periodic: a
// recall made after the slave's last copy (within ha.meta_interval, 10 s
// by default, plus the slave's replication lag) is lost if the master
// fails then, and the promoted slave delivers that message — as it may
// deliver timers its master delivered, whose progress is not copied.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// recallDoc is the metadata document of recalled, not yet passed timers.
const recallDoc = "timerRecalled"

// Recall errors; Recall wraps one of them with the reason.
var (
	// ErrRecallInvalid: the handle is malformed or names another topic
	// or broker (Java: ILLEGAL_OPERATION).
	ErrRecallInvalid = errors.New("schedule: recall handle is invalid")
	// ErrRecallTooLate: the delivery time has passed; the message is
	// delivered or being delivered (Java: ILLEGAL_OPERATION, "timestamp
	// invalid").
	ErrRecallTooLate = errors.New("schedule: too late to recall")
	// ErrRecallNotFound: no held timer message matches the handle.
	ErrRecallNotFound = errors.New("schedule: no scheduled message matches the recall handle")
	// ErrRecallUnavailable: this broker does not deliver timers now (a
	// slave, or the service is stopped).
	ErrRecallUnavailable = errors.New("schedule: recall is not available on this broker")
)

const handleVersion = "v1"

// Handle is a decoded recall handle.
type Handle struct {
	Topic      string
	BrokerName string
	// Timestamp is the handle's time: the delivery time (epoch ms) plus
	// one, as Java writes it ("consider of floor").
	Timestamp int64
	MessageID string
}

// EncodeHandle builds the recall handle of a timer message held until
// deliverMs, as Java's SendMessageProcessor.attachRecallHandle does.
func EncodeHandle(topic, brokerName string, deliverMs int64, messageID string) string {
	raw := strings.Join([]string{handleVersion, topic, brokerName, strconv.FormatInt(deliverMs+1, 10), messageID}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// DecodeHandle reads a recall handle (padded or not).
func DecodeHandle(h string) (Handle, error) {
	if h == "" || len(h) > 4096 {
		return Handle{}, fmt.Errorf("%w: empty or too long", ErrRecallInvalid)
	}
	raw, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(h); err != nil {
			return Handle{}, fmt.Errorf("%w: not base64url", ErrRecallInvalid)
		}
	}
	items := strings.Split(string(raw), " ")
	if len(items) < 5 || items[0] != handleVersion {
		return Handle{}, fmt.Errorf("%w: not a %s handle", ErrRecallInvalid, handleVersion)
	}
	ts, err := strconv.ParseInt(items[3], 10, 64)
	if err != nil || ts <= 0 || items[1] == "" || items[4] == "" {
		return Handle{}, fmt.Errorf("%w: bad fields", ErrRecallInvalid)
	}
	return Handle{Topic: items[1], BrokerName: items[2], Timestamp: ts, MessageID: items[4]}, nil
}

// HandleOf returns the recall handle of m after a put stored it: a timer
// message held in the timer topic gets one; anything else (delivered at
// once, a delay level, a retry) "".
func HandleOf(brokerName string, m *message.Ext) string {
	if m.Topic != broker.TimerTopic {
		return ""
	}
	at, err := strconv.ParseInt(m.Properties[message.PropertyTimerOut], 10, 64)
	topic := m.Properties[message.PropertyRealTopic]
	id := m.Properties[message.PropertyUniqKey]
	if err != nil || topic == "" || id == "" || strings.HasPrefix(topic, "%RETRY%") {
		return ""
	}
	return EncodeHandle(topic, brokerName, at, id)
}

// recallReq asks the timer goroutine to recall one message.
type recallReq struct {
	at      int64 // delivery time
	id      string
	topic   string
	indexTo int64 // the timer queue's end when asked: index this far first
	done    chan error
}

type recalledEntry struct {
	At     int64  `json:"at"`
	Offset int64  `json:"offset"`
	ID     string `json:"msgId"`
	Topic  string `json:"topic"`
}

type recalledState struct {
	Entries []recalledEntry `json:"entries"`
}

// Recall recalls the timer message a handle names, for a request on
// topic; it returns the message id. Once it returns nil the message is
// never delivered (the recall is durable).
func (s *Service) Recall(ctx context.Context, topic, handle string) (string, error) {
	h, err := DecodeHandle(handle)
	if err != nil {
		return "", err
	}
	if h.Topic != topic {
		return "", fmt.Errorf("%w: the handle is for topic %s, not %s", ErrRecallInvalid, h.Topic, topic)
	}
	if name := s.b.Config().Name; h.BrokerName != name {
		return "", fmt.Errorf("%w: the handle is for broker %s, this is %s", ErrRecallInvalid, h.BrokerName, name)
	}
	now := s.now().UnixMilli()
	if left := h.Timestamp - now; left <= 0 {
		return "", fmt.Errorf("%w: message %s was due at %d", ErrRecallTooLate, h.MessageID, h.Timestamp-1)
	} else if left > s.cfg.MaxDelay.Milliseconds()+1 {
		return "", fmt.Errorf("%w: the time is beyond schedule.max_delay", ErrRecallInvalid)
	}
	if s.b.IsSlave() {
		return "", fmt.Errorf("%w: a slave", ErrRecallUnavailable)
	}
	_, end, err := s.b.Store().Offsets(store.Queue{Topic: broker.TimerTopic})
	if err != nil {
		return "", fmt.Errorf("schedule: recall: timer queue: %w", err)
	}
	r := &recallReq{at: h.Timestamp - 1, id: h.MessageID, topic: h.Topic, indexTo: end, done: make(chan error, 1)}
	select {
	case s.timer.recalls <- r:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.stopped:
		return "", fmt.Errorf("%w: stopped", ErrRecallUnavailable)
	}
	signal(s.timer.wake)
	select {
	case err := <-r.done:
		if err != nil {
			return "", err
		}
		return h.MessageID, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.stopped:
		return "", fmt.Errorf("%w: stopped", ErrRecallUnavailable)
	}
}

// takeRecalls moves the waiting requests to pending (timer goroutine).
func (t *timerService) takeRecalls() {
	for {
		select {
		case r := <-t.recalls:
			t.pendingRecalls = append(t.pendingRecalls, r)
		default:
			return
		}
	}
}

// serveRecalls answers the pending requests whose messages are indexed.
func (t *timerService) serveRecalls(ctx context.Context) {
	t.takeRecalls()
	kept := t.pendingRecalls[:0]
	for _, r := range t.pendingRecalls {
		if t.st.IndexOffset < r.indexTo {
			kept = append(kept, r)
			continue
		}
		r.done <- t.recall(ctx, r)
	}
	clear(t.pendingRecalls[len(kept):])
	t.pendingRecalls = kept
}

// failRecalls answers every pending request (the goroutine ends).
func (t *timerService) failRecalls() {
	t.takeRecalls()
	for _, r := range t.pendingRecalls {
		r.done <- fmt.Errorf("%w: stopped", ErrRecallUnavailable)
	}
	t.pendingRecalls = nil
}

// recall finds the held message and records it recalled.
func (t *timerService) recall(ctx context.Context, r *recallReq) error {
	for e, re := range t.recalled {
		if e.At == r.at && re.ID == r.id && re.Topic == r.topic {
			return nil // recalled before
		}
	}
	var cands []entry
	if t.w.slotOf(r.at) <= t.loadedThrough {
		for _, e := range t.due {
			if e.At == r.at {
				cands = append(cands, e)
			}
		}
	} else {
		es, err := t.w.load(t.w.slotOf(r.at), entry{At: r.at})
		if err != nil {
			return fmt.Errorf("schedule: recall: %w", err)
		}
		for _, e := range es {
			if e.At == r.at {
				cands = append(cands, e)
			}
		}
	}
	for _, e := range cands {
		rec, err := t.s.b.Lookup(ctx, e.Offset)
		if err != nil {
			return fmt.Errorf("schedule: recall: %w", err)
		}
		m, _, err := message.DecodeStored(rec)
		if err != nil {
			return fmt.Errorf("schedule: recall: held message at %d: %w", e.Offset, err)
		}
		if m.Properties[message.PropertyUniqKey] != r.id || m.Properties[message.PropertyRealTopic] != r.topic {
			continue
		}
		t.recalled[e] = recalledEntry{At: e.At, Offset: e.Offset, ID: r.id, Topic: r.topic}
		if err := t.saveRecalled(); err != nil {
			delete(t.recalled, e)
			return fmt.Errorf("schedule: recall: %w", err)
		}
		t.s.log.Info("timer message recalled", "topic", r.topic, "msgId", r.id, "at", r.at)
		return nil
	}
	if r.at <= t.s.now().UnixMilli() || (entry{At: r.at, Offset: 1<<63 - 1}).less(t.cursor) {
		return fmt.Errorf("%w: message %s was due at %d", ErrRecallTooLate, r.id, r.at)
	}
	return fmt.Errorf("%w (topic %s, message %s)", ErrRecallNotFound, r.topic, r.id)
}

func (t *timerService) loadRecalled() error {
	var st recalledState
	if _, err := t.s.b.LoadMeta(recallDoc, &st); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	t.recalled = make(map[entry]recalledEntry, len(st.Entries))
	for _, re := range st.Entries {
		t.recalled[entry{At: re.At, Offset: re.Offset}] = re
	}
	t.recalledCopy.Store(&st.Entries)
	return nil
}

// saveRecalled makes the recalled set durable; once saved it is what
// GET_ALL_DELAY_OFFSET answers (recalledCopy).
func (t *timerService) saveRecalled() error {
	st := recalledState{Entries: make([]recalledEntry, 0, len(t.recalled))}
	for _, re := range t.recalled {
		st.Entries = append(st.Entries, re)
	}
	slices.SortFunc(st.Entries, func(a, b recalledEntry) int {
		return compareEntries(entry{At: a.At, Offset: a.Offset}, entry{At: b.At, Offset: b.Offset})
	})
	if err := t.s.b.SaveMeta(recallDoc, st); err != nil {
		return err
	}
	t.recalledCopy.Store(&st.Entries)
	return nil
}

// isRecalled reports whether the held timer e, released as m, was
// recalled: the same entry, and the record's message id and real topic
// are the recall's (a slave's log holds the master's records at the
// master's offsets; the check keeps an entry copied from a former master
// from matching another record).
func (t *timerService) isRecalled(e entry, m *message.Ext) bool {
	re, ok := t.recalled[e]
	return ok && re.ID == m.Properties[message.PropertyUniqKey] && re.Topic == m.Topic
}

// validRecalled reports what is wrong with a recalled entry from another
// broker ("" if nothing).
func validRecalled(re recalledEntry) string {
	switch {
	case re.At <= 0:
		return "no delivery time"
	case re.Offset < 0:
		return "a negative offset"
	case re.ID == "" || re.Topic == "":
		return "no message id or topic"
	}
	return ""
}

// mergeReq asks the timer goroutine to merge a master's recalled entries.
type mergeReq struct {
	entries []recalledEntry
	done    chan mergeResult
}

type mergeResult struct {
	added int
	err   error
}

// mergeTimeout bounds how long a slave's copy waits for the timer
// goroutine (it is not running before Start).
const mergeTimeout = 10 * time.Second

// mergeRecalled merges a master's recalled entries into this broker's set
// and makes them durable before it returns; it reports how many were new.
// Entries the wheel's cursor passed are dropped, as the master drops its
// own.
func (s *Service) mergeRecalled(entries []recalledEntry) (int, error) {
	for _, re := range entries {
		if why := validRecalled(re); why != "" {
			return 0, fmt.Errorf("schedule: master's recalled timer %+v: %s", re, why)
		}
	}
	if len(entries) == 0 {
		return 0, nil
	}
	r := &mergeReq{entries: entries, done: make(chan mergeResult, 1)}
	tm := time.NewTimer(mergeTimeout)
	defer tm.Stop()
	select {
	case s.timer.merges <- r:
	case <-s.stopped:
		return 0, fmt.Errorf("%w: stopped", ErrRecallUnavailable)
	case <-tm.C:
		return 0, errors.New("schedule: merge recalled timers: the timer wheel is not running")
	}
	signal(s.timer.wake)
	select {
	case res := <-r.done:
		return res.added, res.err
	case <-s.stopped:
		return 0, fmt.Errorf("%w: stopped", ErrRecallUnavailable)
	case <-tm.C:
		return 0, errors.New("schedule: merge recalled timers: the timer wheel did not answer")
	}
}

// serveMerges merges a waiting master's recalled set (timer goroutine).
func (t *timerService) serveMerges() {
	select {
	case r := <-t.merges:
		r.done <- t.merge(r.entries)
	default:
	}
}

func (t *timerService) merge(entries []recalledEntry) mergeResult {
	var added []entry
	caughtUp := t.caughtUp()
	for _, re := range entries {
		e := entry{At: re.At, Offset: re.Offset}
		if _, ok := t.recalled[e]; ok || t.passed(e, caughtUp) {
			continue // known, or passed: this wheel delivers it no more
		}
		t.recalled[e] = re
		added = append(added, e)
	}
	if len(added) == 0 {
		return mergeResult{}
	}
	if err := t.saveRecalled(); err != nil {
		for _, e := range added {
			delete(t.recalled, e)
		}
		return mergeResult{err: fmt.Errorf("schedule: merge recalled timers: %w", err)}
	}
	return mergeResult{added: len(added)}
}

// passed reports whether the recalled timer e can be forgotten: the
// wheel will not deliver it any more. Its record is indexed (a slave may
// hold a master's recalled entry before its index reaches the record; one
// indexed after its time is due at once), the cursor is past it and no
// timer before the cursor waits undelivered. caughtUp is whether the
// index has reached the timer queue's end.
func (t *timerService) passed(e entry, caughtUp bool) bool {
	return e.less(t.cursor) && t.consistent() && (e.Offset < t.indexedLog || caughtUp)
}

// caughtUp reports whether every record of the timer queue is indexed.
func (t *timerService) caughtUp() bool {
	_, end, err := t.s.b.Store().Offsets(store.Queue{Topic: broker.TimerTopic})
	return err == nil && t.st.IndexOffset >= end
}

// failMerges answers a waiting merge (the goroutine ends).
func (t *timerService) failMerges() {
	select {
	case r := <-t.merges:
		r.done <- mergeResult{err: fmt.Errorf("%w: stopped", ErrRecallUnavailable)}
	default:
	}
}

// pruneRecalled forgets recalled entries the saved cursor passed.
func (t *timerService) pruneRecalled() {
	changed := false
	caughtUp := t.caughtUp()
	for e := range t.recalled {
		if t.passed(e, caughtUp) {
			delete(t.recalled, e)
			changed = true
		}
	}
	if changed {
		if err := t.saveRecalled(); err != nil {
			t.s.log.Warn("persist recalled timers", "err", err)
		}
	}
}

// Recalled is how many timer messages were skipped because recalled since
// the service started.
func (s *Service) Recalled() int64 { return s.timer.skipped.Load() }
