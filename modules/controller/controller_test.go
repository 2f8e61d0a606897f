package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/namesrv"
)

// tlog writes log lines to the test's log until stop: raft's connection
// goroutines (NetworkTransport.handleConn) are not waited for by its
// Close and may log a closed connection after the test ended, where
// t.Log panics.
type tlog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}

func (w *tlog) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// startControllers starts n controllers on loopback in one raft cluster.
func startControllers(t *testing.T, n int) []*Controller {
	t.Helper()
	return startControllersWith(t, n, nil)
}

// startControllersWith is startControllers with set (nil: none) changing
// controller i's configuration before it starts.
func startControllersWith(t *testing.T, n int, set func(i int, cfg *Config)) []*Controller {
	t.Helper()
	var peers []string
	for range n {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)))
	}
	tl := &tlog{t: t}
	t.Cleanup(tl.stop) // registered first: runs after every Stop
	log := slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var cs []*Controller
	for i := range n {
		cfg := NewConfig()
		cfg.Enabled, cfg.Listen, cfg.Peers, cfg.DataDir = true, peers[i], peers, t.TempDir()
		cfg.RaftTimeout, cfg.CheckInterval = 200*time.Millisecond, 50*time.Millisecond
		if set != nil {
			set(i, cfg)
		}
		c, err := New(cfg, log.With("node", i), nil)
		require.NoError(t, err)
		require.NoError(t, c.Start(context.Background()))
		t.Cleanup(func() { c.Stop(context.Background()) })
		cs = append(cs, c)
	}
	return cs
}

