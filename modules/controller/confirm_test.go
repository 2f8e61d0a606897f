package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vouchWatch polls every controller's Vouch for addr until stopped and
// records each poll that vouched for addr while some controller had
// already applied an epoch in which addr is not the master (a deposed
// master answered).
type vouchWatch struct {
	stop  chan struct{}
	done  chan struct{}
	polls atomic.Int64
	stale atomic.Int64
}

func watchVouch(cs []*Controller, name string, addrs ...string) *vouchWatch {
	w := &vouchWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			// Which of addrs were deposed before this round started.
			deposed := map[string]bool{}
			for _, c := range cs {
				if g := c.fsm.Group(name); g != nil {
					for _, a := range addrs {
						if g.MasterAddr != a && g.Epoch > 1 {
							deposed[a] = true
						}
					}
				}
			}
			for _, c := range cs {
				for a := range deposed {
					w.polls.Add(1)
					if c.Vouch(name, a) {
						w.stale.Add(1)
					}
				}
			}
			time.Sleep(2 * time.Millisecond) // pacing only, not synchronisation
		}
	}()
	return w
}

func (w *vouchWatch) close() { close(w.stop); <-w.done }

// TestMinorityControllerWithholdsMaster: three controllers over loopback
// raft; one follower's transport is blocked (cut off from the others).
// Within a lease it stops vouching for the master; the majority elects a
// new master after the old one lapses (revoking it for a lease first) and
// no controller ever vouches for the deposed master; after the heal the
// cut-off controller vouches for the new master only once it applied the
// new epoch. Then the raft leader itself is cut off: it stops vouching
// and the other two confirm under a new leader.
func TestMinorityControllerWithholdsMaster(t *testing.T) {
	cs := startControllers(t, 3)
	leader := leaderOf(t, cs)
	lease := leader.vouchLease()
	ft := 800 * time.Millisecond
	master := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 0, Addr: "10.0.0.1:1", Founder: true, Offset: 100, Sync: true, FailoverTimeout: ft}
	s1 := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 1, Addr: "10.0.0.2:1", Offset: 100}
	var g *Group
	require.Eventually(t, func() bool { g = beatAll(cs, master); return g != nil }, 5*time.Second, 20*time.Millisecond)
	master.Epoch, master.Master, s1.Epoch, master.InSync = 1, true, 1, []int64{1}
	require.Eventually(t, func() bool {
		beatAll(cs, s1)
		g = beatAll(cs, master)
		return len(g.InSync) == 1
	}, 5*time.Second, 20*time.Millisecond)
	lastMasterBeat := time.Now() // the master is silent from here on
	for i, c := range cs {
		// Vouch passes any address of a name the controller does not know
		// (no failover): a follower may apply the founding entry a
		// heartbeat round after the leader, so wait for the group first.
		require.Eventually(t, func() bool { return c.fsm.Group("b") != nil && c.Vouch("b", master.Addr) }, 5*time.Second, 5*time.Millisecond,
			"controller %d applied the group and vouches for the founder", i)
		assert.False(t, c.Vouch("b", s1.Addr), "a slave is no master")
		assert.True(t, c.Vouch("other", "10.9.9.9:1"), "a broker name without failover is not filtered")
	}

	// Cut one follower off.
	var cut *Controller
	for _, c := range cs {
		if c != leader {
			cut = c
			break
		}
	}
	w := watchVouch(cs, "b", master.Addr, s1.Addr)
	cutAt := time.Now()
	cut.layer.setBlocked(true)
	require.Eventually(t, func() bool { return !cut.Vouch("b", master.Addr) }, 5*time.Second, time.Millisecond)
	stopped := time.Since(cutAt)
	t.Logf("the cut-off controller stopped vouching %s after the cut (lease %s)", stopped, lease)
	assert.Less(t, stopped, lease+time.Second, "within the lease (plus scheduling slack)")
	for _, c := range cs {
		if c != cut {
			// Vouching needs a stable raft leader: on a loaded machine (-race,
			// 200 ms raft timeout) the majority may lose and re-elect one
			// first, as it may in the later phases (10 s there too).
			assert.Eventually(t, func() bool { return c.Vouch("b", master.Addr) }, 10*time.Second, time.Millisecond, "the majority keeps vouching")
		}
	}

	// The master stays silent; slave 1 is elected by the majority.
	require.Eventually(t, func() bool { g = beatAll(cs, s1); return g.Epoch == 2 }, 10*time.Second, 20*time.Millisecond)
	t.Logf("elected %s after the master's last heartbeat (failover timeout %s, revocation lease %s)", time.Since(lastMasterBeat), ft, lease)
	assert.GreaterOrEqual(t, time.Since(lastMasterBeat), ft+lease-50*time.Millisecond, "the election waits a lease after the revocation")
	s1.Epoch, s1.Ready = 2, true
	require.Eventually(t, func() bool { g = beatAll(cs, s1); return g.Ready() }, 5*time.Second, 20*time.Millisecond)
	s1.Master, s1.Ready = true, false
	for _, c := range cs {
		if c != cut {
			require.Eventually(t, func() bool { beatAll(cs, s1); return c.Vouch("b", s1.Addr) }, 5*time.Second, 5*time.Millisecond)
		}
	}
	assert.Equal(t, int64(1), cut.fsm.Group("b").Epoch, "the cut-off controller did not learn the new epoch")
	assert.False(t, cut.Vouch("b", master.Addr))
	assert.False(t, cut.Vouch("b", s1.Addr))

	// Heal: the controller vouches for the new master once it applied it.
	healAt := time.Now()
	cut.layer.setBlocked(false)
	require.Eventually(t, func() bool { return cut.Vouch("b", s1.Addr) }, 10*time.Second, time.Millisecond)
	t.Logf("after the heal the controller vouched for the new master in %s", time.Since(healAt))
	assert.Equal(t, int64(2), cut.fsm.Group("b").Epoch)

	// The raft leader itself is cut off.
	leader = leaderOf(t, cs)
	cutAt = time.Now()
	leader.layer.setBlocked(true)
	require.Eventually(t, func() bool { return !leader.Vouch("b", s1.Addr) }, 5*time.Second, time.Millisecond)
	t.Logf("the cut-off leader stopped vouching %s after the cut", time.Since(cutAt))
	var others []*Controller
	for _, c := range cs {
		if c != leader {
			others = append(others, c)
		}
	}
	require.Eventually(t, func() bool {
		beatAll(others, s1)
		return others[0].Vouch("b", s1.Addr) && others[1].Vouch("b", s1.Addr) && (others[0].IsLeader() || others[1].IsLeader())
	}, 10*time.Second, 10*time.Millisecond, "the majority confirms under a new leader")
	leader.layer.setBlocked(false)

	w.close()
	t.Logf("%d polls of a deposed master, %d vouched", w.polls.Load(), w.stale.Load())
	assert.Positive(t, w.polls.Load())
	assert.Zero(t, w.stale.Load(), "no controller vouched for a deposed master")
}

