package transaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/quivermq/quiver/core/message"
)

// ErrHalfNotFound: the half message an end request names does not exist,
// or the request's group, offsets or topic are not those of the half
// message stored there. Nothing was decided.
var ErrHalfNotFound = errors.New("transaction: no such half message")

// ErrNotMaster: transactions end on the master broker.
var ErrNotMaster = errors.New("transaction: the broker is a slave; end transactions on the master")

// Resolution is what a producer decided about a half message.
type Resolution int

// Resolutions.
const (
	Commit Resolution = iota + 1
	Rollback
)

func (r Resolution) outcome() (outcome, error) {
	switch r {
	case Commit:
		return commit, nil
	case Rollback:
		return rollback, nil
	}
	return 0, fmt.Errorf("transaction: illegal resolution %d", r)
}

// EndRequest names a half message and its outcome: END_TRANSACTION's
// header (4.x) or a 5.x EndTransaction whose transaction id the gRPC
// endpoint resolved to the half message's offsets.
type EndRequest struct {
	// Group is the producer group; it must be the half message's PGROUP.
	Group string
	// QueueOffset (tranStateTableOffset) and CommitLogOffset locate the
	// half message; both must be its own.
	QueueOffset     int64
	CommitLogOffset int64
	// Topic, when set, must be the half message's real topic (the 5.x path
	// checks it: the caller was authorized to publish there).
	Topic      string
	Resolution Resolution
	// FromCheck: the producer answers a check-back (logged).
	FromCheck bool
	// MsgID is logged.
	MsgID string
}

// End decides a half message once, for END_TRANSACTION and the 5.x
// EndTransaction alike: the committed message goes to its real topic (or
// nothing, for a rollback) with an op message recording the outcome. dup
// reports a half message that already had an outcome (the request changed
// nothing). Errors: ErrNotMaster, ErrDisabled, ErrHalfNotFound (wrapped
// with the reason), or a store error.
func (s *Service) End(ctx context.Context, r EndRequest) (dup bool, err error) {
	if !s.cfg.Enabled {
		return false, ErrDisabled
	}
	if s.b.Config().ID != 0 {
		return false, ErrNotMaster
	}
	o, err := r.Resolution.outcome()
	if err != nil {
		return false, err
	}
	log := s.log.With("group", r.Group, "half_offset", r.QueueOffset, "commit_log_offset", r.CommitLogOffset, "msg_id", r.MsgID, "from_check", r.FromCheck)
	half, err := s.lookupHalf(ctx, r.CommitLogOffset)
	if err != nil {
		log.Warn("end transaction: half message not found", "err", err)
		return false, fmt.Errorf("%w: find prepared transaction message failed: %v", ErrHalfNotFound, err)
	}
	if g := half.Properties[message.PropertyProducerGroup]; g != r.Group {
		return false, fmt.Errorf("%w: the producer group wrong: half message of %q, request from %q", ErrHalfNotFound, g, r.Group)
	}
	if half.QueueOffset != r.QueueOffset {
		return false, fmt.Errorf("%w: the transaction state table offset wrong: %d, half message at %d", ErrHalfNotFound, r.QueueOffset, half.QueueOffset)
	}
	if half.CommitLogOffset != r.CommitLogOffset {
		return false, fmt.Errorf("%w: the commit log offset wrong: %d, half message at %d", ErrHalfNotFound, r.CommitLogOffset, half.CommitLogOffset)
	}
	if t := half.Properties[message.PropertyRealTopic]; r.Topic != "" && t != r.Topic {
		return false, fmt.Errorf("%w: the topic wrong: half message of %q, request for %q", ErrHalfNotFound, t, r.Topic)
	}
	dup, err = s.decide(context.WithoutCancel(ctx), half, o)
	if err != nil {
		log.Error("end transaction", "outcome", o, "err", err)
		return false, err
	}
	if dup {
		log.Info("end transaction ignored: already decided", "outcome", o)
		return true, nil
	}
	log.Debug("transaction decided", "outcome", o)
	return false, nil
}

// Enabled reports transaction.enabled: when off, prepared sends are
// refused with ErrDisabled.
func (s *Service) Enabled() bool { return s.cfg.Enabled }
