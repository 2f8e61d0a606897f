// Package controller is automatic failover for broker groups (issue 12):
// a small controller that runs in the name servers (namesrv.controller.enabled)
// and replicates, with hashicorp/raft, per broker name the committed
// {epoch, master, in-sync set, epoch start offsets} (FSM). Brokers under
// failover (ha.failover) send it a heartbeat every ha.heartbeat_interval
// (request code Heartbeat, to every name server) and act on the committed
// state they are answered: the elected broker is the master of the epoch,
// the others follow it. The raft leader elects: a group's founder (its
// configured master) at epoch 1, and, when the master's heartbeats lapse
// for the group's failover timeout, the in-sync slave with the highest
// commit-log offset at epoch+1. Each name server refuses a master
// registration whose epoch and address are not the committed ones and
// drops a deposed master from its routes as soon as it applies the new
// epoch, so no name server ever shows two masters for one broker name.
// A name server answers a group's master only while its controller can
// vouch for it (confirm.go: the current epoch confirmed with a raft
// majority within a lease), so one cut off from the majority never
// points clients at a deposed master. See docs/REPLICATION.md.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/namesrv"
)

// applyTimeout bounds one raft Apply.
const applyTimeout = 3 * time.Second

// Controller is one member of the controller raft cluster.
type Controller struct {
	cfg *Config
	log *slog.Logger
	fsm *FSM
	now func() time.Time

	raft  *raft.Raft
	trans *raft.NetworkTransport
	layer *muxLayer
	allow *allowList // who may connect to the raft port (allow.go)
	bolt  *boltStore

	mu          sync.Mutex
	beats       map[string]map[int64]beat // broker name → member id → last heartbeat
	leaderSince time.Time                 // zero when not the leader
	stuck       map[string]int64          // broker name → epoch already logged as having no candidate
	epochSeen   map[string]beat           // broker name → when the leader first saw its current epoch (hb.Epoch)
	revoking    map[string]time.Time      // broker name → when the leader began deposing its master (confirm.go)

	cmu       sync.Mutex
	confirmed confirmState // the last confirmation of the applied state (confirm.go)
	confirmOK bool         // the last confirmation round worked (for logging transitions)

	// barrierTerm is the last term in which this controller, as the
	// leader, committed a barrier: its read index is good from then on.
	barrierTerm atomic.Uint64
	// appliedThrough is the highest index the FSM was found to hold
	// every entry up to (confirm.go: applied; the confirm loop's).
	appliedThrough uint64
	// afterCommitRead (tests) runs in verifiedCommit once the commit
	// index is read: a point where raft may commit more meanwhile.
	afterCommitRead func()

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopping chan struct{} // closed by Stop before raft shuts down
	stopOnce sync.Once

	// futures counts the raft questions awaitFuture asked and raft has
	// not answered yet; futClosed (Stop) refuses new ones.
	futMu     sync.Mutex
	futures   sync.WaitGroup
	futClosed bool
}

type beat struct {
	hb HeartbeatBody
	at time.Time
}

// New builds a controller; onChange (may be nil) sees every group an
// applied entry changed, on every controller (the name server drops a
// deposed master there).
func New(cfg *Config, log *slog.Logger, onChange func(*Group)) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		cfg: cfg, log: log.With("component", "controller"), fsm: NewFSM(onChange), now: time.Now,
		beats: map[string]map[int64]beat{}, stuck: map[string]int64{}, epochSeen: map[string]beat{},
		revoking: map[string]time.Time{}, stopping: make(chan struct{}),
	}, nil
}

// FSM returns the replicated state (read-only use).
func (c *Controller) FSM() *FSM { return c.fsm }

