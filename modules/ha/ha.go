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
// Topic config and offsets use RocketMQ's GET_ALL_TOPIC_CONFIG (21) and
// GET_ALL_CONSUMER_OFFSET (43). See docs/REPLICATION.md.
package ha

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
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

// slaveState is what a master knows of one slave.
type slaveState struct {
	id     int64 // registered brokerId
	member int64 // configured broker.id (failover identity)
	addr   string
	acked  int64
	seen   time.Time
}

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
		cfg: cfg, b: b, role: bc.Role, slaves: map[int64]*slaveState{}, wake: make(chan struct{}), masterKick: make(chan struct{}, 1),
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
		b.Router().RegisterFunc(HAPull, s.handlePull)
		b.AddStoredListener(func([]*message.Ext, []store.Position) { s.broadcast() })
		return s, nil
	}
	if s.role != broker.RoleSlave {
		b.Router().RegisterFunc(HAPull, s.handlePull)
		b.AddStoredListener(func([]*message.Ext, []store.Position) { s.broadcast() })
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
// WrapStorage). Call it before Start, with ha.failover on.
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
		s.run(func() { s.every(s.cfg.MetaInterval, s.copyMeta) })
		s.run(func() { s.every(s.cfg.LagLogInterval, s.logLag) })
		s.run(func() { s.every(s.cfg.MetaInterval, s.takeBackOffsets) })
	} else if s.role == broker.RoleSlave {
		s.run(s.follow)
		s.run(func() { s.every(s.cfg.MetaInterval, s.copyMeta) })
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

// ---- master side ----

func (s *Service) broadcast() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// liveFor is how long a slave counts as connected after its last request.
func (s *Service) liveFor() time.Duration { return 2*s.cfg.MaxWait + 3*time.Second }

// bestAck is the highest offset a connected slave acknowledged.
func (s *Service) bestAck() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bestAckLocked()
}

func (s *Service) bestAckLocked() (int64, bool) {
	best, ok := int64(0), false
	now := time.Now()
	for _, sl := range s.slaves {
		if now.Sub(sl.seen) <= s.liveFor() && (!ok || sl.acked > best) {
			best, ok = sl.acked, true
		}
	}
	return best, ok
}

func (s *Service) handlePull(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	off := e.Int64("offset")
	id := e.OptInt64("brokerId", 1)
	maxBytes := e.OptInt64("maxBytes", int64(s.cfg.BatchBytes))
	addr := e.OptString("slaveAddr")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	member := e.OptInt64("memberId", id)
	epoch := e.OptInt64("epoch", 0)
	if name := e.OptString("brokerName"); name != "" && name != s.b.Config().Name {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("this is broker %s, not %s", s.b.Config().Name, name))
	}
	if s.fo != nil {
		r := s.b.Role()
		switch {
		case !r.Writable:
			return remoting.Errorf(req, remoting.ServiceNotAvailable, fmt.Sprintf("broker %s at %s is not the master now (epoch %d)", s.b.Config().Name, s.b.Config().AdvertiseAddr(), r.Epoch))
		case epoch != r.Epoch:
			return remoting.Errorf(req, remoting.ServiceNotAvailable, fmt.Sprintf("epoch %d asked, this master serves epoch %d", epoch, r.Epoch))
		}
	}
	s.mu.Lock()
	sl := s.slaves[id]
	if sl == nil {
		sl = &slaveState{id: id}
		s.slaves[id] = sl
	}
	if time.Since(sl.seen) > s.liveFor() {
		_, end := s.lr.LogOffsets()
		s.log.Info("slave connected", "slave_id", id, "slave_addr", addr, "offset", off, "lag_bytes", end-off)
	}
	sl.addr, sl.member, sl.acked, sl.seen = addr, member, off, time.Now()
	close(s.wake)
	s.wake = make(chan struct{})
	wake := s.wake
	s.mu.Unlock()

	_, end := s.lr.LogOffsets()
	if off > end {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("slave offset %d is past the master's end %d", off, end))
	}
	if off == end {
		t := time.NewTimer(s.cfg.MaxWait)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		t.Stop()
		// Data may still be on its way after a wake by an ack: wait once
		// more for a write, briefly.
		if _, end = s.lr.LogOffsets(); off == end {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.SetExtInt("masterMax", end)
			resp.SetExtInt("next", off)
			return resp
		}
	}
	recs, next, err := s.lr.ReadLog(ctx, off, int(maxBytes))
	if err != nil && len(recs) == 0 {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	_, end = s.lr.LogOffsets()
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("masterMax", end)
	resp.SetExtInt("next", next)
	resp.BodyParts = recs
	return resp
}

