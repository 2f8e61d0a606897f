package transaction

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/store"
)

// maxScanPerRound bounds the half messages one check round looks at.
const maxScanPerRound = 20000

// verdict is what the scan does with one half message.
type verdict int

const (
	// pending: undecided, keep it (the check offset stops here).
	pending verdict = iota
	// tooYoung: this and every later half message are younger than the
	// timeout; end the round.
	tooYoung
)

// CheckNow runs one check round: it scans half messages from the check
// offset, sends CHECK_TRANSACTION_STATE for those old enough and
// undecided, discards those checked transaction.check_max times or older
// than the retention, advances the check offset over decided ones and
// persists the state.
func (s *Service) CheckNow(ctx context.Context) {
	min, max, err := s.st.Offsets(halfQueue)
	if err != nil {
		s.log.Warn("check: half queue offsets", "err", err)
		return
	}
	s.mu.Lock()
	if s.checkOffset < min {
		// Older half messages were deleted by retention.
		s.advanceLocked(min)
	}
	off := s.checkOffset
	s.mu.Unlock()

	now := s.now()
	advance := true
	scanned := 0
	var res store.ReadResult
scan:
	for off < max && scanned < maxScanPerRound && ctx.Err() == nil {
		res.Reset()
		if err := s.st.Read(ctx, halfQueue, off, store.ReadOptions{MaxMessages: 64, MaxBytes: 4 << 20}, &res); err != nil {
			s.log.Warn("check: read half queue", "offset", off, "err", err)
			break
		}
		if len(res.Records) == 0 {
			if res.NextOffset > off {
				off = res.NextOffset
				continue
			}
			break
		}
		for i, rec := range res.Records {
			qo := res.QueueOffsets[i]
			scanned++
			if s.Decided(qo) {
				if advance {
					s.advance(qo + 1)
				}
				continue
			}
			half, _, err := message.DecodeStored(rec)
			if err != nil {
				s.log.Error("check: undecodable half message; skipping it", "offset", qo, "err", err)
				advance = false
				continue
			}
			if s.checkOne(ctx, half, now) == tooYoung {
				break scan
			}
			advance = false
		}
		off = res.NextOffset
	}
	if err := s.persist(); err != nil {
		s.log.Error("check: persist state", "err", err)
	}
}

func (s *Service) advance(to int64) {
	s.mu.Lock()
	s.advanceLocked(to)
	s.mu.Unlock()
}

func (s *Service) advanceLocked(to int64) {
	if to <= s.checkOffset {
		return
	}
	for k := range s.decided {
		if k < to {
			delete(s.decided, k)
		}
	}
	for k := range s.checks {
		if k < to {
			delete(s.checks, k)
		}
	}
	s.checkOffset = to
	s.dirty = true
}

// checkOne handles one undecided half message.
func (s *Service) checkOne(ctx context.Context, half *message.Ext, now time.Time) verdict {
	qo := half.QueueOffset
	age := now.Sub(time.UnixMilli(half.StoreTimestamp))
	log := s.log.With("half_offset", qo, "group", half.Properties[message.PropertyProducerGroup],
		"topic", half.Properties[message.PropertyRealTopic], "msg_id", half.UniqKey())
	s.mu.Lock()
	n := s.checks[qo]
	s.mu.Unlock()
	if age > s.retention || int(n) >= s.cfg.CheckMax {
		dup, err := s.decide(ctx, s.copyHalf(half), discard)
		if err != nil {
			log.Error("check: discard half message", "err", err)
			return pending
		}
		if dup {
			// Decided meanwhile by an END_TRANSACTION.
			return pending
		}
		log.Warn("transaction discarded to TRANS_CHECK_MAX_TIME_TOPIC without a decision", "checks", n, "age", age.Round(time.Second))
		return pending
	}
	wait := s.cfg.Timeout
	immune := false
	if v := half.Properties[message.PropertyCheckImmunityTime]; v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
			wait, immune = time.Duration(secs)*time.Second, true
		}
	}
	if age < wait {
		if !immune && age < s.cfg.Timeout {
			// Store times grow along the queue: the rest is younger.
			return tooYoung
		}
		return pending
	}
	group := half.Properties[message.PropertyProducerGroup]
	m := s.checkMessage(half, n+1)
	if m == nil {
		return pending
	}
	via, sent := s.sendCheck(ctx, Check{Group: group, Message: m, Times: n + 1}, log)
	if !sent {
		log.Debug("check: no producer of the group online; keeping it for the next round")
		return pending
	}
	s.mu.Lock()
	s.checks[qo] = n + 1
	s.dirty = true
	s.mu.Unlock()
	log.Debug("check-back sent", "via", via, "checks", n+1)
	return pending
}