// TestReadIndexNamesRevocationOrElection: an election committed while
// the leader answers a read index (after it read the commit index) must
// show in the answer either as the revocation it ended or in the commit
// index; answered with neither, a follower vouched for the deposed
// master until it applied the election (seen as stale vouches in
// TestMinorityControllerWithholdsMaster).
func TestReadIndexNamesRevocationOrElection(t *testing.T) {
	c := startControllers(t, 1)[0]
	leaderOf(t, []*Controller{c})
	// Only the read index below talks to raft: no checks, no confirmations.
	c.cancel()
	c.wg.Wait()
	g, err := c.apply(Command{Op: opElect, Name: "b", Epoch: 0, MasterID: 0, MasterAddr: "10.0.0.1:1", Start: 100, Ready: true})
	require.NoError(t, err)
	require.False(t, c.revoked(g, c.now()), "the revocation starts")

	var elected uint64
	c.afterCommitRead = func() {
		c.afterCommitRead = nil
		// What check does a lease later: commit the election, end the revocation.
		data, err := json.Marshal(Command{Op: opElect, Name: "b", Epoch: 1, MasterID: 1, MasterAddr: "10.0.0.2:1"})
		if !assert.NoError(t, err) {
			return
		}
		f := c.raft.Apply(data, applyTimeout)
		if assert.NoError(t, f.Error()) && assert.IsType(t, &Group{}, f.Response()) {
			elected = f.Index()
		}
		c.unrevoke("b")
	}
	res := askReadIndex(t, c)
	require.NotZero(t, elected, "the election was committed during the read index")
	t.Logf("answer: commit %d, revoking %v; election at %d", res.Commit, res.Revoking, elected)
	assert.True(t, slices.Contains(res.Revoking, "b") || res.Commit >= elected,
		"the answer names the revocation or covers the election")
}

