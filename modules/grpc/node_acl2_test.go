package grpc_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// withACL2 enables ACL 2.0 on the endpoint with a publisher allowed Pub
// on Topic:Auth* and a subscriber allowed Sub on Topic:AuthT and
// Group:AuthG.
func withACL2(t testing.TB) nodeOpt {
	t.Helper()
	cfg := acl2.NewConfig()
	cfg.File = filepath.Join(t.TempDir(), "acl2.json")
	cfg.Audit = acl2.AuditAll
	p, err := acl2.New(cfg, auth.Deps{})
	require.NoError(t, err)
	st := p.Store()
	require.NoError(t, st.CreateUser(acl2.User{Username: "pubuser", Password: skPub}))
	require.NoError(t, st.CreateUser(acl2.User{Username: "subuser", Password: skSub}))
	entry := func(res string, acts ...string) acl2.Entry {
		return acl2.Entry{Resource: res, Actions: acts, Decision: "Allow"}
	}
	require.NoError(t, st.PutACL(acl2.ACL{Subject: "User:pubuser", Policies: []acl2.Policy{{PolicyType: "Custom", Entries: []acl2.Entry{entry("Topic:Auth*", "Pub")}}}}))
	require.NoError(t, st.PutACL(acl2.ACL{Subject: "User:subuser", Policies: []acl2.Policy{{PolicyType: "Custom", Entries: []acl2.Entry{
		entry("Topic:AuthT", "Sub"), entry("Group:AuthG", "Sub")}}}}))
	return func(_ *grpcmod.Config, d *grpcmod.Deps) {
		d.Auth = append(d.Auth, grpcmod.AuthPlugin{Authenticator: p, Authorizer: p})
	}
}

// TestNodeClientACL2: the official Node.js 5.x client authenticated
// against ACL 2.0 users (sessionCredentials accessKey = username,
// accessSecret = password): the publisher sends, a wrong secret is
// refused, the subscriber receives and acks.
func TestNodeClientACL2(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true, withACL2(t))
	n.topic("AuthT", 1)
	var res struct {
		Sent, Bad string
		Received  []string
	}
	runInlineNodeScript(t, dir, nodeAuthScript, 2*time.Minute, &res, n.srv.Addr().String(), "AuthT", "pubuser", skPub, "subuser", skSub)
	require.NotEmpty(t, res.Sent)
	assert.NotEqual(t, "accepted", res.Bad, "a wrong secret is refused")
	assert.NotEqual(t, "timeout", res.Bad, "the refusal is an answer, not a hang")
	assert.Equal(t, []string{res.Sent}, res.Received)
}

// TestNodeClientACL2Forbidden: without the policies, each startup fails
// with the endpoint's FORBIDDEN reason naming ACL 2.0's refusal.
func TestNodeClientACL2Forbidden(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true, withACL2(t))
	n.topic("AuthT", 1)
	var res map[string]struct {
		Err string
		Ms  int
	}
	runInlineNodeScript(t, dir, nodeForbiddenScript, 2*time.Minute, &res, n.srv.Addr().String(), "AuthT", "pubuser", skPub, "subuser", skSub)
	for name, want := range map[string]string{"producer": "User:subuser has no permission to access Topic:AuthT", "consumer": "User:pubuser", "group": "Group:OtherG"} {
		got := res[name]
		t.Logf("%s: startup failed after %d ms: %s", name, got.Ms, got.Err)
		assert.Contains(t, got.Err, "ForbiddenException", name)
		assert.Contains(t, got.Err, want, name)
	}
}