// sendCheck asks one producer of the group: through a registered check
// transport first (5.x producers), else a 4.x producer's remoting
// connection (CHECK_TRANSACTION_STATE, oneway). It reports where the
// question went.
func (s *Service) sendCheck(ctx context.Context, c Check, log *slog.Logger) (string, bool) {
	s.mu.Lock()
	ts := s.transports
	s.mu.Unlock()
	for _, t := range ts {
		if t.t.CheckBack(ctx, c) {
			return t.name, true
		}
	}
	peers := s.b.ProducerPeers(c.Group)
	if len(peers) == 0 {
		return "", false
	}
	req := s.checkRequest(c.Message)
	if req == nil {
		return "", false
	}
	start := rand.IntN(len(peers))
	for i := range peers {
		p := peers[(start+i)%len(peers)]
		select {
		case <-p.Done():
			continue
		default:
		}
		// A fresh command per attempt: Send sets the flags in place.
		r := *req
		r.Opaque = codec.NextOpaque()
		if err := p.InvokeOneway(ctx, &r); err != nil {
			log.Debug("check: send to producer", "remote", p.RemoteAddr(), "err", err)
			continue
		}
		return p.RemoteAddr(), true
	}
	return "", false
}

// copyHalf detaches a half message from the read buffer it aliases.
func (s *Service) copyHalf(half *message.Ext) *message.Ext {
	cp := *half
	cp.Body = append([]byte(nil), half.Body...)
	cp.Properties = half.Properties.Clone()
	return &cp
}

// checkMessage is the half message as a check-back shows it: under its
// real topic and queue, with the check count in TRANSACTION_CHECK_TIMES;
// its CommitLogOffset and QueueOffset stay the half message's. nil when the
// half message has no real topic.
func (s *Service) checkMessage(half *message.Ext, times int32) *message.Ext {
	m := *half
	m.Properties = half.Properties.Clone()
	m.Properties[message.PropertyTransactionCheckTimes] = strconv.Itoa(int(times))
	if !s.b.Config().DeliverRecordCRC {
		delete(m.Properties, store.PropertyRecordCRC) // as any record a client is sent (broker/recordcrc.go)
	}
	m.Topic = half.Properties[message.PropertyRealTopic]
	if qid, err := strconv.Atoi(half.Properties[message.PropertyRealQueueID]); err == nil {
		m.QueueID = int32(qid)
	}
	if m.Topic == "" {
		s.log.Error("check: half message without a real topic", "half_offset", half.QueueOffset)
		return nil
	}
	return &m
}

// checkRequest builds CHECK_TRANSACTION_STATE for a check message.
func (s *Service) checkRequest(m *message.Ext) *remoting.Command {
	body, err := message.EncodeStored(m)
	if err != nil {
		s.log.Error("check: encode half message", "half_offset", m.QueueOffset, "err", err)
		return nil
	}
	uniq := m.UniqKey()
	return remoting.NewRequest(remoting.CheckTransactionState, map[string]string{
		"tranStateTableOffset": strconv.FormatInt(m.QueueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(m.CommitLogOffset, 10),
		"msgId":                uniq,
		"transactionId":        uniq,
		"offsetMsgId":          m.MsgID(),
	}, body)
}
