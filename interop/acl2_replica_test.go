package interop

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// TestACL2ReplicatedToSlave: with ACL 2.0 on a master and its slave, a
// user and a policy created on the master reach the slave (copied with
// the topics and offsets every ha.meta_interval, the slave signing as
// its auth.acl2.access_key), and so does their deletion.
func TestACL2ReplicatedToSlave(t *testing.T) {
	ns := startNamesrv(t, "namesrv-acl2")
	name := uniq("acl2bg")
	dir := t.TempDir()
	common := func(file string) []string {
		return []string{"broker.name=" + name, "ha.meta_interval=1s", "ha.lag_log_interval=1s", "ha.max_wait=500ms",
			"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(dir, file),
			"auth.acl2.init_username=root", "auth.acl2.init_password=root-secret-0123456789",
			"auth.acl2.access_key=root", "auth.acl2.secret_key=root-secret-0123456789"}
	}
	master := startBroker(t, name+"-master", []*node{ns}, append([]string{"broker.role=ASYNC_MASTER"}, common("master.json")...)...)
	slave := startBroker(t, name+"-slave", []*node{ns}, append([]string{"broker.id=1", "broker.role=SLAVE"}, common("slave.json")...)...)
	require.Eventually(t, func() bool { return strings.Contains(slave.logs.Tail(400), "following master") }, 20*time.Second, 50*time.Millisecond)

	c := rawClient(t)
	call := func(addr string, code int32, ext map[string]string, body string) *remoting.Command {
		var raw []byte
		if body != "" {
			raw = []byte(body)
		}
		resp, err := invoke(c, addr, signedAs(remoting.NewRequest(code, ext, raw), "root", "root-secret-0123456789"))
		require.NoError(t, err)
		return resp
	}
	resp := call(master.addr, remoting.AuthCreateUser, map[string]string{"username": "app"}, `{"password":"app-secret-1"}`)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = call(master.addr, remoting.AuthCreateACL, map[string]string{"subject": "User:app"},
		`{"subject":"User:app","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:orders*","actions":["Pub"],"decision":"Allow"}]}]}`)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	require.Eventually(t, func() bool {
		r := call(slave.addr, remoting.AuthGetACL, map[string]string{"subject": "User:app"}, "")
		var got struct {
			Policies []struct{ Entries []struct{ Resource string } }
		}
		return r.Code == remoting.Success && json.Unmarshal(r.Body, &got) == nil && len(got.Policies) == 1 &&
			got.Policies[0].Entries[0].Resource == "Topic:orders*"
	}, 20*time.Second, 100*time.Millisecond, "the slave copies the user and its policy")

	resp = call(master.addr, remoting.AuthDeleteUser, map[string]string{"username": "app"}, "")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool {
		r := call(slave.addr, remoting.AuthGetUser, map[string]string{"username": "app"}, "")
		return r.Code == remoting.Success && len(r.Body) == 0
	}, 20*time.Second, 100*time.Millisecond, "the deletion reaches the slave")
}