// Start opens the raft stores, binds the raft transport, bootstraps the
// cluster from controller.peers the first time and starts the election
// loop.
func (c *Controller) Start(ctx context.Context) error {
	if err := os.MkdirAll(c.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("controller: create %s: %w", c.cfg.DataDir, err)
	}
	out := &logWriter{log: c.log}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: out})
	bolt, err := openBoltStore(filepath.Join(c.cfg.DataDir, "raft.db"))
	if err != nil {
		return fmt.Errorf("controller: open raft store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.cfg.DataDir, 2, hl)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("controller: open snapshots: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", c.cfg.Listen)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("controller: listen %s: %w", c.cfg.Listen, err)
	}
	allow, err := newAllowList(ctx, c.cfg, c.log)
	if err != nil {
		bolt.Close()
		return err
	}
	c.allow = allow
	pt, err := newPeerTLS(c.cfg, c.log)
	if err != nil {
		bolt.Close()
		return err
	}
	layer, err := newMuxLayer(c.cfg.Listen, adv, c.serveReadIndex, allow.allows, pt, c.log)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("controller: listen %s: %w", c.cfg.Listen, err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 3, Timeout: 2 * time.Second, Logger: hl})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.cfg.Listen)
	rc.HeartbeatTimeout = c.cfg.RaftTimeout
	rc.ElectionTimeout = c.cfg.RaftTimeout
	rc.LeaderLeaseTimeout = c.cfg.RaftTimeout / 2
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = 1024
	rc.Logger = hl
	has, err := raft.HasExistingState(bolt, bolt, snaps)
	if err != nil {
		trans.Close()
		bolt.Close()
		return fmt.Errorf("controller: %w", err)
	}
	r, err := raft.NewRaft(rc, c.fsm, bolt, bolt, snaps, trans)
	if err != nil {
		trans.Close()
		bolt.Close()
		return fmt.Errorf("controller: start raft: %w", err)
	}
	if !has {
		peers := c.cfg.Peers
		if len(peers) == 0 {
			peers = []string{c.cfg.Listen}
		}
		var conf raft.Configuration
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p), Address: raft.ServerAddress(p)})
		}
		if err := r.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			r.Shutdown().Error() //nolint:errcheck // shutting down after a failed bootstrap; the bootstrap error is returned
			trans.Close()
			bolt.Close()
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	c.raft, c.trans, c.layer, c.bolt = r, trans, layer, bolt
	lctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.loop(lctx)
	}()
	go func() {
		defer c.wg.Done()
		c.confirmLoop(lctx)
	}()
	c.log.Info("controller started", "listen", c.cfg.Listen, "peers", strings.Join(c.cfg.Peers, ","), "existing_state", has)
	return nil
}

// Stop stops the loop and raft.
func (c *Controller) Stop(ctx context.Context) error {
	if c.raft == nil {
		return nil
	}
	c.stopOnce.Do(func() { close(c.stopping) })
	c.cancel()
	c.wg.Wait()
	c.drainFutures(ctx)
	err := c.raft.Shutdown().Error()
	c.trans.CloseStreams()
	if cerr := c.trans.Close(); err == nil {
		err = cerr
	}
	if cerr := c.bolt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("controller: stop: %w", err)
	}
	return nil
}

// IsLeader reports whether this controller is the raft leader.
func (c *Controller) IsLeader() bool { return c.raft != nil && c.raft.State() == raft.Leader }

// apply commits cmd through raft (on the leader) and returns the group it
// changed.
func (c *Controller) apply(cmd Command) (*Group, error) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	f := c.raft.Apply(data, applyTimeout)
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("controller: commit %s of %s: %w", cmd.Op, cmd.Name, err)
	}
	switch v := f.Response().(type) {
	case error:
		return nil, v
	case *Group:
		return v, nil
	}
	return nil, nil
}

