package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/controller"
)

// RestartExitCode is the fx exit code with which the service asks the
// process (server.Run) to stop and start its app again: its commit log
// must be truncated, which happens before the store opens.
const RestartExitCode = 75

// Files in <storage.dir>/ha.
const (
	epochFile    = "epoch.json"
	truncateFile = "truncate.json"
)

// failover is the broker side of automatic failover (ha.failover): it
// heartbeats the controllers and applies the committed state of its group
// to the broker's runtime role.
type failover struct {
	s        *Service
	dir      string // <storage.dir>/ha
	memberID int64
	slaveID  int64
	founder  bool

	// mu serializes role changes against the slave's appends: once a
	// promoted slave stopped following, no record is appended after the
	// end it reports.
	mu    sync.Mutex
	epoch int64 // persisted: the last epoch served or followed
	ready bool  // elected and reported its start; waiting for the commit
	sync  bool  // the group's masters are SYNC_MASTERs
	// lastLeader is when the last heartbeat a raft leader answered was
	// sent: the master's lease runs from there (see lease).
	lastLeader time.Time
	// fence fires when the lease ends and fences a writable master.
	fence  *time.Timer
	warned string

	masterAddr atomic.Pointer[string]
	// awaitStart: the last view named another member master of an epoch
	// that has not started yet (heartbeat faster meanwhile).
	awaitStart atomic.Bool
	kick       chan struct{}
	restart    func()
}

func newFailover(s *Service, dir string) (*failover, error) {
	bc := s.b.Config()
	f := &failover{
		s: s, dir: dir, memberID: bc.ID, slaveID: s.cfg.SlaveID, founder: bc.ID == 0,
		sync: bc.Role == broker.RoleSyncMaster, kick: make(chan struct{}, 1),
	}
	if f.slaveID == 0 {
		f.slaveID = bc.ID
		if bc.ID == 0 {
			f.slaveID = defaultDemotedID
		}
	}
	e, err := loadEpoch(dir)
	if err != nil {
		return nil, err
	}
	f.epoch = e
	f.lastLeader = time.Now()
	// Until the controllers answer, a configured master is fenced and
	// unregistered, a slave follows no one.
	if f.founder {
		s.b.SetRole(broker.RoleState{Role: bc.Role, ID: 0, Epoch: e, Hidden: true})
	} else {
		s.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: f.slaveID, Epoch: e, Hidden: true})
	}
	return f, nil
}

// defaultDemotedID is the brokerId a configured master (broker.id 0)
// registers with while it serves as a slave, unless ha.slave_id says.
const defaultDemotedID = 100

func (f *failover) master() string {
	if p := f.masterAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// setMaster names the master to follow ("" none); a pull running to
// another one is cancelled at once.
func (f *failover) setMaster(addr string) {
	if old := f.masterAddr.Swap(&addr); old == nil || *old != addr {
		f.s.switchMaster(addr)
	}
}

// lease is how long a master stays writable after sending a heartbeat
// that a raft leader answered: ha.failover_timeout less one
// heartbeat_interval. The leader elects another master only when it has
// received no heartbeat for failover_timeout (it received that one after
// it was sent), so the old master stops accepting writes before any
// election, with a heartbeat interval to spare for timer and scheduling
// delays. (A raft leader cut off from its peers steps down after raft's
// leader lease, raft_timeout/2, before another can be elected.)
func (f *failover) lease() time.Duration {
	return f.s.cfg.FailoverTimeout - f.s.cfg.HeartbeatInterval
}

// armFenceLocked (re)starts the lease timer from lastLeader.
func (f *failover) armFenceLocked() {
	d := time.Until(f.lastLeader.Add(f.lease()))
	if f.fence == nil {
		f.fence = time.AfterFunc(d, f.leaseExpired)
		return
	}
	f.fence.Reset(d)
}

// leaseExpired fences a writable master whose lease ran out, whether or
// not a heartbeat is still waiting for its answers.
func (f *failover) leaseExpired() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.s.ctx.Err() != nil {
		return
	}
	if d := time.Until(f.lastLeader.Add(f.lease())); d > 0 {
		f.fence.Reset(d)
		return
	}
	if f.s.b.Role().Writable {
		f.fenceLocked("no controller leader answered a heartbeat within the lease (ha.failover_timeout less ha.heartbeat_interval)")
	}
}

