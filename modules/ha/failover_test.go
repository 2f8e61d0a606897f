package ha

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/controller"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

func TestBestView(t *testing.T) {
	g := func(epoch, start int64) *controller.Group {
		gr := &controller.Group{Name: "b", Epoch: epoch, Epochs: []controller.EpochStart{{Epoch: epoch, Start: start}}}
		return gr
	}
	tests := []struct {
		name       string
		give       []*controller.View
		wantEpoch  int64
		wantReady  bool
		wantLeader bool
	}{
		{name: "none", give: []*controller.View{nil, nil}},
		{name: "no group", give: []*controller.View{{Leader: true}}, wantLeader: true},
		{name: "highest epoch", give: []*controller.View{{Group: g(2, -1)}, {Leader: true, Group: g(1, 0)}, nil}, wantEpoch: 2, wantLeader: true},
		{name: "started wins a tie", give: []*controller.View{{Group: g(3, -1)}, {Group: g(3, 10)}}, wantEpoch: 3, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, leader := best(tt.give)
			assert.Equal(t, tt.wantLeader, leader)
			if tt.wantEpoch == 0 {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tt.wantEpoch, got.Epoch)
			assert.Equal(t, tt.wantReady, got.Ready())
		})
	}
}

// TestFailoverRoles drives a failover broker's state machine (act) with
// controller views, without name servers: founding, the lease fence,
// demotion with a cut, and the cut applied before the store opens again.
func TestFailoverRoles(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, "127.0.0.1:0", func(c *broker.Config, h *Config) {
		c.Role = broker.RoleAsyncMaster
		h.Failover = true
		// Long enough that the loop's own heartbeats (to no name server)
		// do not interfere; the lease is set by hand below.
		h.FailoverTimeout, h.HeartbeatInterval = 5*time.Minute, time.Minute
	})
	f := n.ha.fo
	require.NotNil(t, f)
	adv := n.b.Config().AdvertiseAddr()
	name := n.b.Config().Name
	c := newClient(t)

	r := n.b.Role()
	assert.True(t, r.Hidden, "a founder waits for the controllers unregistered")
	assert.False(t, r.Writable)
	assert.Equal(t, remoting.ServiceNotAvailable, send(t, c, n.addr, "T", 0, "refused").Code)

	// Founded: epoch 1, this broker master from offset 0.
	founded := &controller.Group{Name: name, Epoch: 1, MasterID: 0, MasterAddr: adv, Epochs: []controller.EpochStart{{Epoch: 1, Start: 0}}}
	f.act([]*controller.View{{Leader: true, Group: founded}}, time.Now())
	r = n.b.Role()
	assert.Equal(t, broker.RoleState{Role: broker.RoleAsyncMaster, ID: 0, Epoch: 1, Writable: true}, r)
	e, err := loadEpoch(Dir(dir))
	require.NoError(t, err)
	assert.Equal(t, int64(1), e, "the epoch served is persisted")
	for i := range 3 {
		require.Equal(t, remoting.Success, send(t, c, n.addr, "T", 0, fmt.Sprint("m", i)).Code)
	}
	_, end := n.st.LogOffsets()
	require.Positive(t, end)

	// The lease runs out (no leader answered a heartbeat sent within it):
	// fenced, whatever the heartbeat loop is doing.
	f.mu.Lock()
	f.lastLeader = time.Now().Add(-time.Hour)
	f.armFenceLocked()
	f.mu.Unlock()
	require.Eventually(t, func() bool { return !n.b.Role().Writable }, 5*time.Second, 5*time.Millisecond, "fenced when the lease ends")
	assert.Equal(t, remoting.ServiceNotAvailable, send(t, c, n.addr, "T", 0, "fenced").Code)
	// An answer from a leader to an older heartbeat does not renew it.
	f.act([]*controller.View{{Leader: true, Group: founded}}, time.Now().Add(-time.Hour))
	assert.False(t, n.b.Role().Writable)
	// A leader naming it again: writable again.
	f.act([]*controller.View{{Leader: true, Group: founded}}, time.Now())
	assert.True(t, n.b.Role().Writable)

	// Another member was elected (epoch 2) and started at offset 0: this
	// broker holds records it lacks, so it records the cut and asks for a
	// restart, fenced and unregistered meanwhile.
	deposed := &controller.Group{Name: name, Epoch: 2, MasterID: 1, MasterAddr: "127.0.0.1:1",
		Epochs: []controller.EpochStart{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 0}}}
	f.act([]*controller.View{{Leader: true, Group: deposed}}, time.Now())
	r = n.b.Role()
	assert.Equal(t, broker.RoleState{Role: broker.RoleSlave, ID: defaultDemotedID, Epoch: 1, Hidden: true}, r)
	assert.Equal(t, int32(1), n.restarts.Load())
	var tr truncation
	ok, err := readJSON(Dir(dir), truncateFile, &tr)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, truncation{Offset: 0, Epoch: 2}, tr)

	// The restart: the store is cut before it opens, the epoch moves on.
	n.stop()
	deps := store.Deps{Settings: store.Settings{Dir: dir, Flush: store.FlushAsync, FlushInterval: 100 * time.Millisecond, MaxMessageSize: 4 << 20}}
	ccfg := commitlog.NewConfig()
	ccfg.SegmentSize = 64 << 10
	require.NoError(t, ApplyTruncation(context.Background(), commitlog.NewProvider(), ccfg, deps, nil))
	ok, err = readJSON(Dir(dir), truncateFile, &tr)
	require.NoError(t, err)
	assert.False(t, ok, "the truncation is forgotten once applied")
	e, err = loadEpoch(Dir(dir))
	require.NoError(t, err)
	assert.Equal(t, int64(2), e)
	n.start()
	_, end = n.st.LogOffsets()
	assert.Equal(t, int64(0), end, "the records the new master lacks are gone")

	// Following the new master now (epoch 2 persisted: no further cut).
	n.ha.fo.act([]*controller.View{{Leader: true, Group: deposed}}, time.Now())
	r = n.b.Role()
	assert.Equal(t, broker.RoleState{Role: broker.RoleSlave, ID: defaultDemotedID, Epoch: 2}, r)
	assert.Equal(t, "127.0.0.1:1", n.ha.fo.master())
	assert.Equal(t, int32(1), n.restarts.Load(), "no second restart")
}