// waitAck is the SYNC_MASTER ack waiter: SLAVE_NOT_AVAILABLE when no
// slave is connected within slave_fall_behind_max, FLUSH_SLAVE_TIMEOUT when
// none confirms physEnd within sync_timeout.
func (s *Service) waitAck(ctx context.Context, physEnd int64) int32 {
	var t *time.Timer
	for first := true; ; first = false {
		s.mu.Lock()
		best, ok := s.bestAckLocked()
		wake := s.wake
		s.mu.Unlock()
		if ok && best >= physEnd {
			if t != nil {
				t.Stop()
			}
			if s.fo != nil && !s.b.Role().Writable {
				// Fenced or deposed while waiting: the write may be cut
				// when this broker rejoins, so it is not acknowledged.
				return remoting.FlushSlaveTimeout
			}
			return remoting.Success
		}
		if first {
			if !ok || physEnd-best > int64(s.cfg.SlaveFallBehindMax) {
				return remoting.SlaveNotAvailable
			}
			t = time.NewTimer(s.cfg.SyncTimeout)
			defer t.Stop()
		}
		select {
		case <-wake:
		case <-t.C:
			return remoting.FlushSlaveTimeout
		case <-ctx.Done():
			return remoting.FlushSlaveTimeout
		}
	}
}