// loop heartbeats every heartbeat_interval, and at once after a change.
func (f *failover) loop() {
	t := time.NewTimer(f.s.cfg.HeartbeatInterval)
	defer t.Stop()
	f.mu.Lock()
	f.armFenceLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.fence.Stop()
		f.mu.Unlock()
	}()
	for f.s.ctx.Err() == nil {
		f.beat()
		if f.awaitStart.Load() {
			// A new master was elected and has not started: ask again
			// soon, so this broker follows it as soon as it serves.
			t.Reset(min(f.s.cfg.HeartbeatInterval, awaitStartBeat))
		} else {
			t.Reset(f.s.cfg.HeartbeatInterval)
		}
		select {
		case <-f.s.ctx.Done():
			return
		case <-t.C:
		case <-f.kick:
		}
	}
}

// awaitStartBeat is the heartbeat period of a member waiting for an
// elected master to start.
const awaitStartBeat = 50 * time.Millisecond

func (f *failover) kickNow() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *failover) heartbeat() controller.HeartbeatBody {
	bc := f.s.b.Config()
	r := f.s.b.Role()
	_, end := f.s.lr.LogOffsets()
	f.mu.Lock()
	defer f.mu.Unlock()
	hb := controller.HeartbeatBody{
		Cluster: bc.Cluster, Name: bc.Name, MemberID: f.memberID, Addr: bc.AdvertiseAddr(),
		Epoch: f.epoch, Master: r.Writable, Founder: f.founder, Ready: f.ready, Offset: end,
		Sync: f.sync, FailoverTimeout: f.s.cfg.FailoverTimeout,
	}
	if r.Writable {
		hb.InSync = f.s.inSync()
	}
	return hb
}

// beat sends a heartbeat to every name server and acts on the answers:
// as soon as a raft leader answered (its view is the committed state), or
// once every name server answered or timed out. An unreachable name
// server does not slow the heartbeat down: its request finishes in the
// background within its timeout.
func (f *failover) beat() {
	hb := f.heartbeat()
	sent := time.Now()
	body, err := json.Marshal(hb)
	if err != nil {
		return
	}
	nss := f.s.b.Config().Namesrv
	type answer struct {
		i int
		v *controller.View
	}
	answers := make(chan answer, len(nss))
	for i, ns := range nss {
		f.s.wg.Add(1)
		go func() {
			defer f.s.wg.Done()
			ctx, cancel := context.WithTimeout(f.s.ctx, min(2*time.Second, max(500*time.Millisecond, 2*f.s.cfg.HeartbeatInterval)))
			defer cancel()
			a := answer{i: i}
			resp, err := f.s.invoke(ctx, ns, remoting.NewRequest(controller.Heartbeat, nil, body))
			if err == nil && resp.Code == remoting.Success {
				var v controller.View
				if json.Unmarshal(resp.Body, &v) == nil {
					a.v = &v
				}
			}
			answers <- a
		}()
	}
	views := make([]*controller.View, len(nss))
	for range nss {
		a := <-answers
		views[a.i] = a.v
		if a.v != nil && a.v.Leader {
			break
		}
	}
	f.act(views, sent)
}

// best picks the committed state to act on: the highest epoch, started
// before not started; leader reports whether a raft leader answered.
func best(views []*controller.View) (g *controller.Group, leader bool) {
	for _, v := range views {
		if v == nil {
			continue
		}
		leader = leader || v.Leader
		if v.Group == nil {
			continue
		}
		if g == nil || v.Group.Epoch > g.Epoch || (v.Group.Epoch == g.Epoch && v.Group.Ready() && !g.Ready()) {
			g = v.Group
		}
	}
	return g, leader
}