// TestSlaveSwitchesMasterAtOnce: a failover slave whose pull hangs on an
// unresponsive master (a loopback listener that never answers) drops it
// as soon as the controllers' view names a new master, and the new
// SYNC_MASTER acknowledges a send at once, not after the hung pull's
// timeout (ha.max_wait + 5 s).
func TestSlaveSwitchesMasterAtOnce(t *testing.T) {
	// The old master: accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	quiet := func(c *broker.Config, h *Config) {
		h.Failover = true
		h.FailoverTimeout, h.HeartbeatInterval = 5*time.Minute, time.Minute
		h.MaxWait = time.Second
		h.MetaInterval = time.Hour // no metadata copy on the same connection
	}
	mAddr := freeAddr(t)
	m := startNode(t, t.TempDir(), mAddr, func(c *broker.Config, h *Config) {
		quiet(c, h)
		c.ID, c.Role, c.Advertise = 1, broker.RoleSlave, mAddr
	})
	sAddr := freeAddr(t)
	s := startNode(t, t.TempDir(), sAddr, func(c *broker.Config, h *Config) {
		quiet(c, h)
		c.ID, c.Role, c.Advertise = 2, broker.RoleSlave, sAddr
	})
	name := m.b.Config().Name
	old := ln.Addr().String()

	// Epoch 1: the slave follows the unresponsive master.
	g1 := &controller.Group{Name: name, Epoch: 1, MasterID: 0, MasterAddr: old, Sync: true, Epochs: []controller.EpochStart{{Epoch: 1, Start: 0}}}
	s.ha.fo.act([]*controller.View{{Leader: true, Group: g1}}, time.Now())
	m.ha.fo.act([]*controller.View{{Leader: true, Group: g1}}, time.Now())
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the slave did not connect to its master")
	}

	// Epoch 2: member 1 elected, started; the slave is told.
	g2 := &controller.Group{Name: name, Epoch: 2, MasterID: 1, MasterAddr: mAddr, Sync: true, InSync: []int64{2},
		Epochs: []controller.EpochStart{{Epoch: 1, Start: 0}, {Epoch: 2, Start: -1}}}
	m.ha.fo.act([]*controller.View{{Leader: true, Group: g2}}, time.Now())
	g2.Epochs[1].Start = 0
	m.ha.fo.act([]*controller.View{{Leader: true, Group: g2}}, time.Now())
	require.True(t, m.b.Role().Writable, "the new master serves")
	promoted := time.Now()
	s.ha.fo.act([]*controller.View{{Leader: true, Group: g2}}, time.Now())

	c := newClient(t)
	var first time.Duration
	var notAvail int
	require.Eventually(t, func() bool {
		resp := send(t, c, m.addr, "T", 0, fmt.Sprintf("m-%d", notAvail))
		if resp.Code == remoting.Success {
			first = time.Since(promoted)
			return true
		}
		notAvail++
		return false
	}, 10*time.Second, 5*time.Millisecond)
	t.Logf("first acknowledged SYNC_MASTER send %s after the promotion (%d answered not available before)", first, notAvail)
	// Without the cancellation the hung pull ends only with its transport
	// or its timeout (ha.max_wait + 5 s): 1.2 s here at least.
	assert.Less(t, first, time.Second, "the slave followed the new master at once")
	assert.Equal(t, mAddr, s.ha.fo.master())
}
