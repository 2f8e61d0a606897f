package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// This file is the surface other modules (schedule, retry) use to reach
// broker state: system topics, metadata documents, the data directory,
// group configs, consumer offsets and online consumer connections.

// TimerTopic holds messages waiting for an arbitrary delivery time
// (RocketMQ 5 timers); clients may not send to it.
const TimerTopic = "rmq_sys_wheel_timer"

// RejectError refuses a message with a RocketMQ response code (a put hook
// returns it; the send path answers with Code and the reason).
type RejectError struct {
	Code   int32
	Reason string
}

func (e *RejectError) Error() string { return e.Reason }

// ErrRejected is matched by every *RejectError.
var ErrRejected = errors.New("broker: message rejected")

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// rejectCode returns the response code of a *RejectError in err's chain.
func rejectCode(err error) (int32, bool) {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Code, true
	}
	return 0, false
}

// brokerOnlyTopic reports topics only the broker writes: dead-letter queues
// and the timer topic. Clients may read them but not send to them.
func brokerOnlyTopic(t string) bool {
	return strings.HasPrefix(t, protocol.DLQGroupPrefix) || t == TimerTopic
}

// EnsureTopic creates tc unless a topic of that name exists and returns the
// config in force; a new topic is registered with the name servers.
func (b *Broker) EnsureTopic(tc *protocol.TopicConfig) (*protocol.TopicConfig, error) {
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = "SINGLE_TAG"
	}
	return b.createTopic(tc)
}

// TopicConfig returns a copy of a topic's config.
func (b *Broker) TopicConfig(topic string) (*protocol.TopicConfig, bool) { return b.topics.get(topic) }

// EnsureRetryTopic creates %RETRY%<group> with queues queues (at least 1).
func (b *Broker) EnsureRetryTopic(group string, queues int32) (string, error) {
	return b.ensureRetryTopic(group, queues)
}

// EnsureDLQ creates %DLQ%<group> (1 queue).
func (b *Broker) EnsureDLQ(group string) (string, error) { return b.ensureDLQ(group) }

// GroupConfig returns a subscription group's config, creating the default
// one as a heartbeat would.
func (b *Broker) GroupConfig(group string) (*GroupConfig, error) {
	gc, err := b.groups.getOrCreate(group)
	if err != nil {
		return nil, err
	}
	cp := *gc
	return &cp, nil
}

// HasGroup reports whether a subscription group exists, without creating
// it (Java's containsSubscriptionGroup).
func (b *Broker) HasGroup(group string) bool { return b.groups.has(group) }

// PutGroupConfig creates or replaces a subscription group's config, as
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP does.
func (b *Broker) PutGroupConfig(gc *GroupConfig) error {
	if err := protocol.ValidateGroup(gc.GroupName); err != nil {
		return err
	}
	if err := validateRetryPolicy(gc.GroupRetryPolicy); err != nil {
		return err
	}
	cp := *gc
	return b.groups.put(&cp)
}

// DataDir is the directory modules may keep their own files under.
func (b *Broker) DataDir() string { return b.deps.DataDir }

// LoadMeta and SaveMeta (metadata documents) are in txhooks.go.

// CommitOffset sets a group's committed offset of one queue.
func (b *Broker) CommitOffset(group, topic string, queue int32, offset int64) {
	b.offsets.commit(group, topic, queue, offset)
}

// QueryOffset returns a group's committed offset of one queue.
func (b *Broker) QueryOffset(group, topic string, queue int32) (int64, bool) {
	return b.offsets.query(group, topic, queue)
}

// FlushOffsets persists the offset table now.
func (b *Broker) FlushOffsets() error { return b.offsets.flush() }

// ConsumerPeers lists the connections of a group's online consumers.
func (b *Broker) ConsumerPeers(group string) []*remoting.Peer { return b.clients.consumerPeers(group) }

// ErrorResponse answers req after a failed Put: a *RejectError keeps its
// code, anything else is SYSTEM_ERROR.
func (b *Broker) ErrorResponse(req *remoting.Command, err error) *remoting.Command {
	return b.storeErrorResponse(req, err)
}

// Lookup returns the stored record at a commit-log offset.
func (b *Broker) Lookup(ctx context.Context, off int64) ([]byte, error) {
	rec, err := b.store.Lookup(ctx, off)
	if err != nil {
		return nil, fmt.Errorf("broker: lookup %d: %w", off, err)
	}
	return rec, nil
}
