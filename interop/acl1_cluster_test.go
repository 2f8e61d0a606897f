package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"go.yaml.in/yaml/v3"
)

// TestACL1WritesReachSlaves: mqadmin's ACL 1.0 write commands with -c
// (updateAclConfig, deleteAclConfig) change every broker of the cluster,
// its slaves included, as RocketMQ 4.9's tools do
// (fetchMasterAndSlaveAddrByClusterName): each broker keeps its own
// plain_acl.yml, which replication does not copy.
func TestACL1WritesReachSlaves(t *testing.T) {
	ns := startNamesrv(t, "namesrv-acl1-c")
	name := uniq("acl1c")
	dir := t.TempDir()
	files := map[string]string{}
	for _, b := range []string{"master", "slave"} {
		files[b] = filepath.Join(dir, b+".yml")
		// The slave signs its copying as a cluster member (role: broker).
		require.NoError(t, os.WriteFile(files[b], []byte(aclFile+"  - accessKey: brokerKey01\n    secretKey: brokerSecret01\n    role: broker\n"), 0o644))
	}
	common := []string{"broker.name=" + name, "auth.acl.enabled=true", "auth.acl.reload_interval=0",
		"auth.acl.access_key=brokerKey01", "auth.acl.secret_key=brokerSecret01"}
	startBroker(t, name+"-master", []*node{ns}, append([]string{"broker.role=ASYNC_MASTER", "auth.acl.file=" + files["master"]}, common...)...)
	slave := startBroker(t, name+"-slave", []*node{ns}, append([]string{"broker.id=1", "broker.role=SLAVE", "auth.acl.file=" + files["slave"]}, common...)...)
	require.Eventually(t, func() bool {
		resp := signedInvoke(t, ns.addr, remoting.GetBrokerClusterInfo, nil, "adminKey01", "adminSecret01")
		return resp.Code == remoting.Success && len(resp.Body) > 0 && strings.Contains(string(resp.Body), name) && strings.Contains(string(resp.Body), slave.addr)
	}, 20*time.Second, 50*time.Millisecond, "the slave registered")

	admin := func(args ...string) {
		t.Helper()
		cmd := exec.Command(testserver.Binary(t), append([]string{"admin", "--namesrv", ns.addr,
			"--access-key", "adminKey01", "--secret-key", "adminSecret01"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "mq admin %v:\n%s", args, out)
	}
	has := func(file, ak string) bool {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var doc struct {
			Accounts []struct {
				AccessKey string `yaml:"accessKey"`
			} `yaml:"accounts"`
		}
		require.NoError(t, yaml.Unmarshal(data, &doc))
		for _, a := range doc.Accounts {
			if a.AccessKey == ak {
				return true
			}
		}
		return false
	}

	admin("updateAclConfig", "-c", "DefaultCluster", "-a", "clusterApp01", "-s", "clusterSecret01")
	require.True(t, has(files["master"], "clusterApp01"), "master's plain_acl.yml")
	require.True(t, has(files["slave"], "clusterApp01"), "slave's plain_acl.yml")

	admin("deleteAclConfig", "-c", "DefaultCluster", "-a", "clusterApp01")
	require.False(t, has(files["master"], "clusterApp01"))
	require.False(t, has(files["slave"], "clusterApp01"))
}
