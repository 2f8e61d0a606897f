// Package transaction implements RocketMQ 4.x transactional messages on a
// broker: a prepared send is stored as a half message in
// RMQ_SYS_TRANS_HALF_TOPIC (invisible to consumers), END_TRANSACTION (37)
// commits it to its real topic or rolls it back, and a check-back service
// asks a live producer of the group (CHECK_TRANSACTION_STATE, 39) about
// half messages left undecided.
//
// Other transports share both paths: End (end.go) is the decide path of
// END_TRANSACTION, and a CheckTransport (checktransport.go) registered by
// another module carries check-backs to producers that are not remoting
// connections — the gRPC endpoint's RecoverOrphanedTransactionCommand on a
// 5.x producer's Telemetry stream — asked before the remoting producers.
//
// Every decision (commit, rollback, discard after too many checks) is
// recorded as an op message in RMQ_SYS_TRANS_OP_HALF_TOPIC (tag "d", body =
// the half message's queue offset in decimal, as Java writes it). The set
// of decided half offsets is rebuilt from that topic when the broker
// starts, so a half message has exactly one outcome across restarts: a
// second END_TRANSACTION, or one arriving after a check-back decided, is
// answered SUCCESS and ignored.
//
// Check counts are kept in a persisted map (half offset → checks sent)
// rather than by re-putting the half message with an incremented
// TRANSACTION_CHECK_TIMES as Java does: the half message then keeps one
// identity (its queue offset) for its whole life, which is what makes the
// exactly-once rule simple. The count is still written into the
// TRANSACTION_CHECK_TIMES property of the message sent with each check.
package transaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// ErrDisabled refuses transactional sends when transaction.enabled is off.
var ErrDisabled = errors.New("transaction: transactional messages are disabled on this broker (transaction.enabled=false)")

// errDisabledReject is ErrDisabled as the send path answers it: one
// message (the client's remark), matched by errors.Is(err, ErrDisabled)
// and by errors.As(err, **broker.RejectError) with NO_PERMISSION, as Java
// answers when rejectTransactionMessage is set.
var errDisabledReject error = disabledError{&broker.RejectError{Code: remoting.NoPermission, Reason: ErrDisabled.Error()}}

type disabledError struct{ reject *broker.RejectError }

func (e disabledError) Error() string   { return e.reject.Reason }
func (e disabledError) Unwrap() []error { return []error{ErrDisabled, e.reject} }

// Queues used by the service. Both topics have a single queue 0.
var (
	halfQueue = store.Queue{Topic: protocol.TransHalfTopic, ID: 0}
	opQueue   = store.Queue{Topic: protocol.TransOpHalfTopic, ID: 0}
)

// opTag is the tag of op messages (Java TransactionalMessageUtil.REMOVETAG).
const opTag = "d"

// delayProps are the properties that delay a message; a half message
// keeps them as parkedPrefix+name until it is committed.
var delayProps = [...]string{message.PropertyDelayTimeLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS, message.PropertyStartDeliverTime}

const parkedPrefix = "__TX_PARKED_"

// metaName is the persisted state document.
const metaName = "transactionCheck"

// defaultRetention bounds the age of a half message when the storage
// retention is unknown (Java: fileReservedTime, 72 h).
const defaultRetention = 72 * time.Hour