func (f *failover) warn(msg string, args ...any) {
	if key := fmt.Sprint(msg, args); key != f.warned {
		f.warned = key
		f.s.log.Warn(msg, args...)
	}
}

// act applies the committed state of the group in views (answers to a
// heartbeat sent at sent) to the broker.
func (f *failover) act(views []*controller.View, sent time.Time) {
	g, leader := best(views)
	bc := f.s.b.Config()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if leader && sent.After(f.lastLeader) {
		f.lastLeader = sent
		f.armFenceLocked()
	}
	expired := now.Sub(f.lastLeader) >= f.lease()
	r := f.s.b.Role()
	f.awaitStart.Store(false)
	if g == nil {
		if r.Writable && expired {
			f.fenceLocked("no controller leader answered within the lease")
		}
		return
	}
	me := g.MasterID == f.memberID && g.MasterAddr == bc.AdvertiseAddr()
	switch {
	case me && g.Ready():
		if f.epoch != g.Epoch && !(f.epoch == 0 && g.Epoch == 1) {
			f.warn("the controllers name this broker master of an epoch it did not start; staying fenced", "epoch", g.Epoch, "local_epoch", f.epoch)
			return
		}
		if r.Writable && r.Epoch == g.Epoch {
			if expired {
				f.fenceLocked("no controller leader answered within the lease")
			}
			return
		}
		if expired {
			return
		}
		if err := f.setEpochLocked(g.Epoch); err != nil {
			f.warn("persist epoch", "err", err)
			return
		}
		f.ready = false
		f.sync = g.Sync
		f.becomeMasterLocked(g)
	case me:
		// Elected, not started: stop following and report the end.
		if f.ready && f.epoch == g.Epoch {
			return
		}
		f.setMaster("")
		f.s.b.SetRole(broker.RoleState{Role: masterRole(g.Sync), ID: r.ID, Epoch: g.Epoch})
		if err := f.setEpochLocked(g.Epoch); err != nil {
			f.warn("persist epoch", "err", err)
			return
		}
		f.ready = true
		_, end := f.s.lr.LogOffsets()
		f.s.log.Warn("elected master: stopped following; reporting the start offset", "epoch", g.Epoch, "offset", end)
		f.kickNow()
	default:
		f.ready = false
		if r.Role != broker.RoleSlave || r.Writable {
			f.s.b.SetAckWaiter(nil)
			f.s.b.SetPullSuggester(nil)
			if r.Writable || r.Role != broker.RoleSlave {
				f.s.log.Warn("no longer master: demoted to slave", "epoch", g.Epoch, "master", g.MasterAddr)
			}
		}
		if !g.Ready() {
			// The new master has not started: follow no one yet (keep the
			// epoch, the cut point is not known).
			f.awaitStart.Store(true)
			f.setMaster("")
			f.s.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: f.slaveID, Epoch: f.epoch})
			return
		}
		if f.epoch > g.Epoch {
			f.warn("this broker has served a later epoch than the controllers know; staying fenced", "epoch", g.Epoch, "local_epoch", f.epoch)
			f.setMaster("")
			f.s.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: f.slaveID, Epoch: f.epoch, Hidden: true})
			return
		}
		if f.epoch > 0 && f.epoch < g.Epoch {
			_, end := f.s.lr.LogOffsets()
			if cut, ok := g.CutAfter(f.epoch); ok && end > cut {
				f.setMaster("")
				f.s.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: f.slaveID, Epoch: f.epoch, Hidden: true})
				f.requestTruncateLocked(cut, g.Epoch, end)
				return
			}
		}
		if f.epoch != g.Epoch {
			if err := f.setEpochLocked(g.Epoch); err != nil {
				f.warn("persist epoch", "err", err)
				return
			}
		}
		f.sync = g.Sync
		f.s.b.SetRole(broker.RoleState{Role: broker.RoleSlave, ID: f.slaveID, Epoch: g.Epoch})
		if f.master() != g.MasterAddr {
			f.s.log.Info("following the committed master", "epoch", g.Epoch, "master", g.MasterAddr, "master_id", g.MasterID)
			f.setMaster(g.MasterAddr)
		}
	}
}

