package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// Broker roles (broker.role), as RocketMQ's BrokerRole.
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// ErrNotReplica is returned by AppendReplica when the store cannot append
// replicated records (it does not implement store.Replicator).
var ErrNotReplica = errors.New("broker: the store cannot append replicated records")

// replicaHooks are what the replication module (modules/ha) plugs into the
// send and pull paths. All are optional.
type replicaHooks struct {
	ackWaiter atomic.Pointer[func(ctx context.Context, physEnd int64) int32]
	suggester atomic.Pointer[func(res *store.ReadResult) int64]
	// state is the runtime role set by automatic failover (nil: the
	// configured broker.role and broker.id).
	state atomic.Pointer[RoleState]
	// metas are the documents a slave copies from its master besides
	// topic config and consumer offsets (delay progress).
	metaMu sync.Mutex
	metas  []ReplicaMeta
	// metaWatch run after a versioned document changed here (modules/ha
	// wakes its slaves' held HA_PULLs).
	metaWatch []func()
}

// ReplicaMeta is a metadata document a slave copies from its master: the
// replication module asks the master with a request of Code (no header,
// no body) every ha.meta_interval and hands the answer's body to Apply
// on the slave. The modules that own the documents register them
// (modules/schedule: GET_ALL_DELAY_OFFSET, as RocketMQ's
// SlaveSynchronize.syncDelayOffset).
type ReplicaMeta struct {
	// Name names the document in logs.
	Name string
	// Code is the request code the master answers with the document.
	Code int32
	// Apply takes the master's document. It runs on the slave only.
	Apply func(body []byte) error
	// Version, when set, is the document's version on this broker: a
	// cheap read that changes with every change of the document. The
	// master reports it in every HA_PULL answer, and a slave copies the
	// document as soon as it sees it change (within milliseconds while
	// the owner calls ReplicaMetaChanged), besides every ha.meta_interval.
	// nil: copied every ha.meta_interval only.
	Version func() int64
}

// WatchReplicaMeta makes f run after each ReplicaMetaChanged (and each
// change of the topic table). f must not block.
func (b *Broker) WatchReplicaMeta(f func()) {
	b.replica.metaMu.Lock()
	defer b.replica.metaMu.Unlock()
	b.replica.metaWatch = append(b.replica.metaWatch, f)
	notify := b.ReplicaMetaChanged
	b.topics.onChange.Store(&notify)
	b.groups.onChange.Store(&notify)
}

// ReplicaMetaChanged tells the watchers (modules/ha on a master) that a
// versioned document (ReplicaMeta.Version) changed.
func (b *Broker) ReplicaMetaChanged() {
	b.replica.metaMu.Lock()
	ws := append([]func(){}, b.replica.metaWatch...)
	b.replica.metaMu.Unlock()
	for _, f := range ws {
		f()
	}
}

// TopicsVersion is the topic table's data version (GET_ALL_TOPIC_CONFIG's
// dataVersion), as a document version for replication.
func (b *Broker) TopicsVersion() protocol.DataVersion { return b.topics.dataVersion() }

// AddReplicaMeta registers a document for slaves to copy.
func (b *Broker) AddReplicaMeta(m ReplicaMeta) {
	b.replica.metaMu.Lock()
	defer b.replica.metaMu.Unlock()
	b.replica.metas = append(b.replica.metas, m)
}

// ReplicaMetas returns the registered documents.
func (b *Broker) ReplicaMetas() []ReplicaMeta {
	b.replica.metaMu.Lock()
	defer b.replica.metaMu.Unlock()
	return append([]ReplicaMeta(nil), b.replica.metas...)
}

// RoleState is a broker's role at run time. Without automatic failover it
// is the configured broker.role and broker.id; with it (modules/ha,
// ha.failover) the controller's committed epoch decides.
type RoleState struct {
	// Role is RoleAsyncMaster, RoleSyncMaster or RoleSlave.
	Role string
	// ID is the brokerId registered with the name servers (0: master).
	ID int64
	// Epoch is the failover epoch the broker serves or follows (0: none);
	// registrations carry it (namesrv.EpochExt) when positive.
	Epoch int64
	// Writable: sends and local puts are accepted (a master whose epoch
	// is committed). A master that is not writable is fenced: it refuses
	// writes as a slave does.
	Writable bool
	// Hidden: do not register with the name servers (a fenced broker
	// waiting for its group's committed state).
	Hidden bool
}