// Deps are the service's collaborators.
type Deps struct {
	Broker *broker.Broker
	Logger *slog.Logger
	// Retention discards half messages older than this (storage.retention);
	// default 72h.
	Retention time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Service is the transaction service of one broker.
type Service struct {
	cfg       *Config
	b         *broker.Broker
	st        store.Store
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration

	mu sync.Mutex
	// decided maps half-queue offsets at or above checkOffset that have an
	// op message to that op's queue offset.
	decided map[int64]int64
	// inflight holds half offsets whose decision is being written.
	inflight map[int64]struct{}
	// checks counts check-backs sent per undecided half offset.
	checks map[int64]int32
	// checkOffset is the half-queue offset below which every half message
	// is decided; the check scan starts there.
	checkOffset int64
	// opNext is the op-queue offset after the last op known.
	opNext int64
	dirty  bool
	// transports carry check-backs to producers other than remoting
	// peers (checktransport.go); replaced, never changed in place.
	transports []*namedTransport

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// state is the persisted document.
type state struct {
	CheckOffset int64           `json:"checkOffset"`
	OpOffset    int64           `json:"opOffset"`
	CheckTimes  map[int64]int32 `json:"checkTimes,omitempty"`
}

// New builds the service: it rebuilds the decided set from the op topic,
// then registers the put hook and the END_TRANSACTION processor on the
// broker. Start runs the check-back loop.
func New(cfg *Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Broker == nil {
		return nil, errors.New("transaction: a broker is required")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		cfg: cfg, b: deps.Broker, st: deps.Broker.Store(), log: log.With("component", "transaction"),
		now: deps.Now, retention: deps.Retention,
		decided: map[int64]int64{}, inflight: map[int64]struct{}{}, checks: map[int64]int32{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.retention <= 0 {
		s.retention = defaultRetention
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.b.AddPutHook(s.putHook)
	if !cfg.Enabled {
		return s, nil
	}
	if err := s.recover(context.Background()); err != nil {
		return nil, err
	}
	s.b.Router().Register(remoting.EndTransaction, s.handleEnd)
	s.b.Router().Use(s.refuseHalfPulls, remoting.Mode{NoExtMap: true}) // reads the extFields of pulls only
	return s, nil
}

// Start runs the check-back loop (on a master only: a slave's half queue
// is a copy).
func (s *Service) Start(context.Context) error {
	if !s.cfg.Enabled || s.b.Config().ID != 0 {
		return nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.CheckNow(s.ctx)
			}
		}
	}()
	return nil
}

// Stop ends the loop and persists the check state.
func (s *Service) Stop(context.Context) error {
	s.cancel()
	s.wg.Wait()
	if !s.cfg.Enabled {
		return nil
	}
	return s.persist()
}

// recover loads the persisted state and replays the op queue from the
// persisted op offset.
func (s *Service) recover(ctx context.Context) error {
	var doc state
	if _, err := s.b.LoadMeta(metaName, &doc); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	s.checkOffset = doc.CheckOffset
	for k, v := range doc.CheckTimes {
		s.checks[k] = v
	}
	min, max, err := s.st.Offsets(opQueue)
	if err != nil {
		return fmt.Errorf("transaction: op queue offsets: %w", err)
	}
	off := doc.OpOffset
	if off < min {
		off = min
	}
	if off > max {
		// The op queue lost its tail (async flush and a crash): replay it all.
		off = min
	}
	var res store.ReadResult
	n := 0
	for off < max {
		res.Reset()
		if err := s.st.Read(ctx, opQueue, off, store.ReadOptions{MaxMessages: 256, MaxBytes: 1 << 20}, &res); err != nil {
			return fmt.Errorf("transaction: read op queue at %d: %w", off, err)
		}
		for i, rec := range res.Records {
			m, _, err := message.DecodeStored(rec)
			if err != nil {
				s.log.Warn("skipping undecodable op message", "offset", res.QueueOffsets[i], "err", err)
				continue
			}
			half, err := strconv.ParseInt(strings.TrimSpace(string(m.Body)), 10, 64)
			if err != nil {
				s.log.Warn("skipping op message with a bad body", "offset", res.QueueOffsets[i], "body", string(m.Body))
				continue
			}
			n++
			if half >= s.checkOffset {
				if _, ok := s.decided[half]; !ok {
					s.decided[half] = res.QueueOffsets[i]
				}
			}
		}
		if res.NextOffset <= off {
			break
		}
		off = res.NextOffset
	}
	s.opNext = max
	for k := range s.checks {
		if _, ok := s.decided[k]; ok || k < s.checkOffset {
			delete(s.checks, k)
		}
	}
	s.log.Info("transaction state recovered", "check_offset", s.checkOffset, "ops_replayed", n, "decided_ahead", len(s.decided), "op_offset", s.opNext)
	return nil
}

// persist saves the check state when it changed.
func (s *Service) persist() error {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	doc := state{CheckOffset: s.checkOffset, OpOffset: s.opNext, CheckTimes: make(map[int64]int32, len(s.checks))}
	for _, op := range s.decided {
		if op < doc.OpOffset {
			doc.OpOffset = op
		}
	}
	for k, v := range s.checks {
		doc.CheckTimes[k] = v
	}
	s.dirty = false
	s.mu.Unlock()
	if err := s.b.SaveMeta(metaName, doc); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("transaction: %w", err)
	}
	return nil
}

// putHook turns a prepared message into a half message (Java
// TransactionalMessageBridge.parseHalfMessageInner).
func (s *Service) putHook(_ context.Context, m *message.Ext) (int64, bool, error) {
	switch m.Topic {
	case protocol.TransHalfTopic, protocol.TransOpHalfTopic, protocol.TransCheckMaxTopic,
		// Already parked by a delay hook (it skips prepared messages, so
		// only a TRAN_MSG property without the prepared flag gets here).
		protocol.ScheduleTopic, broker.TimerTopic:
		return 0, false, nil
	}
	prepared := m.SysFlag&message.TransactionMask == message.TransactionPrepared
	if !prepared && !strings.EqualFold(m.Properties[message.PropertyTransactionPrepared], "true") {
		return 0, false, nil
	}
	// Java's exception: a consumed message sent back for retry keeps its
	// properties but is not a new transaction.
	if m.ReconsumeTimes > 0 && m.DelayLevel() > 0 {
		return 0, false, nil
	}
	if !s.cfg.Enabled {
		// Java answers NO_PERMISSION when rejectTransactionMessage is set.
		return 0, false, errDisabledReject
	}
	if m.Properties == nil {
		m.Properties = message.Properties{}
	}
	m.Properties[message.PropertyRealTopic] = m.Topic
	m.Properties[message.PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Properties[message.PropertyTransactionPrepared] = "true"
	// A delay belongs to the committed message, not the half message:
	// park the delay properties under private names so that no delay hook
	// moves the half message, and restore them at commit.
	for _, k := range delayProps {
		if v, ok := m.Properties[k]; ok {
			m.Properties[parkedPrefix+k] = v
			delete(m.Properties, k)
		}
	}
	m.SysFlag &^= message.TransactionMask
	m.Topic = protocol.TransHalfTopic
	m.QueueID = 0
	return 0, false, nil
}

// refuseHalfPulls keeps the transaction topics away from consumers.
func (s *Service) refuseHalfPulls(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	if req.Code != remoting.PullMessage {
		return nil
	}
	switch t := req.ExtFields["topic"]; t {
	case protocol.TransHalfTopic, protocol.TransOpHalfTopic:
		return remoting.Errorf(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] is a transaction system topic and cannot be consumed", t))
	}
	return nil
}

// outcome is what a decision writes.
type outcome int

const (
	commit outcome = iota
	rollback
	discard
)

func (o outcome) String() string {
	return [...]string{"commit", "rollback", "discard"}[o]
}

// handleEnd serves END_TRANSACTION (37). The Go client sends it with flag
// 0 and does not wait, so it is always answered.
func (s *Service) handleEnd(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	r := EndRequest{
		Group:           e.String("producerGroup"),
		QueueOffset:     e.Int64("tranStateTableOffset"),
		CommitLogOffset: e.Int64("commitLogOffset"),
		FromCheck:       e.Bool("fromTransactionCheck"),
		MsgID:           e.OptString("msgId"),
	}
	typ := e.Int32("commitOrRollback")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	switch typ {
	case message.TransactionNotType:
		s.log.Debug("transaction state unknown; waiting for a check-back", "group", r.Group, "half_offset", r.QueueOffset, "remark", req.Remark)
		return remoting.NewResponse(req, remoting.Success, "")
	case message.TransactionCommit:
		r.Resolution = Commit
	case message.TransactionRollback:
		r.Resolution = Rollback
	default:
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("illegal commitOrRollback %d", typ))
	}
	dup, err := s.End(ctx, r)
	switch {
	case errors.Is(err, ErrNotMaster):
		return remoting.Errorf(req, remoting.SlaveNotAvailable, "the broker is a slave; end transactions on the master")
	case errors.Is(err, ErrHalfNotFound):
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	case err != nil:
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	case dup:
		return remoting.NewResponse(req, remoting.Success, "transaction already decided")
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// lookupHalf reads the half message stored at a commit-log offset.
func (s *Service) lookupHalf(ctx context.Context, clo int64) (*message.Ext, error) {
	rec, err := s.st.Lookup(ctx, clo)
	if err != nil {
		return nil, err
	}
	m, _, err := message.DecodeStored(rec)
	if err != nil {
		return nil, err
	}
	if m.Topic != protocol.TransHalfTopic {
		return nil, fmt.Errorf("the message at %d is on %s, not a half message", clo, m.Topic)
	}
	m.Body = bytes.Clone(m.Body)
	return m, nil
}

// decide writes the outcome of a half message once: the committed message
// (commit) or the discarded copy (discard) together with its op message,
// in one append. It reports dup when the half message already has an
// outcome or one is being written.
func (s *Service) decide(ctx context.Context, half *message.Ext, o outcome) (dup bool, err error) {
	qo := half.QueueOffset
	s.mu.Lock()
	_, done := s.decided[qo]
	_, busy := s.inflight[qo]
	if done || busy || qo < s.checkOffset {
		s.mu.Unlock()
		return true, nil
	}
	s.inflight[qo] = struct{}{}
	s.mu.Unlock()

	var msgs []*message.Ext
	switch o {
	case commit:
		m, err := s.committed(half)
		if err != nil {
			s.release(qo)
			return false, err
		}
		msgs = append(msgs, m)
	case discard:
		// Kept readable for inspection, as Java's createTopicOfTranCheckMaxTime.
		if _, err := s.b.EnsureTopic(&protocol.TopicConfig{TopicName: protocol.TransCheckMaxTopic, ReadQueueNums: 1, WriteQueueNums: 1,
			Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
			s.release(qo)
			return false, err
		}
		msgs = append(msgs, s.discarded(half))
	}
	msgs = append(msgs, s.opMessage(qo))
	pos, err := s.b.Put(ctx, msgs)
	if err != nil {
		s.release(qo)
		return false, fmt.Errorf("transaction: %s: %w", o, err)
	}
	op := pos[len(pos)-1].QueueOffset
	s.mu.Lock()
	delete(s.inflight, qo)
	s.decided[qo] = op
	delete(s.checks, qo)
	if op+1 > s.opNext {
		s.opNext = op + 1
	}
	s.dirty = true
	s.mu.Unlock()
	return false, nil
}

func (s *Service) release(qo int64) {
	s.mu.Lock()
	delete(s.inflight, qo)
	s.mu.Unlock()
}

// committed rebuilds the half message for its real topic (Java
// EndTransactionProcessor.endMessageTransaction).
func (s *Service) committed(half *message.Ext) (*message.Ext, error) {
	props := half.Properties.Clone()
	topic := props[message.PropertyRealTopic]
	if topic == "" {
		return nil, fmt.Errorf("transaction: half message at %d has no %s", half.CommitLogOffset, message.PropertyRealTopic)
	}
	qid, err := strconv.Atoi(props[message.PropertyRealQueueID])
	if err != nil {
		return nil, fmt.Errorf("transaction: half message at %d has a bad %s: %w", half.CommitLogOffset, message.PropertyRealQueueID, err)
	}
	delete(props, message.PropertyTransactionPrepared)
	delete(props, message.PropertyRealTopic)
	delete(props, message.PropertyRealQueueID)
	for _, k := range delayProps {
		if v, ok := props[parkedPrefix+k]; ok {
			props[k] = v
			delete(props, parkedPrefix+k)
		}
	}
	return &message.Ext{
		Message:        message.Message{Topic: topic, Flag: half.Flag, Properties: props, Body: half.Body},
		QueueID:        int32(qid),
		SysFlag:        half.SysFlag&^message.TransactionMask | message.TransactionCommit,
		BornTimestamp:  half.BornTimestamp,
		BornHost:       half.BornHost,
		ReconsumeTimes: half.ReconsumeTimes,
		// The committed message points back at its half message.
		PreparedTransactionOffset: half.CommitLogOffset,
	}, nil
}

// discarded is the copy kept in TRANS_CHECK_MAX_TIME_TOPIC for inspection;
// its properties still name the real topic and producer group.
func (s *Service) discarded(half *message.Ext) *message.Ext {
	props := half.Properties.Clone()
	props[message.PropertyTranPreparedQueueOffset] = strconv.FormatInt(half.QueueOffset, 10)
	return &message.Ext{
		Message:       message.Message{Topic: protocol.TransCheckMaxTopic, Flag: half.Flag, Properties: props, Body: half.Body},
		SysFlag:       half.SysFlag &^ message.TransactionMask,
		BornTimestamp: half.BornTimestamp, BornHost: half.BornHost, ReconsumeTimes: half.ReconsumeTimes,
		PreparedTransactionOffset: half.CommitLogOffset,
	}
}

func (s *Service) opMessage(halfOffset int64) *message.Ext {
	return &message.Ext{
		Message: message.Message{
			Topic:      protocol.TransOpHalfTopic,
			Properties: message.Properties{message.PropertyTags: opTag},
			Body:       []byte(strconv.FormatInt(halfOffset, 10)),
		},
		BornTimestamp: s.now().UnixMilli(),
		BornHost:      s.b.StoreHost(),
	}
}

// Decided reports whether the half message at a half-queue offset has an
// outcome (tests, admin).
func (s *Service) Decided(halfOffset int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.decided[halfOffset]
	return ok || halfOffset < s.checkOffset
}

// CheckTimes reports how many check-backs the half message at a half-queue
// offset got so far.
func (s *Service) CheckTimes(halfOffset int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.checks[halfOffset])
}
