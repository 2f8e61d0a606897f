package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/filter/tag"
)

// recordingAdmin is an auth.AccountAdmin that records what the handlers
// decode from the wire (the ACL plugin's own behaviour is tested in
// plugins/auth/acl and, end to end, in interop TestACLAdminCodes).
type recordingAdmin struct {
	auth.AllowAll
	deny    bool
	updates []auth.AccountUpdate
	deleted []string
	white   [][]string
}

func (r *recordingAdmin) AuthorizeAdmin(context.Context, auth.Request) error {
	if r.deny {
		return errors.New("acl: no permission: admin required")
	}
	return nil
}

func (r *recordingAdmin) UpdateAccount(_ context.Context, u auth.AccountUpdate) error {
	r.updates = append(r.updates, u)
	return nil
}

func (r *recordingAdmin) DeleteAccount(_ context.Context, ak string) error {
	r.deleted = append(r.deleted, ak)
	if ak == "missing01" {
		return auth.ErrNotFound
	}
	return nil
}

func (r *recordingAdmin) SetGlobalWhiteAddrs(_ context.Context, addrs []string) error {
	r.white = append(r.white, addrs)
	return nil
}

func (r *recordingAdmin) Snapshot(context.Context) (auth.Accounts, error) {
	return auth.Accounts{File: "/etc/quiver/plain_acl.yml", GlobalWhiteAddrs: []string{"10.1.*.*"},
		Accounts: []auth.Account{{AccessKey: "appKey01", SecretKey: "appSecret01", DefaultTopicPerm: "PUB", TopicPerms: []string{"a=SUB"}},
			{AccessKey: "adminKey01", SecretKey: "adminSecret01", Admin: true, WhiteRemoteAddress: "192.168.1.*"}},
		Version: auth.Version{Counter: 7, Timestamp: time.UnixMilli(1700000000123)}}, nil
}

func startACLBroker(t *testing.T, authns ...auth.Authenticator) *harness {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc},
		Authenticators: authns})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h
}

func TestACLAdminCodesWithoutACL(t *testing.T) {
	h := startACLBroker(t)
	for _, tt := range []struct {
		code int32
		want int32
	}{
		{remoting.UpdateAndCreateACLConfig, updateACLConfigFailed},
		{remoting.DeleteACLConfig, deleteACLConfigFailed},
		{remoting.UpdateGlobalWhiteAddrsConfig, updateGlobalWhiteAddrsFailed},
		{remoting.GetBrokerClusterACLInfo, remoting.SystemError},
		{remoting.GetBrokerClusterACLConfig, remoting.SystemError},
	} {
		resp := h.invoke(tt.code, map[string]string{"accessKey": "appKey01"}, nil)
		assert.Equal(t, tt.want, resp.Code, remoting.RequestCodeName(tt.code))
		assert.Contains(t, resp.Remark, "acl is not enabled")
	}
}

func TestACLAdminHandlers(t *testing.T) {
	adm := &recordingAdmin{}
	h := startACLBroker(t, adm)

	// Java's createPlainAccessConfig: every header field, lists joined by ",".
	resp := h.invoke(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret001",
		"admin": "true", "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB", "whiteRemoteAddress": "10.0.0.*",
		"topicPerms": "t1=PUB,t2=PUB|SUB", "groupPerms": "g1=SUB"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	white := "10.0.0.*"
	assert.Equal(t, auth.AccountUpdate{AccessKey: "newApp001", SecretKey: "newSecret001", Admin: true, WhiteRemoteAddress: &white,
		DefaultTopicPerm: "DENY", DefaultGroupPerm: "SUB", TopicPerms: []string{"t1=PUB", "t2=PUB|SUB"}, GroupPerms: []string{"g1=SUB"}}, adm.updates[0])
	// Fields Java leaves out (null) stay nil: the account keeps them.
	resp = h.invoke(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret002", "admin": "false"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, auth.AccountUpdate{AccessKey: "newApp001", SecretKey: "newSecret002"}, adm.updates[1])
	// Boolean.parseBoolean: anything but "true" is false.
	resp = h.invoke(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret002", "admin": "TRUE"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.True(t, adm.updates[2].Admin)
	resp = h.invoke(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret002", "admin": "yes"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.False(t, adm.updates[3].Admin)
	resp = h.invoke(remoting.UpdateAndCreateACLConfig, map[string]string{"secretKey": "newSecret002"}, nil)
	assert.Equal(t, updateACLConfigFailed, resp.Code)

	resp = h.invoke(remoting.DeleteACLConfig, map[string]string{"accessKey": "newApp001"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = h.invoke(remoting.DeleteACLConfig, map[string]string{"accessKey": "missing01"}, nil)
	assert.Equal(t, deleteACLConfigFailed, resp.Code)
	assert.Equal(t, "The accesskey[missing01] corresponding to accessConfig has been deleted failed: auth: not found", resp.Remark)

	resp = h.invoke(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "10.1.*.*, 10.2.0.0/16,", "aclFileFullPath": "/etc/quiver/plain_acl.yml"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, [][]string{{"10.1.*.*", "10.2.0.0/16"}}, adm.white)
	resp = h.invoke(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "", "aclFileFullPath": "/etc/passwd"}, nil)
	assert.Equal(t, updateGlobalWhiteAddrsFailed, resp.Code)

	// GET_BROKER_CLUSTER_ACL_INFO: Java's GetBrokerAclConfigResponseHeader.
	resp = h.invoke(remoting.GetBrokerClusterACLInfo, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"counter":7,"timestamp":1700000000123}`, resp.ExtFields["version"])
	assert.Equal(t, `{"/etc/quiver/plain_acl.yml":{"counter":7,"timestamp":1700000000123}}`, resp.ExtFields["allAclFileVersion"])
	assert.Equal(t, "broker-a", resp.ExtFields["brokerName"])
	assert.Equal(t, "127.0.0.1:10911", resp.ExtFields["brokerAddr"])
	assert.Equal(t, "DefaultCluster", resp.ExtFields["clusterName"])

	// GET_BROKER_CLUSTER_ACL_CONFIG: fastjson's bytes (keys sorted, nulls left out).
	resp = h.invoke(remoting.GetBrokerClusterACLConfig, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"globalWhiteAddrs":["10.1.*.*"],"plainAccessConfigs":[`+
		`{"accessKey":"appKey01","admin":false,"defaultTopicPerm":"PUB","secretKey":"appSecret01","topicPerms":["a=SUB"]},`+
		`{"accessKey":"adminKey01","admin":true,"secretKey":"adminSecret01","whiteRemoteAddress":"192.168.1.*"}]}`, string(resp.Body))

	// A caller the plugin refuses gets NO_PERMISSION and changes nothing.
	adm.deny = true
	resp = h.invoke(remoting.DeleteACLConfig, map[string]string{"accessKey": "appKey01"}, nil)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Len(t, adm.deleted, 2)
}