// suggest is the master's suggestWhichBrokerId: a connected slave's id
// when the consumer's next message is more than slave_read_lag_bytes
// behind the commit log's end (RocketMQ: 40% of RAM), else 0.
func (s *Service) suggest(res *store.ReadResult) int64 {
	if len(res.Records) == 0 {
		return 0
	}
	last := res.Records[len(res.Records)-1]
	if len(last) < 36 {
		return 0
	}
	phys := int64(binary.BigEndian.Uint64(last[28:]))
	_, end := s.lr.LogOffsets()
	if end-phys <= int64(s.cfg.SlaveReadLagBytes) {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, sl := range s.slaves {
		if now.Sub(sl.seen) <= s.liveFor() && sl.acked > phys {
			return sl.id
		}
	}
	return 0
}

// takeBackOffsets merges the offsets committed to connected slaves (by
// clients that commit to a slave while the master is away) into the
// master's, keeping the higher of each.
func (s *Service) takeBackOffsets() {
	if s.b.IsSlave() || !s.b.Role().Writable {
		return
	}
	s.mu.Lock()
	var addrs []string
	now := time.Now()
	for _, sl := range s.slaves {
		if sl.addr != "" && now.Sub(sl.seen) <= s.liveFor() {
			addrs = append(addrs, sl.addr)
		}
	}
	s.mu.Unlock()
	for _, addr := range addrs {
		table, err := s.fetchOffsets(addr)
		if err != nil {
			s.log.Warn("take back consumer offsets from slave", "slave_addr", addr, "err", err)
			continue
		}
		if n := s.b.MergeConsumerOffsets(table); n > 0 {
			s.log.Info("took back consumer offsets from slave", "slave_addr", addr, "offsets", n)
		}
	}
}

// ---- slave side ----

// masterAddr is ha.master_addr or the master (id 0) of broker.name in
// the name servers' cluster info.
func (s *Service) masterAddr() string {
	if s.fo != nil {
		return s.fo.master()
	}
	if s.cfg.MasterAddr != "" {
		return s.cfg.MasterAddr
	}
	s.masterMu.Lock()
	m := s.master
	s.masterMu.Unlock()
	if m != "" {
		return m
	}
	bc := s.b.Config()
	for _, ns := range bc.Namesrv {
		ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
		resp, err := s.invoke(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		cancel()
		if err != nil || resp.Code != remoting.Success {
			continue
		}
		var ci protocol.ClusterInfo
		if json.Unmarshal(resp.Body, &ci) != nil {
			continue
		}
		if bd := ci.BrokerAddrTable[bc.Name]; bd != nil && bd.BrokerAddrs[protocol.MasterID] != "" {
			m = bd.BrokerAddrs[protocol.MasterID]
			s.masterMu.Lock()
			s.master = m
			s.masterMu.Unlock()
			return m
		}
	}
	return ""
}

// switchMaster is called when the master to follow became addr: a pull
// running to another master is cancelled, and follow wakes up.
func (s *Service) switchMaster(addr string) {
	s.pullMu.Lock()
	if s.pullCancel != nil && s.pullMaster != addr {
		s.pullCancel()
	}
	s.pullMu.Unlock()
	select {
	case s.masterKick <- struct{}{}:
	default:
	}
}

// setPull records the running pull (cancel nil: none).
func (s *Service) setPull(master string, cancel context.CancelFunc) {
	s.pullMu.Lock()
	s.pullMaster, s.pullCancel = master, cancel
	s.pullMu.Unlock()
}

// sleepOrSwitch sleeps d, or less when the master to follow changes.
func (s *Service) sleepOrSwitch(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
	case <-s.masterKick:
	case <-t.C:
	}
}

func (s *Service) forgetMaster() {
	s.masterMu.Lock()
	s.master = ""
	s.masterMu.Unlock()
}

// follow is the slave's replication loop.
func (s *Service) follow() {
	bc := s.b.Config()
	failures := 0
	for s.ctx.Err() == nil {
		if s.fo != nil && !s.b.IsSlave() {
			if s.following.Swap(false) {
				s.log.Info("stopped following: not a slave now")
			}
			s.sleep(100 * time.Millisecond)
			continue
		}
		master := s.masterAddr()
		if master == "" {
			if s.following.Swap(false) && s.fo != nil {
				s.log.Warn("lost the master", "reason", "no committed master to follow")
			}
			if s.fo != nil {
				s.sleepOrSwitch(100 * time.Millisecond)
			} else {
				s.sleep(time.Second)
			}
			continue
		}
		role := s.b.Role()
		_, from := s.lr.LogOffsets()
		ext := map[string]string{
			"offset":     strconv.FormatInt(from, 10),
			"maxBytes":   strconv.FormatInt(int64(s.cfg.BatchBytes), 10),
			"brokerName": bc.Name,
			"brokerId":   strconv.FormatInt(role.ID, 10),
			"slaveAddr":  bc.AdvertiseAddr(),
		}
		if s.fo != nil {
			ext["memberId"] = strconv.FormatInt(bc.ID, 10)
			ext["epoch"] = strconv.FormatInt(role.Epoch, 10)
		}
		req := remoting.NewRequest(HAPull, ext, nil)
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.MaxWait+5*time.Second)
		s.setPull(master, cancel)
		if s.fo != nil && s.fo.master() != master {
			cancel() // the master changed since it was read
		}
		resp, err := s.invoke(ctx, master, req)
		s.setPull("", nil)
		cancel()
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		var recs [][]byte
		if err == nil {
			recs, err = splitRecords(resp.Body)
		}
		if err == nil && len(recs) > 0 {
			err = s.appendReplica(recs, master, role.Epoch)
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if s.fo != nil && s.fo.master() != master {
				// The controllers named another master: drop this one's
				// connection (it may be unreachable) and follow at once.
				if s.following.Swap(false) {
					s.log.Info("master changed: dropped the pull to the old master", "old_master", master, "master", s.fo.master())
				}
				s.client.CloseAddr(master)
				failures = 0
				continue
			}
			if failures == 0 || failures%30 == 0 {
				s.log.Warn("replicate from master", "master", master, "offset", from, "err", err)
			}
			failures++
			if s.following.Swap(false) {
				s.log.Warn("lost the master", "master", master)
			}
			s.client.CloseAddr(master)
			s.forgetMaster()
			s.sleep(500 * time.Millisecond)
			continue
		}
		failures = 0
		mm := remoting.ReadExt(resp).OptInt64("masterMax", 0)
		_, now := s.lr.LogOffsets()
		s.masterMax.Store(mm)
		s.lag.Store(max(0, mm-now))
		if !s.following.Swap(true) {
			s.log.Info("following master", "master", master, "offset", from, "master_max", mm)
		}
	}
}

