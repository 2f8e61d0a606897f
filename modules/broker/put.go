package broker

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// PutHook may rewrite a message before it is stored: a scheduler moves a
// delayed message to SCHEDULE_TOPIC_XXXX, a transaction module turns a
// prepared message into a half message. It may also set the tag code the
// consume-queue entry carries (return it with ok=true).
//
// m is borrowed: a sent message's Body aliases the request's network
// frame, which the transport recycles once the send handler returns, and
// m itself is written after the store call. A hook may rewrite m during
// the call (Properties, Topic, QueueID) but keeps nothing of it afterwards
// (copy the body, clone the map; strings may be kept), as store.Store's
// Append does (see "Ownership" in package core/store).
type PutHook func(ctx context.Context, m *message.Ext) (tagsCode int64, ok bool, err error)

// StoredListener observes every stored batch (replication, metrics). It
// runs on the send path and borrows its arguments like a PutHook: msgs
// (the caller's slice, bodies aliasing recycled frames) and pos are valid
// only during the call.
type StoredListener func(msgs []*message.Ext, pos []store.Position)

// AddPutHook registers a hook; hooks run in registration order.
func (b *Broker) AddPutHook(h PutHook) {
	b.hooksMu.Lock()
	b.putHooks = append(b.putHooks, h)
	b.hooksMu.Unlock()
}

// AddStoredListener registers a listener.
func (b *Broker) AddStoredListener(l StoredListener) {
	b.hooksMu.Lock()
	b.storedListeners = append(b.storedListeners, l)
	b.hooksMu.Unlock()
}

// Put runs the put hooks, stores msgs and wakes pulls held on their
// queues. Every module that writes messages (send, schedule, retry,
// transactions) goes through it.
func (b *Broker) Put(ctx context.Context, msgs []*message.Ext) ([]store.Position, error) {
	return b.put(ctx, msgs, nil)
}

// put is Put with scratch for the store batch (the caller's, allocated
// with the message: the batch escapes into the store's interface call).
func (b *Broker) put(ctx context.Context, msgs []*message.Ext, scratch []store.Message) ([]store.Position, error) {
	if err := b.slavePut(); err != nil {
		return nil, err // a slave's log holds only the master's records (replica.go)
	}
	if pos, done, err := b.mirrorPut(ctx, msgs, scratch); done { // mirror.go
		return pos, err
	}
	b.hooksMu.RLock()
	hooks, listeners := b.putHooks, b.storedListeners
	b.hooksMu.RUnlock()
	batch := scratch[:0]
	if cap(batch) < len(msgs) {
		batch = make([]store.Message, 0, len(msgs))
	}
	for _, m := range msgs {
		m.StoreHost = b.storeHost
		code := b.tagsCode(m.Properties[message.PropertyTags])
		for _, h := range hooks {
			c, ok, err := h(ctx, m)
			if err != nil {
				return nil, err
			}
			if ok {
				code = c
			}
		}
		batch = append(batch, store.Message{Ext: m, TagsCode: code})
	}
	pos, err := b.store.Append(ctx, batch)
	if err != nil {
		return nil, fmt.Errorf("broker: store: %w", err)
	}
	if len(pos) != len(batch) {
		// A store bug, not the client's: never acknowledge what has no position.
		return nil, fmt.Errorf("broker: store: %d positions for %d messages", len(pos), len(batch))
	}
	for i, m := range msgs {
		m.QueueOffset = pos[i].QueueOffset
		m.CommitLogOffset = pos[i].CommitLogOffset
		m.StoreTimestamp = pos[i].StoreTimestamp
		m.StoreSize = pos[i].Size
	}
	if e2etrace.On {
		for i, m := range msgs {
			e2etrace.Stored(m.Topic, m.QueueID, pos[i].QueueOffset)
		}
	}
	last := len(msgs) - 1
	for i, m := range msgs {
		if i == last || msgs[i+1].Topic != m.Topic || msgs[i+1].QueueID != m.QueueID {
			b.holds.notify(m.Topic, m.QueueID, pos[i].QueueOffset+1)
		}
	}
	for _, l := range listeners {
		l(msgs, pos)
	}
	return pos, nil
}