// Role returns the runtime role.
func (b *Broker) Role() RoleState {
	if p := b.replica.state.Load(); p != nil {
		return *p
	}
	return RoleState{Role: b.cfg.Role, ID: b.cfg.ID, Writable: b.cfg.Role != RoleSlave}
}

// SetRole changes the runtime role (automatic failover) and registers
// again at once when what the name servers see changed.
func (b *Broker) SetRole(r RoleState) {
	old := b.Role()
	b.replica.state.Store(&r)
	if old != r {
		b.log.Info("broker role", "role", r.Role, "id", r.ID, "epoch", r.Epoch, "writable", r.Writable, "hidden", r.Hidden)
	}
	if old.ID != r.ID || old.Epoch != r.Epoch || old.Hidden != r.Hidden || old.Role != r.Role {
		b.triggerRegister()
	}
}

// IsSlave reports whether this broker is a slave now (broker.role SLAVE,
// or demoted by failover).
func (b *Broker) IsSlave() bool {
	if p := b.replica.state.Load(); p != nil {
		return p.Role == RoleSlave
	}
	return b.cfg.Role == RoleSlave
}

// writable reports whether sends and local puts are accepted now.
func (b *Broker) writable() bool {
	if p := b.replica.state.Load(); p != nil {
		return p.Writable
	}
	return b.cfg.Role != RoleSlave
}

// ID is the brokerId this broker registers with now.
func (b *Broker) ID() int64 {
	if p := b.replica.state.Load(); p != nil {
		return p.ID
	}
	return b.cfg.ID
}

// SetAckWaiter makes the send path wait, after each successful store
// write, until f returns: the write's bytes end at physEnd. A code other
// than remoting.Success (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is
// answered with the send result headers still set, as Java's SYNC_MASTER
// does. nil removes the waiter.
func (b *Broker) SetAckWaiter(f func(ctx context.Context, physEnd int64) int32) {
	if f == nil {
		b.replica.ackWaiter.Store(nil)
		return
	}
	b.replica.ackWaiter.Store(&f)
}

// SetPullSuggester sets what a pull answers in suggestWhichBrokerId; f
// sees the read's result (records included). nil answers 0 (the master).
func (b *Broker) SetPullSuggester(f func(res *store.ReadResult) int64) {
	if f == nil {
		b.replica.suggester.Store(nil)
		return
	}
	b.replica.suggester.Store(&f)
}

// awaitReplicas runs the ack waiter for a stored write.
func (b *Broker) awaitReplicas(ctx context.Context, pos []store.Position) int32 {
	f := b.replica.ackWaiter.Load()
	if f == nil || len(pos) == 0 {
		return remoting.Success
	}
	last := pos[len(pos)-1]
	return (*f)(ctx, last.CommitLogOffset+int64(last.Size))
}

// suggestBroker is the pull answer's suggestWhichBrokerId.
func (b *Broker) suggestBroker(res *store.ReadResult) string {
	f := b.replica.suggester.Load()
	if f == nil {
		return "0"
	}
	return strconv.FormatInt((*f)(res), 10)
}

// slaveRefusal answers client sends on a slave as Java's store does
// (PutMessageStatus.SERVICE_NOT_AVAILABLE → SERVICE_NOT_AVAILABLE).
func (b *Broker) slaveRefusal(req *remoting.Command) *remoting.Command {
	if b.writable() {
		return nil
	}
	return remoting.Errorf(req, remoting.ServiceNotAvailable,
		fmt.Sprintf("service not available now: broker %s id %d is %s; messages are put to the master", b.cfg.Name, b.ID(), b.notMaster()))
}

func (b *Broker) notMaster() string {
	if b.IsSlave() {
		return "a slave"
	}
	return "a master waiting for the failover controller (fenced)"
}

// slavePut refuses local writes on a slave: its commit log must hold the
// master's records only, at the master's offsets (schedule, retry and
// transaction deliveries are the master's job).
func (b *Broker) slavePut() error {
	if b.writable() {
		return nil
	}
	return &RejectError{Code: remoting.ServiceNotAvailable, Reason: fmt.Sprintf("broker %s id %d is %s: messages are put to the master", b.cfg.Name, b.ID(), b.notMaster())}
}

// AppendReplica appends records copied from the master's commit log
// (store.Replicator) and wakes pulls held on their queues.
func (b *Broker) AppendReplica(ctx context.Context, recs [][]byte) error {
	rep, ok := b.store.(store.Replicator)
	if !ok {
		return ErrNotReplica
	}
	if err := rep.AppendReplica(ctx, recs); err != nil {
		return fmt.Errorf("broker: append replica: %w", err)
	}
	for i, rec := range recs {
		topic, queue, qoff, ok := recordQueue(rec)
		if !ok {
			continue
		}
		if i+1 < len(recs) {
			// Only the last record of a run of one queue wakes its pulls.
			if t2, q2, _, ok := recordQueue(recs[i+1]); ok && t2 == topic && q2 == queue {
				continue
			}
		}
		b.holds.notify(topic, queue, qoff+1)
	}
	return nil
}