// HandleHeartbeat records hb and answers the committed view of its group.
// On the leader it founds a group for its configured master and records
// an elected master's start offset at once, so that the answer carries
// them.
func (c *Controller) HandleHeartbeat(hb HeartbeatBody) View {
	c.mu.Lock()
	m := c.beats[hb.Name]
	if m == nil {
		m = map[int64]beat{}
		c.beats[hb.Name] = m
	}
	m[hb.MemberID] = beat{hb: hb, at: c.now()}
	c.mu.Unlock()

	leader := c.IsLeader()
	g := c.fsm.Group(hb.Name)
	if leader {
		switch {
		case g == nil && hb.Founder:
			ft := hb.FailoverTimeout
			if ft <= 0 {
				ft = c.cfg.DefaultFailoverTimeout
			}
			ng, err := c.apply(Command{Op: opElect, Cluster: hb.Cluster, Name: hb.Name, Epoch: 0, MasterID: hb.MemberID,
				MasterAddr: hb.Addr, Start: hb.Offset, Ready: true, Sync: hb.Sync, FailoverTimeout: ft})
			if err == nil {
				c.log.Info("group founded", "broker", hb.Name, "epoch", ng.Epoch, "master", hb.MemberID, "addr", hb.Addr, "start", hb.Offset)
				g = ng
			} else if !errors.Is(err, ErrStale) {
				c.log.Warn("found group", "broker", hb.Name, "err", err)
			}
		case g != nil && hb.Ready && hb.Epoch == g.Epoch && hb.MemberID == g.MasterID && !g.Ready():
			ng, err := c.apply(Command{Op: opStart, Name: hb.Name, Epoch: g.Epoch, Start: hb.Offset, Sync: g.Sync})
			if err == nil {
				c.log.Info("new master ready", "broker", hb.Name, "epoch", ng.Epoch, "master", hb.MemberID, "addr", hb.Addr, "start", hb.Offset)
				g = ng
			} else if !errors.Is(err, ErrStale) {
				c.log.Warn("record epoch start", "broker", hb.Name, "err", err)
			}
		}
	}
	if g == nil {
		g = c.fsm.Group(hb.Name)
	}
	return View{Leader: leader, Group: g}
}

func (c *Controller) loop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.check()
	}
}

// check runs on every tick: on the leader, it commits in-sync changes and
// elects a new master for each group whose master's heartbeats lapsed.
func (c *Controller) check() {
	now := c.now()
	c.mu.Lock()
	if !c.IsLeader() {
		c.leaderSince = time.Time{}
		clear(c.revoking)
		c.mu.Unlock()
		return
	}
	if c.leaderSince.IsZero() {
		// A new leader gives every master a full timeout from now.
		c.leaderSince = now
		c.log.Info("controller leader", "listen", c.cfg.Listen)
	}
	leaderSince := c.leaderSince
	beats := make(map[string]map[int64]beat, len(c.beats))
	for name, m := range c.beats {
		beats[name] = cloneBeats(m)
	}
	groups := c.fsm.Groups()
	sinces := make(map[string]time.Time, len(groups))
	for _, g := range groups {
		// A new epoch gives its master a full timeout to report.
		es, ok := c.epochSeen[g.Name]
		if !ok || es.hb.Epoch != g.Epoch {
			es = beat{hb: HeartbeatBody{Epoch: g.Epoch}, at: now}
			c.epochSeen[g.Name] = es
		}
		sinces[g.Name] = leaderSince
		if es.at.After(leaderSince) {
			sinces[g.Name] = es.at
		}
	}
	c.mu.Unlock()

	for _, g := range groups {
		since := sinces[g.Name]
		cmd, ok := decide(g, beats[g.Name], since, now, c.cfg.DefaultFailoverTimeout)
		if ok && cmd.Op == opElect && !c.revoked(g, now) {
			continue
		}
		if !ok || cmd.Op != opElect {
			c.unrevoke(g.Name)
		}
		if ok {
			ng, err := c.apply(cmd)
			switch {
			case errors.Is(err, ErrStale):
			case err != nil:
				c.log.Warn("commit", "op", cmd.Op, "broker", g.Name, "err", err)
			case cmd.Op == opElect:
				c.unrevoke(g.Name)
				c.log.Warn("master lapsed: elected a new master", "broker", g.Name, "old_master", g.MasterID, "old_addr", g.MasterAddr,
					"epoch", ng.Epoch, "master", ng.MasterID, "addr", ng.MasterAddr)
			default:
				c.log.Info("in-sync set", "broker", g.Name, "epoch", ng.Epoch, "in_sync", fmt.Sprint(ng.InSync))
			}
			continue
		}
		if lapsed(g, beats[g.Name], since, now, c.cfg.DefaultFailoverTimeout) {
			c.mu.Lock()
			if c.stuck[g.Name] != g.Epoch {
				c.stuck[g.Name] = g.Epoch
				c.log.Warn("master lapsed and no in-sync slave is alive: no election", "broker", g.Name, "epoch", g.Epoch,
					"master", g.MasterID, "in_sync", fmt.Sprint(g.InSync))
			}
			c.mu.Unlock()
		}
	}
}

