package acl2_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
	"github.com/quivermq/quiver/plugins/auth/acl/acl49test"
)

// whiteListCase reports the cases decided by 4.9's white lists, which
// ACL 2.0 does not have (every request is authenticated).
func whiteListCase(c acl49test.Case) bool {
	return c.Remote != "" && !strings.HasPrefix(c.Remote, "172.16.")
}

// TestMigratedV1DecidesAs49: RocketMQ 4.9.8's sample plain_acl.yml,
// migrated into users and policies at start (auth.acl2.migrate_from_v1),
// gives 4.9.8's decision — and ACL 1.0's — on every case of the 4.9
// table but those its white lists decide.
func TestMigratedV1DecidesAs49(t *testing.T) {
	dir := t.TempDir()
	v1 := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(v1, []byte(acl49test.Sample), 0o600))
	cfg := acl2.NewConfig()
	cfg.File = filepath.Join(dir, "acl2.json")
	cfg.MigrateFromV1 = v1
	p, err := acl2.New(cfg, auth.Deps{})
	require.NoError(t, err)

	v1cfg := acl.NewConfig()
	v1cfg.File, v1cfg.ReloadInterval = v1, 0
	a, err := acl.New(v1cfg, auth.Deps{})
	require.NoError(t, err)
	defer a.Close()

	n := 0
	for _, c := range acl49test.Cases {
		if whiteListCase(c) {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			_, err2 := p.Check(context.Background(), acl49test.Request(c))
			_, err1 := a.Check(context.Background(), acl49test.Request(c))
			assert.Equal(t, c.Allow, err1 == nil, "ACL 1.0: %v", err1)
			if c.Allow {
				assert.NoError(t, err2, "4.9 allows: %s", c.Why)
			} else {
				assert.Error(t, err2, "4.9 refuses: %s", c.Why)
			}
		})
	}
	assert.GreaterOrEqual(t, n, 40)

	// Migrating again (a restart with the switch still on) changes
	// nothing; the report says what was left alone.
	st := p.Store()
	v := st.Version()
	rep, err := acl2.MigrateV1(st, []byte(acl49test.Sample))
	require.NoError(t, err)
	assert.Equal(t, []string{"RocketMQ", "rocketmq2"}, rep.Skipped)
	assert.Empty(t, rep.Created)
	assert.Equal(t, v, st.Version())
	assert.Len(t, rep.Notes, 2, "the global white list and rocketmq2's are not migrated: %v", rep.Notes)
	u, _ := st.GetUser("rocketmq2")
	assert.Equal(t, acl2.Super, u.UserType, "an admin listing no permissions had them all")
}

// TestMigratedListedResourceKeepsV1Semantics: ACL 1.0 does not fall back
// to the default for a listed resource; Java's migrator would let a
// SUB-only topic be published to under defaultTopicPerm PUB.
func TestMigratedListedResourceKeepsV1Semantics(t *testing.T) {
	st, err := acl2.OpenStore(filepath.Join(t.TempDir(), "acl2.json"))
	require.NoError(t, err)
	_, err = acl2.MigrateV1(st, []byte(`accounts:
  - accessKey: appuser01
    secretKey: app-secret-1
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
    topicPerms: [readonly=SUB, closed=DENY]
    groupPerms: [g1=PUB]
  - accessKey: opsuser01
    secretKey: ops-secret-1
    admin: true
    topicPerms: [t=SUB]
`))
	require.NoError(t, err)
	got, ok, err := st.GetACL("User:appuser01")
	require.NoError(t, err)
	require.True(t, ok)
	keys := []string{}
	for _, p := range got.Policies {
		for _, e := range p.Entries {
			keys = append(keys, p.PolicyType+" "+e.Resource+" "+strings.Join(e.Actions, "|")+" "+e.Decision)
		}
	}
	assert.ElementsMatch(t, []string{
		"Custom Topic:RMQ_SYS_TRACE_TOPIC Pub Allow",
		"Custom Topic:closed Pub|Sub Deny",
		"Custom Topic:readonly Sub Allow",
		"Custom Group:g1 Pub Allow",
		"Default Topic:readonly Pub Deny",
		"Default Group:g1 Sub Deny",
		"Default Topic:* Pub Allow",
		"Default Group:* Sub Allow",
	}, keys)
	u, _ := st.GetUser("opsuser01")
	assert.Equal(t, acl2.Normal, u.UserType, "an admin that lists permissions keeps them")
}
