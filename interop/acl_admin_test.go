package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"go.yaml.in/yaml/v3"
)

// TestACLAdminCodes drives the broker's ACL admin codes (50-54) with
// requests shaped as Java's mqadmin sends them (MQClientAPIImpl
// createPlainAccessConfig, deletePlainAccessConfig,
// updateGlobalWhiteAddrsConfig, getBrokerClusterAclInfo,
// getBrokerClusterConfig: header fields as extFields, signed by the
// AclClientRPCHook) and checks the answers, the file on disk and that the
// change is in force at once.
func TestACLAdminCodes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclFile), 0o644))
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file, "acl.reload_interval=0"}})
	admin := func(code int32, ext map[string]string) *remoting.Command {
		return signedInvoke(t, srv.Broker, code, ext, "adminKey01", "adminSecret01")
	}
	onDisk := func() map[string]any {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(data, &m))
		return m
	}
	account := func(ak string) map[string]any {
		for _, a := range onDisk()["accounts"].([]any) {
			if m := a.(map[string]any); m["accessKey"] == ak {
				return m
			}
		}
		return nil
	}

	create := map[string]string{"accessKey": "newApp001", "secretKey": "newSecret001", "admin": "false",
		"defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB", "topicPerms": "OnlyTopic=PUB|SUB,Other=SUB", "whiteRemoteAddress": ""}

	// A non-admin account is refused, and nothing changes.
	resp := signedInvoke(t, srv.Broker, remoting.UpdateAndCreateACLConfig, create, "appKey01", "appSecret01")
	assert.Equal(t, remoting.NoPermission, resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "admin")
	assert.Nil(t, account("newApp001"))
	resp = signedInvoke(t, srv.Broker, remoting.GetBrokerClusterACLConfig, nil, "appKey01", "appSecret01")
	assert.Equal(t, remoting.NoPermission, resp.Code, "the listing holds secrets: admins only")

	// UPDATE_AND_CREATE_ACL_CONFIG creates the account: on disk, and in
	// force at once (reloading is off).
	resp = admin(remoting.UpdateAndCreateACLConfig, create)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	got := account("newApp001")
	require.NotNil(t, got)
	assert.Equal(t, "newSecret001", got["secretKey"])
	assert.Equal(t, []any{"OnlyTopic=PUB|SUB", "Other=SUB"}, got["topicPerms"])
	assert.Equal(t, false, got["admin"])
	topic := "OnlyTopic"
	require.NoError(t, trySend(aclProducer(t, srv.Namesrv, "newApp001", "newSecret001"), topic, "by the new account"))
	err := trySend(aclProducer(t, srv.Namesrv, "newApp001", "newSecret001"), uniq("NotListed"), "denied")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CODE: 16")

	// Updating an existing account keeps what the request leaves out.
	resp = admin(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret002", "admin": "false"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	got = account("newApp001")
	assert.Equal(t, "newSecret002", got["secretKey"])
	assert.Equal(t, []any{"OnlyTopic=PUB|SUB", "Other=SUB"}, got["topicPerms"])

	// Bad input: the failure code, and the file is untouched.
	before, _ := os.ReadFile(file)
	resp = admin(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "short", "admin": "false"})
	assert.EqualValues(t, 209, resp.Code) // UPDATE_AND_CREATE_ACL_CONFIG_FAILED
	assert.Contains(t, resp.Remark, "The accesskey[newApp001] corresponding to accessConfig has been updated failed")
	resp = admin(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "newApp001", "secretKey": "newSecret003", "topicPerms": "NoPerm"})
	assert.EqualValues(t, 209, resp.Code)
	after, _ := os.ReadFile(file)
	assert.Equal(t, string(before), string(after))

	// GET_BROKER_CLUSTER_ACL_INFO: the version grows with every change.
	resp = admin(remoting.GetBrokerClusterACLInfo, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "broker-a", resp.ExtFields["brokerName"])
	assert.Equal(t, "DefaultCluster", resp.ExtFields["clusterName"])
	assert.Equal(t, srv.Broker, resp.ExtFields["brokerAddr"])
	var ver struct{ Counter, Timestamp int64 }
	require.NoError(t, json.Unmarshal([]byte(resp.ExtFields["version"]), &ver))
	assert.GreaterOrEqual(t, ver.Counter, int64(3), "the load and two changes")
	assert.Positive(t, ver.Timestamp)
	var all map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(resp.ExtFields["allAclFileVersion"]), &all))
	assert.Contains(t, all, file)

	// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: this broker's file only.
	resp = admin(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "10.8.0.0/16,192.168.77.*", "aclFileFullPath": "/etc/passwd"})
	assert.EqualValues(t, 211, resp.Code)
	assert.Contains(t, resp.Remark, "is not this broker's ACL file")
	resp = admin(remoting.UpdateGlobalWhiteAddrsConfig, map[string]string{"globalWhiteAddrs": "10.8.0.0/16,192.168.77.*", "aclFileFullPath": file})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []any{"10.8.0.0/16", "192.168.77.*"}, onDisk()["globalWhiteRemoteAddresses"])

	// GET_BROKER_CLUSTER_ACL_CONFIG lists the white lists and accounts.
	resp = admin(remoting.GetBrokerClusterACLConfig, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var body struct {
		GlobalWhiteAddrs   []string `json:"globalWhiteAddrs"`
		PlainAccessConfigs []struct {
			AccessKey          string   `json:"accessKey"`
			Admin              bool     `json:"admin"`
			TopicPerms         []string `json:"topicPerms"`
			WhiteRemoteAddress string   `json:"whiteRemoteAddress"`
		} `json:"plainAccessConfigs"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &body), string(resp.Body))
	assert.Equal(t, []string{"10.8.0.0/16", "192.168.77.*"}, body.GlobalWhiteAddrs)
	white := map[string]string{}
	for _, a := range body.PlainAccessConfigs {
		white[a.AccessKey] = a.WhiteRemoteAddress
	}
	assert.Equal(t, "10.9.*.*", white["fenced01"])
	assert.Contains(t, white, "newApp001")

	// DELETE_ACL_CONFIG.
	resp = admin(remoting.DeleteACLConfig, map[string]string{"accessKey": "newApp001"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Nil(t, account("newApp001"))
	err = trySend(aclProducer(t, srv.Namesrv, "newApp001", "newSecret002"), topic, "gone")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "No acl config for newApp001")
	resp = admin(remoting.DeleteACLConfig, map[string]string{"accessKey": "newApp001"})
	assert.EqualValues(t, 210, resp.Code) // DELETE_ACL_CONFIG_FAILED
	assert.Contains(t, resp.Remark, "The accesskey[newApp001] corresponding to accessConfig has been deleted failed")

}