func masterRole(sync bool) string {
	if sync {
		return broker.RoleSyncMaster
	}
	return broker.RoleAsyncMaster
}

func (f *failover) becomeMasterLocked(g *controller.Group) {
	f.setMaster("")
	s := f.s
	s.mu.Lock()
	s.slaves = map[int64]*slaveState{}
	s.mu.Unlock()
	if g.Sync {
		s.b.SetAckWaiter(s.waitAck)
	} else {
		s.b.SetAckWaiter(nil)
	}
	if s.cfg.SlaveReadLagBytes > 0 {
		s.b.SetPullSuggester(s.suggest)
	}
	s.b.SetRole(broker.RoleState{Role: masterRole(g.Sync), ID: 0, Epoch: g.Epoch, Writable: true})
	s.log.Warn("serving as master", "epoch", g.Epoch, "start", g.Start(g.Epoch), "sync", g.Sync)
}

func (f *failover) fenceLocked(why string) {
	r := f.s.b.Role()
	r.Writable = false
	f.s.b.SetRole(r)
	f.s.log.Warn("fenced: refusing writes", "reason", why, "epoch", r.Epoch)
}

// requestTruncateLocked records the cut and asks the process to restart:
// the store is truncated before it opens again (see Truncating).
func (f *failover) requestTruncateLocked(cut, epoch, end int64) {
	if f.restart == nil {
		f.warn("the commit log must be truncated but no restart hook is set; staying fenced", "cut", cut, "end", end)
		return
	}
	if err := writeJSON(f.dir, truncateFile, truncation{Offset: cut, Epoch: epoch}); err != nil {
		f.warn("record truncation", "err", err)
		return
	}
	f.s.log.Warn("this broker holds records the new master lacks: truncating its commit log (restarting the broker in process)",
		"cut", cut, "end", end, "drop_bytes", end-cut, "local_epoch", f.epoch, "epoch", epoch)
	f.restart()
	f.restart = nil
}

func (f *failover) setEpochLocked(e int64) error {
	if f.epoch == e {
		return nil
	}
	if err := writeJSON(f.dir, epochFile, epochState{Epoch: e}); err != nil {
		return err
	}
	f.epoch = e
	return nil
}

// inSync lists the member ids of the slaves heard from recently and
// within slave_fall_behind_max of the end.
func (s *Service) inSync() []int64 {
	_, end := s.lr.LogOffsets()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := []int64{}
	for _, sl := range s.slaves {
		if now.Sub(sl.seen) <= s.liveFor() && end-sl.acked <= int64(s.cfg.SlaveFallBehindMax) {
			out = append(out, sl.member)
		}
	}
	return out
}

type epochState struct {
	Epoch int64 `json:"epoch"`
}

type truncation struct {
	Offset int64 `json:"offset"`
	Epoch  int64 `json:"epoch"`
}

func loadEpoch(dir string) (int64, error) {
	var e epochState
	ok, err := readJSON(dir, epochFile, &e)
	if err != nil || !ok {
		return 0, err
	}
	return e.Epoch, nil
}

func readJSON(dir, name string, v any) (bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ha: read %s: %w", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("ha: decode %s: %w", name, err)
	}
	return true, nil
}

// writeJSON writes dir/name durably: the directory (and any new parent)
// made durable, then a temporary file written, fsynced, renamed over
// dir/name and the directory fsynced (core/durable).
func writeJSON(dir, name string, v any) error {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ha: %w", err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("ha: write %s: %w", name, err)
	}
	return nil
}