// recordQueue reads the topic, queue id and queue offset of a stored
// record (message.AppendStored layout) without decoding it.
func recordQueue(rec []byte) (topic string, queue int32, queueOffset int64, ok bool) {
	const fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 // up to the born host
	if len(rec) < fixed {
		return "", 0, 0, false
	}
	queue = int32(binary.BigEndian.Uint32(rec[12:]))
	queueOffset = int64(binary.BigEndian.Uint64(rec[20:]))
	sys := int32(binary.BigEndian.Uint32(rec[36:]))
	p := fixed + 8
	if sys&message.FlagBornHostV6 != 0 {
		p = fixed + 20
	}
	p += 8 // store timestamp
	if sys&message.FlagStoreHostV6 != 0 {
		p += 20
	} else {
		p += 8
	}
	p += 4 + 8 // reconsume times, prepared transaction offset
	if len(rec) < p+4 {
		return "", 0, 0, false
	}
	p += 4 + int(binary.BigEndian.Uint32(rec[p:]))
	if p < 0 || len(rec) < p+1 {
		return "", 0, 0, false
	}
	n := int(rec[p])
	if len(rec) < p+1+n {
		return "", 0, 0, false
	}
	return string(rec[p+1 : p+1+n]), queue, queueOffset, true
}

// TopicConfigs returns the topic table as GET_ALL_TOPIC_CONFIG answers it.
func (b *Broker) TopicConfigs() protocol.TopicConfigWrapper { return b.topics.snapshot() }

// ApplyTopicConfigs makes the topic table hold every topic of w (a
// master's table copied to a slave). Topics w lacks are kept; the caller
// deletes those the master deleted (DeleteReplicaTopic). It reports how
// many topics changed.
func (b *Broker) ApplyTopicConfigs(w protocol.TopicConfigWrapper) (int, error) {
	changed := 0
	for _, tc := range w.TopicConfigTable {
		if tc == nil || tc.TopicName == "" {
			continue
		}
		ok, err := b.topics.put(tc)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	if changed > 0 {
		b.triggerRegister()
	}
	return changed, nil
}

// OffsetTable returns the committed offsets, "topic@group" → queue →
// offset, as GET_ALL_CONSUMER_OFFSET answers them.
func (b *Broker) OffsetTable() map[string]map[int32]int64 {
	o := b.offsets
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[string]map[int32]int64, len(o.table))
	for k, qs := range o.table {
		m := make(map[int32]int64, len(qs))
		for q, off := range qs {
			m[q] = off
		}
		out[k] = m
	}
	return out
}

// MergeConsumerOffsets takes every offset of table ("topic@group" → queue
// → offset) that is ahead of this broker's: offsets only move forward
// between a master and its slave, so commits made to either survive. It
// reports how many offsets moved.
func (b *Broker) MergeConsumerOffsets(table map[string]map[int32]int64) int {
	o := b.offsets
	moved := 0
	o.mu.Lock()
	for k, qs := range table {
		m, ok := o.table[k]
		if !ok {
			m = map[int32]int64{}
			o.table[k] = m
		}
		for q, off := range qs {
			if cur, ok := m[q]; !ok || off > cur {
				m[q] = off
				moved++
			}
		}
	}
	if moved > 0 {
		o.dirty = true
	}
	o.mu.Unlock()
	return moved
}

// DeleteReplicaTopic deletes topic on a slave as DELETE_TOPIC_IN_BROKER
// would (config, consumer offsets, the store's queues): the master deleted
// it. System topics are kept. It reports whether the topic was known.
func (b *Broker) DeleteReplicaTopic(ctx context.Context, topic string) (bool, error) {
	if protocol.IsSystemTopic(topic) || topic == protocol.AutoCreateTopic {
		return false, nil
	}
	removed, err := b.topics.remove(topic)
	if err != nil {
		return false, err
	}
	b.offsets.removeTopic(topic)
	if d, ok := b.store.(store.TopicDeleter); ok {
		if err := d.DeleteTopic(ctx, topic); err != nil {
			return removed, err
		}
	}
	if removed {
		b.triggerRegister()
	}
	return removed, nil
}