// appendReplica appends records from master; under failover only while
// this broker still follows master in epoch (a promotion stops it).
func (s *Service) appendReplica(recs [][]byte, master string, epoch int64) error {
	if s.fo == nil {
		return s.b.AppendReplica(s.ctx, recs)
	}
	s.fo.mu.Lock()
	defer s.fo.mu.Unlock()
	if !s.b.IsSlave() || s.b.Role().Epoch != epoch || s.fo.master() != master {
		return errStopped
	}
	return s.b.AppendReplica(s.ctx, recs)
}

// errStopped: the role changed while a replication answer was on its way.
var errStopped = errors.New("ha: no longer following that master")

func (s *Service) logLag() {
	if !s.following.Load() {
		return
	}
	_, end := s.lr.LogOffsets()
	s.log.Info("replication lag", "lag_bytes", s.lag.Load(), "slave_max", end, "master_max", s.masterMax.Load())
}

// copyMeta copies the master's topic config, consumer offsets and the
// documents other modules registered (broker.ReplicaMeta: delay progress).
func (s *Service) copyMeta() {
	if !s.b.IsSlave() {
		return
	}
	master := s.masterAddr()
	if master == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	resp, err := s.invoke(ctx, master, remoting.NewRequest(remoting.GetAllTopicConfig, nil, nil))
	if err == nil && resp.Code == remoting.Success {
		var w protocol.TopicConfigWrapper
		if err = json.Unmarshal(resp.Body, &w); err == nil {
			var n int
			if n, err = s.b.ApplyTopicConfigs(w); err == nil && n > 0 {
				s.log.Info("copied topic config from master", "changed", n)
			}
			if err == nil {
				err = s.deleteGoneTopics(ctx, master, w)
			}
		}
	}
	if err != nil {
		s.log.Debug("copy topic config from master", "err", err)
		return
	}
	table, err := s.fetchOffsets(master)
	if err != nil {
		s.log.Debug("copy consumer offsets from master", "err", err)
		return
	}
	s.b.MergeConsumerOffsets(table)
	s.copyDocs(ctx, master)
}

// pendingDoc is a master's document and the master's log end read after
// it: what the document counts (a delivered delayed message) is in the
// master's log below need.
type pendingDoc struct {
	meta broker.ReplicaMeta
	body []byte
	need int64
	from string
}

// maxPendingDocs bounds the documents kept per slave while it lags.
const maxPendingDocs = 16

// copyDocs fetches the documents other modules registered
// (broker.ReplicaMeta) and applies each once this slave's log holds
// everything the master's log held when the document was read: delay
// progress that counts a delivery this slave has not replicated yet would
// make a promoted slave skip it. A lagging slave keeps the documents
// (bounded) and applies the newest one it has caught up with.
func (s *Service) copyDocs(ctx context.Context, master string) {
	metas := s.b.ReplicaMetas()
	if len(metas) == 0 {
		return
	}
	if len(s.pendingMeta) > 0 && s.pendingMeta[0].from != master {
		s.pendingMeta = nil // another master: its offsets are another log's
	}
	var got []pendingDoc
	for _, m := range metas {
		resp, err := s.invoke(ctx, master, remoting.NewRequest(m.Code, nil, nil))
		switch {
		case err != nil:
			s.log.Debug("copy from master", "document", m.Name, "err", err)
			continue
		case resp.Code != remoting.Success:
			s.log.Debug("copy from master refused", "document", m.Name, "code", resp.Code, "remark", resp.Remark)
			continue
		}
		got = append(got, pendingDoc{meta: m, body: resp.Body, from: master})
	}
	if len(got) > 0 {
		need, err := s.masterLogEnd(ctx, master)
		if err != nil {
			s.log.Debug("master's log end for copied documents", "err", err)
			got = nil
		}
		for i := range got {
			got[i].need = need
		}
	}
	s.pendingMeta = append(s.pendingMeta, got...)
	if n := len(s.pendingMeta) - maxPendingDocs; n > 0 {
		s.pendingMeta = append(s.pendingMeta[:0], s.pendingMeta[n:]...)
	}
	_, end := s.lr.LogOffsets()
	var apply []pendingDoc
	apply, s.pendingMeta = readyDocs(s.pendingMeta, end)
	for _, d := range apply {
		if err := d.meta.Apply(d.body); err != nil {
			s.log.Warn("apply the master's document", "document", d.meta.Name, "err", err)
		}
	}
}

