package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// TestACLDevWithOnlyAFile (issue 21): `mq dev` with acl.enabled and
// acl.file and nothing else serves the official client. The name server
// checks no ACL (as RocketMQ 4.9's), so the broker registers unsigned; the
// broker checks every request, and a refusal reaches the official
// client's user as "CODE: 16  DESC: acl: ..." (the producer treats
// NO_PERMISSION as retryable and then returns ProcessSendResponse's
// error, internal/client.go).
func TestACLDevWithOnlyAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclFile), 0o644))
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file}})
	topic := uniq("AclDev")

	good := aclProducer(t, srv.Namesrv, "appKey01", "appSecret01")
	require.NoError(t, trySend(good, topic, "hello"))
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"), extra: []consumer.Option{
		consumer.WithCredentials(primitive.Credentials{AccessKey: "appKey01", SecretKey: "appSecret01"})}}, col.handle)
	col.waitFor(t, 1, 30*time.Second)

	for _, tt := range []struct{ name, ak, sk, want string }{
		{"wrong secret", "appKey01", "notTheSecret", "acl: Check signature failed for accessKey=appKey01"},
		{"no credentials", "", "", "acl: No accessKey is configured"},
		{"unknown account", "nobody01", "whatever01", "acl: No acl config for nobody01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := trySend(aclProducer(t, srv.Namesrv, tt.ak, tt.sk), topic, "refused")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "CODE: 16")
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "route info not found")
		})
	}
}

// TestACLNamesrvOptIn: with acl.namesrv_enabled the name server checks
// too. A broker that cannot sign its registration then fails at start-up
// naming the keys to set; with keys, a refused route lookup answers
// NO_PERMISSION with the reason (Quiver's client reports it as such; the
// official Go client drops the answer of a route query and reports
// "route info not found", which is why the name-server check is opt-in).
func TestACLNamesrvOptIn(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclFile), 0o644))

	t.Run("no keys: the broker does not start", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, testserver.Binary(t), "broker",
			"--set", "broker.namesrv=127.0.0.1:1", "--set", "broker.listen=127.0.0.1:0",
			"--set", "storage.dir="+filepath.Join(dir, "store"),
			"--set", "acl.enabled=true", "--set", "acl.file="+file, "--set", "acl.namesrv_enabled=true")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "mq broker must not start:\n%s", out)
		require.NoError(t, ctx.Err(), "mq broker did not exit:\n%s", out)
		assert.Contains(t, string(out), "auth.acl.access_key and auth.acl.secret_key")
	})

	t.Run("with keys: route refusals are permission errors", func(t *testing.T) {
		// REGISTER_BROKER is for cluster members (role: broker).
		withBroker := filepath.Join(dir, "with_broker.yml")
		require.NoError(t, os.WriteFile(withBroker, []byte(aclFile+`  - accessKey: brokerKey01
    secretKey: brokerSecret01
    role: broker
`), 0o644))
		srv := testserver.StartDev(t, testserver.Options{Sets: []string{
			"acl.enabled=true", "acl.file=" + withBroker, "acl.namesrv_enabled=true",
			"acl.access_key=brokerKey01", "acl.secret_key=brokerSecret01",
		}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
		resp := signedInvoke(t, srv.Namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, "appKey01", "notTheSecret")
		assert.Equal(t, remoting.NoPermission, resp.Code)
		assert.Contains(t, resp.Remark, "Check signature failed for accessKey=appKey01")
		resp = signedInvoke(t, srv.Namesrv, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, "appKey01", "appSecret01")
		assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
		// The official client is refused (and says only that the route
		// is missing).
		assert.Error(t, trySend(aclProducer(t, srv.Namesrv, "appKey01", "notTheSecret"), uniq("AclNs"), "x"))
		require.NoError(t, trySend(aclProducer(t, srv.Namesrv, "appKey01", "appSecret01"), uniq("AclNs"), "x"))
	})
}
