package acl

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

const rolesYAML = `
globalWhiteRemoteAddresses: [10.1.1.1]
accounts:
  - accessKey: member01
    secretKey: memberSecret01
    role: broker
  - accessKey: admin001
    secretKey: adminSecret01
    admin: true
  - accessKey: fenced01
    secretKey: fencedSecret01
    whiteRemoteAddress: 10.9.9.9
    admin: true
`

func signedBy(code int32, ext map[string]string, ak, sk, remote string) auth.Request {
	ext = maps.Clone(ext)
	if ext == nil {
		ext = map[string]string{}
	}
	Sign(ext, nil, ak, sk, "")
	return auth.Request{Code: code, RemoteAddr: remote, ExtFields: ext}
}

// Cluster rows take role: broker accounts only; admin rows admins; what a
// slave copies either. A white-listed account skips its signature and
// permission checks but not the role; a global white list passes all.
func TestRoles(t *testing.T) {
	a, _, _ := newACL(t, rolesYAML)
	const far = "172.16.0.9:1"
	tests := []struct {
		name    string
		give    auth.Request
		wantErr string
	}{
		{"member registers", signedBy(remoting.RegisterBroker, nil, "member01", "memberSecret01", far), ""},
		{"member pulls the log", signedBy(remoting.HAPull, nil, "member01", "memberSecret01", far), ""},
		{"member copies topics", signedBy(remoting.GetAllTopicConfig, nil, "member01", "memberSecret01", far), ""},
		{"member is no admin", signedBy(remoting.UpdateAndCreateTopic, nil, "member01", "memberSecret01", far), "admin required for request code 17"},
		{"member has no topics", signedBy(remoting.SendMessage, map[string]string{"topic": "T"}, "member01", "memberSecret01", far), "PUB on topic T"},
		{"admin may not register", signedBy(remoting.RegisterBroker, nil, "admin001", "adminSecret01", far), "is for cluster members (an account with role: broker), which accessKey admin001 is not"},
		{"admin may not pull the log", signedBy(remoting.HAPull, nil, "admin001", "adminSecret01", far), "QUIVER_HA_PULL"},
		{"admin copies topics", signedBy(remoting.GetAllTopicConfig, nil, "admin001", "adminSecret01", far), ""},
		{"white-listed admin may not register", signedBy(remoting.UnregisterBroker, nil, "fenced01", "wrong-secret", "10.9.9.9:1"), "cluster members"},
		{"white-listed admin administers", signedBy(remoting.DeleteTopicInBroker, nil, "fenced01", "wrong-secret", "10.9.9.9:1"), ""},
		{"global white list", auth.Request{Code: remoting.RegisterBroker, RemoteAddr: "10.1.1.1:5", ExtFields: map[string]string{}}, ""},
		{"refused code", signedBy(remoting.CheckTransactionState, nil, "admin001", "adminSecret01", far), "served by clients"},
		{"unknown code", signedBy(4242, nil, "admin001", "adminSecret01", far), "not in the permission table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Check(context.Background(), tt.give)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, auth.ErrDenied), "%v", err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestParseRole(t *testing.T) {
	for give, want := range map[string]bool{"": false, "broker": true, " broker ": true} { //nolint:gocritic // the padded key is the case under test
		got, err := parseRole(give)
		require.NoError(t, err, give)
		assert.Equal(t, want, got, give)
	}
	for _, bad := range []string{"Broker", "admin", "controller", "broker,admin"} {
		_, err := parseRole(bad)
		assert.Error(t, err, bad)
	}
	_, err := parseRules([]byte("accounts:\n  - accessKey: someone1\n    secretKey: someSecret1\n    role: master\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `accounts[0] (accessKey someone1).role: role "master" is not "broker"`)
}

func TestClusterCredential(t *testing.T) {
	tests := []struct {
		name, ak, sk, want string
	}{
		{"none", "", "", "auth.acl.access_key and auth.acl.secret_key are not set"},
		{"a member", "member01", "memberSecret01", ""},
		{"an admin", "admin001", "adminSecret01", "auth.acl.access_key admin001 is an account without role: broker"},
		{"a wrong secret", "member01", "notTheSecret1", "auth.acl.secret_key is not the secretKey of member01"},
		{"an account known elsewhere", "elsewhere1", "elsewhereSecret1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _, _ := newACL(t, rolesYAML)
			a.ak, a.sk = tt.ak, tt.sk
			err := a.ClusterCredential()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "Secret0", "no secret in the message")
		})
	}
}
