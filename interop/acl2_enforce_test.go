package interop

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// TestACL2ChangeEnforcedBySlaveAtOnce: master and slave processes with
// ACL 2.0, ha.meta_interval at 1h and ha.max_wait at its 10 s maximum,
// so only the change notice can carry a change within the deadline. A
// user and its policy created on the master let a pull through the
// slave pass, revoking the policy refuses it again, and so does deleting
// the user — each within 3 s (measured: well under 100 ms, see
// docs/REPLICATION.md). A topic created on the master reaches the slave
// the same way.
func TestACL2ChangeEnforcedBySlaveAtOnce(t *testing.T) {
	ns := startNamesrv(t, "namesrv-acl2-push")
	name := uniq("acl2push")
	dir := t.TempDir()
	const rootPW = "root-secret-0123456789"
	common := func(file string) []string {
		return []string{"broker.name=" + name, "ha.meta_interval=1h", "ha.lag_log_interval=1h", "ha.max_wait=10s",
			"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(dir, file),
			"auth.acl2.init_username=root", "auth.acl2.init_password=" + rootPW,
			"auth.acl2.access_key=root", "auth.acl2.secret_key=" + rootPW}
	}
	master := startBroker(t, name+"-master", []*node{ns}, append([]string{"broker.role=ASYNC_MASTER"}, common("master.json")...)...)
	slave := startBroker(t, name+"-slave", []*node{ns}, append([]string{"broker.id=1", "broker.role=SLAVE"}, common("slave.json")...)...)

	c := rawClient(t)
	call := func(addr string, code int32, ext map[string]string, body, ak, sk string) *remoting.Command {
		var raw []byte
		if body != "" {
			raw = []byte(body)
		}
		resp, err := invoke(c, addr, signedAs(remoting.NewRequest(code, ext, raw), ak, sk))
		require.NoError(t, err)
		return resp
	}
	root := func(addr string, code int32, ext map[string]string, body string) {
		t.Helper()
		resp := call(addr, code, ext, body, "root", rootPW)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	topic := uniq("orders-eu")
	root(master.addr, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, "")
	require.Eventually(t, func() bool {
		r := call(slave.addr, remoting.GetAllTopicConfig, nil, "", "root", rootPW)
		return r.Code == remoting.Success && strings.Contains(string(r.Body), `"`+topic+`"`)
	}, 20*time.Second, 10*time.Millisecond, "the topic reaches the slave")

	// A pull through the slave as app: refused (NO_PERMISSION) or served.
	pull := func() *remoting.Command {
		return call(slave.addr, remoting.PullMessage, map[string]string{
			"consumerGroup": "cg-orders", "topic": topic, "queueId": "0", "queueOffset": "0",
			"maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
			"subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, "", "app", "app-secret-1")
	}
	refused := func() bool { return pull().Code == remoting.NoPermission }
	allowed := func() bool {
		r := pull()
		return r.Code == remoting.PullNotFound || r.Code == remoting.Success || r.Code == remoting.PullRetryImmediately || r.Code == remoting.PullOffsetMoved
	}
	require.True(t, refused(), "no such user on the slave yet")

	// waitFor polls the slave until ok and logs how long the change took.
	waitFor := func(what string, since time.Time, ok func() bool) {
		t.Helper()
		require.Eventually(t, ok, 3*time.Second, 2*time.Millisecond, what)
		t.Logf("%s: enforced by the slave %v after the master's answer", what, time.Since(since).Round(time.Millisecond))
	}

	root(master.addr, remoting.AuthCreateUser, map[string]string{"username": "app"}, `{"password":"app-secret-1"}`)
	root(master.addr, remoting.AuthCreateACL, map[string]string{"subject": "User:app"},
		`{"subject":"User:app","policies":[{"policyType":"Custom","entries":[`+
			`{"resource":"Topic:orders*","actions":["Sub"],"decision":"Allow"},`+
			`{"resource":"Group:cg-orders","actions":["Sub"],"decision":"Allow"}]}]}`)
	waitFor("user and policy created", time.Now(), allowed)

	start := time.Now()
	root(master.addr, remoting.AuthDeleteACL, map[string]string{"subject": "User:app", "resource": "Topic:orders*"}, "")
	waitFor("policy revoked", start, refused)

	start = time.Now()
	root(master.addr, remoting.AuthUpdateACL, map[string]string{"subject": "User:app"},
		`{"subject":"User:app","policies":[{"policyType":"Custom","entries":[`+
			`{"resource":"Topic:orders*","actions":["Sub"],"decision":"Allow"}]}]}`)
	waitFor("policy granted again", start, allowed)

	start = time.Now()
	root(master.addr, remoting.AuthDeleteUser, map[string]string{"username": "app"}, "")
	waitFor("user deleted", start, refused)
}
