// Package ha is the replication module (RocketMQ 4's HAService, carried
// over the project's transports): a slave (broker.role SLAVE, broker.id ≥
// 1, the master's broker.name) follows its master's commit log from its own
// end, record by record at the same commit-log offsets, so that its
// consume queues, key index and offsetMsgIds match the master's; it copies
// the master's topic config and consumer offsets, and the master takes
// back offsets committed to the slave. A SYNC_MASTER acknowledges a send
// only once a slave confirmed its bytes.
//
// Protocol (Quiver-specific request code, on the master's broker port):
//
//	HA_PULL (1100), slave → master. extFields: offset (the slave's commit-log
//	end: where to read from, and the acknowledgement of everything below),
//	maxBytes, brokerName, brokerId, slaveAddr. The master answers at once
//	when it has records at offset, else holds the request up to ha.max_wait.
//	Answer SUCCESS: body = whole stored records concatenated (RocketMQ
//	stored layout, each starting with its int32 size), extFields masterMax
//	(the master's commit-log end) and next (the offset after the body).
//	SERVICE_NOT_AVAILABLE when the asked broker is not a master or cannot
//	replicate; SYSTEM_ERROR with a remark when offset is not a record
//	boundary of the master (the slave is ahead: the master lost data).
//
// Every answer also carries metaVersions ("21=<ts>.<counter>,<code>=<v>…":
// the versions of the master's topic table and of the documents
// registered with a broker.ReplicaMeta.Version, ACL 2.0's users and
// policies), and a held request is answered at once when one changes; a
// slave sends the versions it last saw in metaVersions, and is answered
// at once when they differ. The slave then copies only the documents
// whose version changed.
//
// Topic config and offsets use RocketMQ's GET_ALL_TOPIC_CONFIG (21) and
// GET_ALL_CONSUMER_OFFSET (43). See docs/REPLICATION.md.
//
// Files: ha.go (the service and its lifecycle), master.go (the master
// side), slave.go (following a master), copymeta.go (the slave copying the
// master's metadata), failover.go (automatic failover), storage.go (the
// failover truncation before the store opens).
package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
)

// HAPull is the replication request code (Quiver-specific, 1100+ range).
const HAPull = remoting.HAPull

// ErrCannotReplicate is returned when a SYNC_MASTER or SLAVE runs on a
// storage engine without commit-log replication (store.LogReader and
// store.Replicator).
var ErrCannotReplicate = errors.New("ha: the storage engine cannot replicate (commitlog can)")