func leaderOf(t *testing.T, cs []*Controller) *Controller {
	t.Helper()
	var l *Controller
	require.Eventually(t, func() bool {
		for _, c := range cs {
			if c.raft != nil && c.IsLeader() {
				l = c
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "a leader is elected")
	return l
}

// beatAll sends hb to every running controller (as a broker does) and
// returns the view with the highest epoch.
func beatAll(cs []*Controller, hb HeartbeatBody) *Group {
	var best *Group
	for _, c := range cs {
		if c.raft == nil {
			continue
		}
		if v := c.HandleHeartbeat(hb); v.Group != nil && (best == nil || v.Group.Epoch > best.Epoch) {
			best = v.Group
		}
	}
	return best
}

// TestControllerFailover: a group is founded, its master stops beating,
// the in-sync slave is elected at the next epoch and records its start;
// after the raft leader is stopped the new leader elects again; every
// controller applies the same state, and a master registration with a
// stale epoch is refused.
func TestControllerFailover(t *testing.T) {
	cs := startControllers(t, 3)
	leaderOf(t, cs)
	ft := 600 * time.Millisecond
	master := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 0, Addr: "10.0.0.1:1", Founder: true, Offset: 100, Sync: true, FailoverTimeout: ft}
	s1 := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 1, Addr: "10.0.0.2:1", Offset: 100}
	s2 := HeartbeatBody{Cluster: "c", Name: "b", MemberID: 2, Addr: "10.0.0.3:1", Offset: 90}

	var g *Group
	require.Eventually(t, func() bool { g = beatAll(cs, master); return g != nil }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(1), g.Epoch)
	assert.True(t, g.Ready())
	master.Epoch, master.Master, s1.Epoch, s2.Epoch = 1, true, 1, 1
	master.InSync = []int64{1, 2}
	require.Eventually(t, func() bool {
		beatAll(cs, s1)
		beatAll(cs, s2)
		g = beatAll(cs, master)
		return len(g.InSync) == 2
	}, 5*time.Second, 20*time.Millisecond, "the master's in-sync set is committed")

	// The master goes silent: slave 1 (highest offset) is elected.
	start := time.Now()
	require.Eventually(t, func() bool {
		beatAll(cs, s2)
		g = beatAll(cs, s1)
		return g.Epoch == 2
	}, 5*time.Second, 20*time.Millisecond)
	took := time.Since(start)
	assert.Equal(t, int64(1), g.MasterID)
	assert.False(t, g.Ready())
	assert.GreaterOrEqual(t, took, ft-100*time.Millisecond, "not before the failover timeout")
	t.Logf("elected after %s (failover timeout %s)", took, ft)

	// The old master's registration is refused everywhere, the new one's
	// only once it started.
	reg := namesrv.BrokerRegistration{BrokerName: "b", BrokerID: 0, BrokerAddr: master.Addr}
	for _, c := range cs {
		require.Eventually(t, func() bool { return c.fsm.Group("b").Epoch == 2 }, 5*time.Second, 10*time.Millisecond)
		assert.Error(t, c.CheckRegistration(reg, 1, true))
		assert.Error(t, c.CheckRegistration(reg, 0, false))
		assert.Error(t, c.CheckRegistration(namesrv.BrokerRegistration{BrokerName: "b", BrokerAddr: s1.Addr}, 2, true), "not started")
	}
	s1.Epoch, s1.Ready = 2, true
	require.Eventually(t, func() bool { g = beatAll(cs, s1); return g.Ready() }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(100), g.Start(2))
	s1.Master, s1.Ready, s1.InSync = true, false, []int64{2}
	s2.Epoch = 2
	for _, c := range cs {
		require.Eventually(t, func() bool { return c.fsm.Group("b").Ready() }, 5*time.Second, 10*time.Millisecond)
		assert.NoError(t, c.CheckRegistration(namesrv.BrokerRegistration{BrokerName: "b", BrokerAddr: s1.Addr}, 2, true))
	}
	require.Eventually(t, func() bool {
		beatAll(cs, s2)
		g = beatAll(cs, s1)
		return fmt.Sprint(g.InSync) == "[2]"
	}, 5*time.Second, 20*time.Millisecond)

	// The leader stops; the others elect a leader, which fails over again.
	old := leaderOf(t, cs)
	require.NoError(t, old.Stop(context.Background()))
	old.raft = nil
	leaderOf(t, cs)
	require.Eventually(t, func() bool {
		g = beatAll(cs, s2)
		return g != nil && g.Epoch == 3
	}, 10*time.Second, 20*time.Millisecond, "the new leader elects slave 2 once slave 1 lapsed")
	assert.Equal(t, int64(2), g.MasterID)
	for _, c := range cs {
		if c.raft != nil {
			require.Eventually(t, func() bool { return c.fsm.Group("b").Epoch == 3 }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, int64(2), c.fsm.Group("b").MasterID)
		}
	}
}

// TestCheckRegistrationWaitsForApply: a master registration this
// controller has not caught up with waits (up to registerWait) for the
// entry that makes it valid; a plain refusal answers at once.
func TestCheckRegistrationWaitsForApply(t *testing.T) {
	c, err := New(NewConfig(), nil, nil)
	require.NoError(t, err)
	_, err = c.fsm.apply(Command{Op: opElect, Name: "b", Epoch: 0, MasterID: 0, MasterAddr: "127.0.0.1:1", Start: 0, Ready: true})
	require.NoError(t, err)
	_, err = c.fsm.apply(Command{Op: opElect, Name: "b", Epoch: 1, MasterID: 1, MasterAddr: "127.0.0.1:2"})
	require.NoError(t, err)
	reg := func(addr string) namesrv.BrokerRegistration {
		return namesrv.BrokerRegistration{BrokerName: "b", BrokerAddr: addr, BrokerID: 0}
	}

	start := time.Now()
	assert.ErrorContains(t, c.CheckRegistration(reg("127.0.0.1:1"), 1, true), "not the master")
	assert.Less(t, time.Since(start), registerWait/2, "a deposed master is refused at once")

	done := make(chan error, 1)
	go func() { done <- c.CheckRegistration(reg("127.0.0.1:2"), 2, true) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("answered before the start was applied: %v", err)
	default:
	}
	_, err = c.fsm.apply(Command{Op: opStart, Name: "b", Epoch: 2, Start: 100})
	require.NoError(t, err)
	select {
	case err := <-done:
		assert.NoError(t, err, "accepted once the start is applied")
	case <-time.After(registerWait):
		t.Fatal("still waiting after the start was applied")
	}

	start = time.Now()
	assert.ErrorContains(t, c.CheckRegistration(reg("127.0.0.1:3"), 3, true), "not applied here yet")
	assert.GreaterOrEqual(t, time.Since(start), registerWait, "an epoch never applied is refused after the wait")
}
