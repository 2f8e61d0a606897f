package ha

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// TestSlaveCopiesChangedDocsAtOnce: with ha.meta_interval far away and
// ha.max_wait at its 10 s maximum (an idle HA_PULL is held that long), a
// change of a versioned document or of the topic table on the master
// reaches the slave at once: the master wakes the held pull, its answer
// reports the new versions, and the slave copies only the documents
// whose version changed — not the unversioned ones, and nothing while
// the versions stay the same.
func TestSlaveCopiesChangedDocsAtOnce(t *testing.T) {
	slow := func(_ *broker.Config, h *Config) { h.MetaInterval, h.MaxWait = time.Hour, 10*time.Second }
	m := startNode(t, t.TempDir(), "127.0.0.1:0", func(c *broker.Config, h *Config) {
		c.Role = broker.RoleAsyncMaster
		slow(c, h)
	})
	c := newClient(t)
	// A record to copy: the slave's first pull is then answered at once.
	require.Equal(t, remoting.Success, send(t, c, m.addr, "Traffic", 0, "first").Code)
	addr := freeAddr(t)
	s := startNode(t, t.TempDir(), addr, func(c *broker.Config, h *Config) {
		c.ID, c.Role, c.Advertise = 1, broker.RoleSlave, addr
		h.MasterAddr = m.addr
		slow(c, h)
	})
	require.Eventually(t, func() bool { return s.ha.following.Load() }, 10*time.Second, 10*time.Millisecond)

	const versioned, plain, barrier = int32(1190), int32(1191), int32(1192)
	var version, barrierVersion, servedVersioned, servedPlain atomic.Int64
	answer := func(v *atomic.Int64, served *atomic.Int64) func(context.Context, *remoting.Peer, *remoting.Command) *remoting.Command {
		return func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
			served.Add(1)
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.Body = []byte(strconv.FormatInt(v.Load(), 10))
			return resp
		}
	}
	var none atomic.Int64
	m.b.Router().Register(versioned, answer(&version, &servedVersioned))
	m.b.Router().Register(plain, answer(&none, &servedPlain))
	m.b.Router().Register(barrier, answer(&barrierVersion, &none))
	m.b.AddReplicaMeta(broker.ReplicaMeta{Name: "versioned", Code: versioned, Version: version.Load})
	m.b.AddReplicaMeta(broker.ReplicaMeta{Name: "plain", Code: plain})
	m.b.AddReplicaMeta(broker.ReplicaMeta{Name: "barrier", Code: barrier, Version: barrierVersion.Load})
	var applied, barrierApplied atomic.Pointer[string]
	keep := func(p *atomic.Pointer[string]) func([]byte) error {
		return func(body []byte) error { v := string(body); p.Store(&v); return nil }
	}
	s.b.AddReplicaMeta(broker.ReplicaMeta{Name: "versioned", Code: versioned, Version: version.Load, Apply: keep(&applied)})
	s.b.AddReplicaMeta(broker.ReplicaMeta{Name: "plain", Code: plain, Apply: func([]byte) error { return nil }})
	s.b.AddReplicaMeta(broker.ReplicaMeta{Name: "barrier", Code: barrier, Version: barrierVersion.Load, Apply: keep(&barrierApplied)})
	is := func(p *atomic.Pointer[string], want string) func() bool {
		return func() bool { v := p.Load(); return v != nil && *v == want }
	}

	version.Store(1)
	m.b.ReplicaMetaChanged()
	require.Eventually(t, is(&applied, "1"), 3*time.Second, 5*time.Millisecond, "the change reaches the slave within the held pull")

	// A topic made by the admin code (no commit-log write) wakes the
	// held pull too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, m.addr, remoting.NewRequest(remoting.UpdateAndCreateTopic,
		map[string]string{"topic": "AdminMade", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool { _, ok := s.b.TopicConfig("AdminMade"); return ok }, 3*time.Second, 5*time.Millisecond)

	// The barrier's copy is applied once every copy started before it
	// is done (one goroutine copies, the startup's full copy first).
	barrierVersion.Store(1)
	m.b.ReplicaMetaChanged()
	require.Eventually(t, is(&barrierApplied, "1"), 3*time.Second, 5*time.Millisecond)
	plainBefore, versionedBefore := servedPlain.Load(), servedVersioned.Load()

	// Nothing changes: nothing is copied (several pull answers later).
	for i := range 3 {
		require.Equal(t, remoting.Success, send(t, c, m.addr, "Traffic", 0, strconv.Itoa(i)).Code)
		waitCaughtUp(t, m, s)
	}
	assert.Equal(t, versionedBefore, servedVersioned.Load(), "an unchanged version is not copied again")

	version.Store(2)
	m.b.ReplicaMetaChanged()
	require.Eventually(t, is(&applied, "2"), 3*time.Second, 5*time.Millisecond)
	assert.Equal(t, versionedBefore+1, servedVersioned.Load(), "one copy per change")
	assert.Equal(t, plainBefore, servedPlain.Load(), "an unversioned document waits for ha.meta_interval")
}

// TestParseVersions reads the metaVersions extField, skipping malformed
// parts.
func TestParseVersions(t *testing.T) {
	got := parseVersions("21=1700000000000.4,3005=7,x=1,3008,3010=")
	assert.Equal(t, map[int32]string{21: "1700000000000.4", 3005: "7", 3010: ""}, got)
	assert.Empty(t, parseVersions(""))
}
