package acl2_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// TestSlaveCopiesUsersAndPolicies: the documents a slave copies
// (auth.Replicated, registered by the broker for modules/ha) are the
// master's AUTH_LIST_USER and AUTH_LIST_ACL answers to a request without
// header or body; applied on the slave, it decides as the master does,
// and follows a revocation and a deletion; the copy is durable.
func TestSlaveCopiesUsersAndPolicies(t *testing.T) {
	master := startServer(t, nil, nil)
	mustOK(t, master.root(t, remoting.AuthCreateUser, map[string]string{"username": "app"}, map[string]string{"password": "app-secret-1"}))
	mustOK(t, master.root(t, remoting.AuthCreateACL, map[string]string{"subject": "User:app"}, map[string]any{"policies": []any{map[string]any{
		"policyType": "Custom", "entries": []any{map[string]any{"resource": "Topic:orders*", "actions": []string{"Pub"}, "decision": "Allow"}}}}}))

	cfg := acl2.NewConfig()
	cfg.File = filepath.Join(t.TempDir(), "slave.json")
	slave, err := acl2.New(cfg, auth.Deps{})
	require.NoError(t, err)
	docs := slave.ReplicaDocs()
	require.Len(t, docs, 2)
	copyAll := func() {
		for _, d := range docs {
			resp := master.root(t, d.Code, nil, nil)
			mustOK(t, resp)
			require.NoError(t, d.Apply(resp.Body), d.Name)
		}
	}
	send := func(p *acl2.Plugin, topic string) error {
		ext := map[string]string{"producerGroup": "PG", "topic": topic}
		acl.Sign(ext, nil, "app", "app-secret-1", "")
		_, err := p.Check(context.Background(), auth.Request{Code: remoting.SendMessage, RemoteAddr: "10.0.0.1:1", ExtFields: ext})
		return err
	}
	assert.Error(t, send(slave, "orders-eu"), "nothing copied yet")
	copyAll()
	assert.NoError(t, send(slave, "orders-eu"))
	assert.Error(t, send(slave, "payments"))

	mustOK(t, master.root(t, remoting.AuthDeleteACL, map[string]string{"subject": "User:app", "resource": "Topic:orders*"}, nil))
	copyAll()
	assert.Error(t, send(slave, "orders-eu"), "the revocation reached the slave")

	reopened, err := acl2.OpenStore(cfg.File)
	require.NoError(t, err)
	_, ok := reopened.GetUser("app")
	assert.True(t, ok, "the copy is durable")

	mustOK(t, master.root(t, remoting.AuthDeleteUser, map[string]string{"username": "app"}, nil))
	copyAll()
	_, ok = slave.Store().GetUser("app")
	assert.False(t, ok)
	v := slave.Store().Version()
	copyAll()
	assert.Equal(t, v, slave.Store().Version(), "an unchanged master writes nothing")
}