// readyDocs splits pending (oldest first) into the documents to apply
// with the slave's log ending at end — per request code, the newest copy
// whose need end has reached — and those to keep: the copies newer than
// it, which still wait. Older copies of an applied document are dropped.
func readyDocs(pending []pendingDoc, end int64) (apply, keep []pendingDoc) {
	latest := map[int32]int{}
	for i, d := range pending {
		if d.need <= end {
			latest[d.meta.Code] = i
		}
	}
	for i, d := range pending {
		j, ok := latest[d.meta.Code]
		switch {
		case ok && i == j:
			apply = append(apply, d)
		case ok && i < j:
			// superseded by a newer copy that applies
		default:
			keep = append(keep, d)
		}
	}
	return apply, keep
}

// masterLogEnd asks master for its commit log's end
// (GET_BROKER_RUNTIME_INFO commitLogMaxOffset).
func (s *Service) masterLogEnd(ctx context.Context, master string) (int64, error) {
	resp, err := s.invoke(ctx, master, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return 0, err
	}
	if resp.Code != remoting.Success {
		return 0, fmt.Errorf("ha: GET_BROKER_RUNTIME_INFO: code %d: %s", resp.Code, resp.Remark)
	}
	var doc struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return 0, fmt.Errorf("ha: GET_BROKER_RUNTIME_INFO: %w", err)
	}
	v, ok := doc.Table["commitLogMaxOffset"]
	if !ok {
		return 0, errors.New("ha: GET_BROKER_RUNTIME_INFO: no commitLogMaxOffset")
	}
	return strconv.ParseInt(v, 10, 64)
}

// deleteGoneTopics deletes on this slave the topics that master's table
// held at the previous copy and no longer holds (deleted on the master).
// Only topics seen on the master are candidates: after a restart or a
// change of master the first copy deletes nothing, so a topic deleted on
// the master while this slave was away stays here.
func (s *Service) deleteGoneTopics(ctx context.Context, master string, w protocol.TopicConfigWrapper) error {
	now := make(map[string]bool, len(w.TopicConfigTable))
	for name, tc := range w.TopicConfigTable {
		if tc != nil && tc.TopicName != "" {
			name = tc.TopicName
		}
		now[name] = true
	}
	prev, prevMaster := s.masterTopics, s.masterTopicsFrom
	s.masterTopics, s.masterTopicsFrom = now, master
	if prevMaster != master {
		return nil
	}
	for name := range prev {
		if now[name] {
			continue
		}
		removed, err := s.b.DeleteReplicaTopic(ctx, name)
		if err != nil {
			return err
		}
		if removed {
			s.log.Info("deleted topic the master deleted", "topic", name)
		}
	}
	return nil
}

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

// splitRecords cuts a body of concatenated stored records.
func splitRecords(body []byte) ([][]byte, error) {
	var out [][]byte
	for len(body) > 0 {
		if len(body) < 4 {
			return nil, fmt.Errorf("ha: %d trailing bytes", len(body))
		}
		n := int(int32(binary.BigEndian.Uint32(body)))
		if n < 8 || n > len(body) {
			return nil, fmt.Errorf("ha: record of %d bytes in %d", n, len(body))
		}
		out = append(out, body[:n:n])
		body = body[n:]
	}
	return out, nil
}