// TestConfirmWaitsForTheFSM: a confirmation is given only once the FSM
// holds every entry up to the read index, not once raft handed them to
// the FSM's goroutine (raft's AppliedIndex): given before, Vouch read the
// deposed master's group under a fresh confirmation until the FSM applied
// the election (a stale vouch in TestMinorityControllerWithholdsMaster).
func TestConfirmWaitsForTheFSM(t *testing.T) {
	c := startControllers(t, 1)[0]
	leaderOf(t, []*Controller{c})
	require.Eventually(t, c.Confirmed, 5*time.Second, 5*time.Millisecond, "the term's barrier is committed")
	c.cancel()
	c.wg.Wait()
	_, err := c.apply(Command{Op: opElect, Name: "b", Epoch: 0, MasterID: 0, MasterAddr: "10.0.0.1:1", Start: 100, Ready: true})
	require.NoError(t, err)
	_, err = c.confirmAsLeader(context.Background())
	require.NoError(t, err)

	// The FSM stalls before applying the election raft hands it.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before Stop, registered after it
	c.fsm.beforeApply = func(*raft.Log) { <-release }
	before := c.raft.AppliedIndex()
	data, err := json.Marshal(Command{Op: opElect, Name: "b", Epoch: 1, MasterID: 1, MasterAddr: "10.0.0.2:1", Start: 100, Ready: true})
	require.NoError(t, err)
	f := c.raft.Apply(data, applyTimeout)
	require.Eventually(t, func() bool { return c.raft.AppliedIndex() > before }, 5*time.Second, time.Millisecond, "raft handed the election to the FSM")

	_, err = c.confirmAsLeader(context.Background())
	assert.Error(t, err, "no confirmation while the FSM has not applied the election")
	assert.Equal(t, "10.0.0.1:1", c.fsm.Group("b").MasterAddr, "the FSM still holds the deposed master")

	unblock()
	require.NoError(t, f.Error())
	_, err = c.confirmAsLeader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:1", c.fsm.Group("b").MasterAddr)
}

// TestReadIndexAfterLeaderTermCommit: a leader answers a read index only
// once an entry of its term is committed (a barrier): until then its
// commit index may miss entries of earlier terms that are committed,
// e.g. an election its predecessor appended and lost the majority for.
func TestReadIndexAfterLeaderTermCommit(t *testing.T) {
	c := startControllers(t, 1)[0]
	leaderOf(t, []*Controller{c})
	c.cancel()
	c.wg.Wait()
	c.barrierTerm.Store(0) // as just elected: no entry of this term committed yet
	last := c.raft.LastIndex()
	res := askReadIndex(t, c)
	assert.Greater(t, res.Commit, last, "an entry appended after the question was committed first")
	assert.Equal(t, c.raft.CurrentTerm(), c.barrierTerm.Load())
	last = c.raft.LastIndex()
	res = askReadIndex(t, c)
	assert.Equal(t, last, res.Commit, "one barrier per term")
}

// askReadIndex asks c one read-index question, as a follower does.
func askReadIndex(t *testing.T, c *Controller) readIndexAnswer {
	t.Helper()
	cli, srv := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serveReadIndex(srv)
	}()
	defer func() { cli.Close(); <-done }()
	require.NoError(t, cli.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := cli.Write([]byte("{}\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(cli).ReadBytes('\n')
	require.NoError(t, err)
	var res readIndexAnswer
	require.NoError(t, json.Unmarshal(line, &res))
	require.True(t, res.OK, res.Err)
	return res
}

// TestRevocationLeaseFromVisibility: the lease before an election counts
// from when the revocation is visible to read indexes, not from the time
// check read when it started: a follower confirmed in between (its
// revoking list empty) vouches until a lease after it asked.
func TestRevocationLeaseFromVisibility(t *testing.T) {
	c, err := New(NewConfig(), nil, nil)
	require.NoError(t, err)
	g := &Group{Name: "b", Epoch: 1, MasterAddr: "10.0.0.1:1"}
	checkStart := c.now().Add(-c.vouchLease()) // check read the time a lease ago
	require.False(t, c.revoked(g, checkStart), "the revocation starts")
	assert.False(t, c.revoked(g, c.now()), "no election right after the revocation became visible")
}