// Service runs replication for one broker.
type Service struct {
	cfg  *Config
	b    *broker.Broker
	log  *slog.Logger
	role string
	lr   store.LogReader

	client *remoting.Client
	sign   func(*remoting.Command) // signs outgoing requests (ACL); may be nil

	mu     sync.Mutex
	slaves map[int64]*slaveState
	wake   chan struct{} // closed and replaced on new data or an ack

	// Slave side.
	masterMu  sync.Mutex
	master    string
	masterMax atomic.Int64
	lag       atomic.Int64
	following atomic.Bool
	// pull is the running HA_PULL (follow's goroutine sets it): a change
	// of master cancels it at once (switchMaster) instead of waiting for
	// its answer or timeout from a master that may be unreachable.
	pullMu     sync.Mutex
	pullMaster string
	pullCancel context.CancelFunc
	// masterKick wakes follow when the master to follow changed.
	masterKick chan struct{}

	// fo is automatic failover (ha.failover); nil without it.
	fo *failover

	// masterTopics are the topic names of the master's table at the last
	// copy, from masterTopicsFrom (copyMeta's goroutine only).
	masterTopics     map[string]bool
	masterTopicsFrom string
	// pendingMeta are copied documents (broker.ReplicaMeta) waiting for
	// this slave's log to reach the master's log end at the time they were
	// read (copyMeta's goroutine only), oldest first.
	pendingMeta []pendingDoc
	// metaSeen is the last versions an HA_PULL answer reported (follow
	// writes it); metaKick wakes copyLoop when they changed.
	metaSeen atomic.Pointer[seenVersions]
	metaKick chan struct{}
	// copied are the versions last copied, per request code, from
	// copiedFrom (copyLoop's goroutine only).
	copied     map[int32]string
	copiedFrom string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds the service for b; dial reaches other brokers and name
// servers. It plugs into b at once (processor, send and pull hooks);
// Start starts the loops.
func New(cfg *Config, b *broker.Broker, dial remoting.DialFunc, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bc := b.Config()
	s := &Service{
		cfg: cfg, b: b, role: bc.Role, slaves: map[int64]*slaveState{}, wake: make(chan struct{}), masterKick: make(chan struct{}, 1), metaKick: make(chan struct{}, 1),
		log: log.With("component", "ha", "broker", bc.Name, "role", bc.Role),
	}
	lr, okR := b.Store().(store.LogReader)
	_, okW := b.Store().(store.Replicator)
	switch {
	case cfg.Failover && !(okR && okW):
		return nil, fmt.Errorf("%w: ha.failover", ErrCannotReplicate)
	case s.role == broker.RoleSlave && !(okR && okW), s.role == broker.RoleSyncMaster && !okR:
		return nil, fmt.Errorf("%w: broker.role %s", ErrCannotReplicate, s.role)
	case !okR:
		s.log.Debug("replication off: the storage engine cannot replicate")
		return s, nil
	}
	s.lr = lr
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.client = remoting.NewClient(dial, nil, s.log, remoting.PeerOptions{})
	if cfg.Failover {
		// Any member may become master: serve HA_PULL (refused unless
		// master now); the role's hooks are set on each change.
		b.Router().Register(HAPull, s.handlePull)
		b.AddStoredListener(func([]*message.Ext, []store.Position) { s.broadcast() })
		b.WatchReplicaMeta(s.broadcast) // a held HA_PULL answers the new versions at once
		return s, nil
	}
	if s.role != broker.RoleSlave {
		b.Router().Register(HAPull, s.handlePull)
		b.AddStoredListener(func([]*message.Ext, []store.Position) { s.broadcast() })
		b.WatchReplicaMeta(s.broadcast) // a held HA_PULL answers the new versions at once
		if s.role == broker.RoleSyncMaster {
			b.SetAckWaiter(s.waitAck)
		}
		if cfg.SlaveReadLagBytes > 0 {
			b.SetPullSuggester(s.suggest)
		}
	}
	return s, nil
}

// EnableFailover starts automatic failover state from dir (the ha
// directory of the store: epoch and truncation files); restart, called
// at most once, must stop the process's app and start it again (the
// commit log is then truncated before the store opens, see
// Truncating). Call it before Start, with ha.failover on.
func (s *Service) EnableFailover(dir string, restart func()) error {
	if !s.cfg.Failover || s.lr == nil {
		return nil
	}
	f, err := newFailover(s, dir)
	if err != nil {
		return err
	}
	f.restart = restart
	s.fo = f
	return nil
}

// SetSigner makes the service sign its requests (to a master, a slave
// and name servers) with f, e.g. kernel.Guard.Sign when ACL is on. Call it
// before Start.
func (s *Service) SetSigner(f func(*remoting.Command)) { s.sign = f }

// invoke signs and sends req to addr.
func (s *Service) invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	if s.sign != nil {
		s.sign(req)
	}
	return s.client.Invoke(ctx, addr, req)
}

// Start starts the slave's follow and copy loops, or the master's
// offset take-back loop.
func (s *Service) Start(ctx context.Context) error {
	if s.lr == nil {
		return nil
	}
	if s.cfg.Failover && s.fo == nil {
		return errors.New("ha: ha.failover is on but EnableFailover was not called")
	}
	if s.fo != nil {
		s.run(s.fo.loop)
		s.run(s.follow)
		s.run(s.copyLoop)
		s.run(func() { s.every(s.cfg.LagLogInterval, s.logLag) })
		s.run(func() { s.every(s.cfg.MetaInterval, s.takeBackOffsets) })
	} else if s.role == broker.RoleSlave {
		s.run(s.follow)
		s.run(s.copyLoop)
		s.run(func() { s.every(s.cfg.LagLogInterval, s.logLag) })
	} else {
		s.run(func() { s.every(s.cfg.MetaInterval, s.takeBackOffsets) })
	}
	return nil
}

// Stop stops the loops and waits for them.
func (s *Service) Stop(ctx context.Context) error {
	if s.lr == nil {
		return nil
	}
	s.cancel()
	s.client.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ha: stop: %w", ctx.Err())
	}
}

func (s *Service) run(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// every runs f at once and then every d until Stop.
func (s *Service) every(d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
	case <-t.C:
	}
}

// Lag is, on a slave, the master's commit-log end minus the slave's as of
// the last answer (bytes); on a master, its end minus the best slave's
// acknowledged offset (its end when no slave is connected).
func (s *Service) Lag() int64 {
	if s.lr == nil {
		return 0
	}
	if s.b.IsSlave() {
		return s.lag.Load()
	}
	_, end := s.lr.LogOffsets()
	best, ok := s.bestAck()
	if !ok {
		return end
	}
	return max(0, end-best)
}

// Following reports whether a slave's last request to its master worked.
func (s *Service) Following() bool { return s.following.Load() }

// fetchOffsets reads addr's consumer offsets (GET_ALL_CONSUMER_OFFSET):
// a slave copies its master's, a master takes back its slaves'.
func (s *Service) fetchOffsets(addr string) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	resp, err := s.invoke(ctx, addr, remoting.NewRequest(remoting.GetAllConsumerOffset, nil, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("ha: GET_ALL_CONSUMER_OFFSET: code %d: %s", resp.Code, resp.Remark)
	}
	return broker.DecodeConsumerOffsets(resp.Body)
}