// revoked reports whether g's master has been revoked for a whole vouch
// lease, so that an election may be committed: the first call starts the
// revocation (no controller vouches for the master any more once its
// confirmation from before runs out; see confirm.go).
func (c *Controller) revoked(g *Group, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.revoking[g.Name]
	if !ok {
		// The lease counts from when read indexes can see the revocation,
		// not from now (read at the start of check, maybe well before): a
		// confirmation asked in between runs until a lease after it.
		c.revoking[g.Name] = c.now()
		c.log.Warn("master lapsed: revoking it before the election", "broker", g.Name, "epoch", g.Epoch, "master", g.MasterAddr,
			"wait", c.vouchLease())
		return false
	}
	return now.Sub(at) >= c.vouchLease()
}

// unrevoke ends a revocation (the master came back, or it was replaced).
func (c *Controller) unrevoke(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.revoking, name)
}

func cloneBeats(m map[int64]beat) map[int64]beat {
	out := make(map[int64]beat, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func failoverTimeout(g *Group, def time.Duration) time.Duration {
	if g.FailoverTimeout > 0 {
		return g.FailoverTimeout
	}
	return def
}

// lapsed reports whether g's master has not been heard from for the
// group's failover timeout (counted from since at least: the leader's
// start or the epoch's election).
func lapsed(g *Group, beats map[int64]beat, since, now time.Time, def time.Duration) bool {
	last := since
	if b, ok := beats[g.MasterID]; ok && b.hb.Addr == g.MasterAddr && b.at.After(last) {
		last = b.at
	}
	return now.Sub(last) > failoverTimeout(g, def)
}

// decide is the leader's rule for one group (pure, for tests): an
// election when the master lapsed and an in-sync slave is alive (the one
// with the highest offset, then the lowest id), else an in-sync update
// when the live master reports a different set.
func decide(g *Group, beats map[int64]beat, since, now time.Time, def time.Duration) (Command, bool) {
	ft := failoverTimeout(g, def)
	if lapsed(g, beats, since, now, def) {
		var best *beat
		for _, id := range g.InSync {
			b, ok := beats[id]
			if !ok || id == g.MasterID || now.Sub(b.at) > ft || b.hb.Addr == "" {
				continue
			}
			// A candidate followed this epoch, or the previous one when
			// this epoch's master never started (it wrote nothing).
			if b.hb.Epoch != g.Epoch && !(b.hb.Epoch == g.Epoch-1 && !g.Ready()) {
				continue
			}
			if best == nil || b.hb.Offset > best.hb.Offset || (b.hb.Offset == best.hb.Offset && b.hb.MemberID < best.hb.MemberID) {
				bb := b
				best = &bb
			}
		}
		if best == nil {
			return Command{}, false
		}
		return Command{Op: opElect, Cluster: g.Cluster, Name: g.Name, Epoch: g.Epoch, MasterID: best.hb.MemberID, MasterAddr: best.hb.Addr}, true
	}
	b, ok := beats[g.MasterID]
	if !ok || !b.hb.Master || b.hb.Epoch != g.Epoch || !g.Ready() {
		return Command{}, false
	}
	in := slices.Clone(b.hb.InSync)
	slices.Sort(in)
	in = slices.Compact(in)
	if slices.Equal(in, g.InSync) && b.hb.Sync == g.Sync && (b.hb.FailoverTimeout <= 0 || b.hb.FailoverTimeout == g.FailoverTimeout) {
		return Command{}, false
	}
	if in == nil {
		in = []int64{}
	}
	return Command{Op: opInSync, Name: g.Name, Epoch: g.Epoch, InSync: in, Sync: b.hb.Sync, FailoverTimeout: b.hb.FailoverTimeout}, true
}

// registerWait bounds how long CheckRegistration waits for this
// controller to apply the epoch a registration names.
const registerWait = time.Second

// CheckRegistration is the name server's RegisterCheck: a master (id 0)
// registration of a broker name the controllers know must carry the
// committed epoch and come from the committed master, once it started;
// one of a name they do not know is refused when it carries an epoch
// (a failover broker waits for its group to be founded) and accepted
// otherwise (brokers without failover). A registration this controller
// may just not have caught up with (a newer epoch, or the current one
// not started yet) waits up to registerWait for raft to apply it, so
// that a new master appears on every name server at about the same time.
func (c *Controller) CheckRegistration(r namesrv.BrokerRegistration, epoch int64, hasEpoch bool) error {
	if r.BrokerID != protocol.MasterID {
		return nil
	}
	var timeout <-chan time.Time
	for {
		changed := c.fsm.Changed()
		later, err := c.checkRegistration(r, epoch, hasEpoch)
		if err == nil || !later {
			return err
		}
		if timeout == nil {
			t := time.NewTimer(registerWait)
			defer t.Stop() //nolint:gocritic // made once (timeout == nil before), stopped on return
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return err
		}
	}
}

// checkRegistration is one check of a master registration; later reports
// whether a refusal may turn into an acceptance once this controller
// applies more entries.
func (c *Controller) checkRegistration(r namesrv.BrokerRegistration, epoch int64, hasEpoch bool) (later bool, err error) {
	g := c.fsm.Group(r.BrokerName)
	switch {
	case g == nil && !hasEpoch:
		return false, nil
	case g == nil:
		return true, fmt.Errorf("no master of %s is committed yet (epoch %d)", r.BrokerName, epoch)
	case !hasEpoch:
		return false, fmt.Errorf("broker %s is under failover control (master %s, epoch %d): a broker without ha.failover cannot register as its master", r.BrokerName, g.MasterAddr, g.Epoch)
	case epoch > g.Epoch:
		return true, fmt.Errorf("epoch %d of %s is not applied here yet (at %d)", epoch, r.BrokerName, g.Epoch)
	case epoch != g.Epoch || r.BrokerAddr != g.MasterAddr:
		return false, fmt.Errorf("not the master of %s: the committed master is %s at epoch %d (this one: %s at epoch %d)", r.BrokerName, g.MasterAddr, g.Epoch, r.BrokerAddr, epoch)
	case !g.Ready():
		return true, fmt.Errorf("the master of %s at epoch %d has not started yet", r.BrokerName, g.Epoch)
	}
	return false, nil
}

// handle is the Heartbeat request handler.
func (c *Controller) handle(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	var hb HeartbeatBody
	if err := json.Unmarshal(req.Body, &hb); err != nil || hb.Name == "" || hb.Addr == "" {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("controller: bad heartbeat: %v", err))
	}
	body, err := json.Marshal(c.HandleHeartbeat(hb))
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// Attach plugs the controller into a name server: the Heartbeat handler,
// the registration check and the vouch for masters in answers. A deposed master is dropped from ns's routes
// by the onChange New was given (see DropOnChange).
func (c *Controller) Attach(ns *namesrv.Server) {
	ns.Router().Register(Heartbeat, c.handle)
	ns.SetRegisterCheck(c.CheckRegistration)
	ns.SetMasterVouch(c.Vouch)
}

// DropOnChange returns the onChange that removes a deposed master from
// routes (a name server's) when its group's new epoch is applied.
func DropOnChange(routes func() *namesrv.RouteTable, log *slog.Logger) func(*Group) {
	return func(g *Group) {
		if addr := routes().DropMaster(g.Name, g.MasterAddr); addr != "" && log != nil {
			log.Info("deposed master dropped from routes", "broker", g.Name, "addr", addr, "epoch", g.Epoch, "master", g.MasterAddr)
		}
	}
}

// logWriter sends raft's log lines to slog.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Warn(strings.TrimSpace(string(p)), "from", "raft")
	return len(p), nil
}
