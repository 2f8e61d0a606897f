package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

const aclFile = `accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - DeniedTopic=DENY
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: fenced01
    secretKey: fencedSecret01
    whiteRemoteAddress: 10.9.*.*
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
`

func aclProducer(t *testing.T, ns, ak, sk string) rocketmq.Producer {
	t.Helper()
	opts := []producer.Option{producer.WithRetry(0), producer.WithSendMsgTimeout(3 * time.Second)}
	if ak != "" {
		opts = append(opts, producer.WithCredentials(primitive.Credentials{AccessKey: ak, SecretKey: sk}))
	}
	return newProducer(t, ns, opts...)
}

func trySend(p rocketmq.Producer, topic, body string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
	if err == nil && res.Status != primitive.SendOK {
		err = fmt.Errorf("status %v", res.Status)
	}
	return err
}

// signedInvoke sends a raw request signed with ak/sk.
func signedInvoke(t *testing.T, addr string, code int32, ext map[string]string, ak, sk string) *remoting.Command {
	t.Helper()
	c := rawClient(t)
	req := remoting.NewRequest(code, ext, nil)
	acl.Sign(req.ExtFields, nil, ak, sk, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, req)
	require.NoError(t, err)
	return resp
}

// TestACLWithOfficialClient runs mq dev with ACL on the broker and the name
// server and checks who gets in.
func TestACLWithOfficialClient(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclFile), 0o644))
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{
		"acl.enabled=true", "acl.file=" + file, "acl.reload_interval=200ms",
		"acl.access_key=adminKey01", "acl.secret_key=adminSecret01",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
	topic := uniq("Acl")

	// An account with PUB|SUB sends and consumes.
	good := aclProducer(t, srv.Namesrv, "appKey01", "appSecret01")
	require.NoError(t, trySend(good, topic, "hello"))
	col := newCollector()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CG"), extra: []consumer.Option{
		consumer.WithCredentials(primitive.Credentials{AccessKey: "appKey01", SecretKey: "appSecret01"})}}, col.handle)
	col.waitFor(t, 1, 30*time.Second)

	// The official client is refused; at the name server already, which it
	// reports as a missing route.
	for _, tt := range []struct{ name, ak, sk, topic string }{
		{"wrong secret", "appKey01", "notTheSecret", topic},
		{"unknown access key", "nobody01", "whatever01", topic},
		{"missing signature", "", "", topic},
		{"denied topic", "appKey01", "appSecret01", "DeniedTopic"},
		{"outside its white list", "fenced01", "fencedSecret01", topic},
	} {
		t.Run("client/"+tt.name, func(t *testing.T) {
			assert.Error(t, trySend(aclProducer(t, srv.Namesrv, tt.ak, tt.sk), tt.topic, "refused"))
		})
	}
	// The broker's answers name the reason, and never a secret.
	sendExt := func(topic string) map[string]string {
		return map[string]string{"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": "", "reconsumeTimes": "0",
			"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false"}
	}
	for _, tt := range []struct{ name, ak, sk, topic, want string }{
		{"wrong secret", "appKey01", "notTheSecret", topic, "signature"},
		{"unknown access key", "nobody01", "whatever01", topic, "No acl config for nobody01"},
		{"denied topic", "appKey01", "appSecret01", "DeniedTopic", "PUB on topic DeniedTopic"},
		{"outside its white list", "fenced01", "fencedSecret01", topic, "PUB on topic " + topic},
	} {
		t.Run("broker/"+tt.name, func(t *testing.T) {
			resp := signedInvoke(t, srv.Broker, remoting.SendMessage, sendExt(tt.topic), tt.ak, tt.sk)
			assert.Equal(t, remoting.NoPermission, resp.Code)
			assert.Contains(t, resp.Remark, tt.want)
			assert.NotContains(t, resp.Remark, "Secret0")
		})
	}
	t.Run("broker/missing signature", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rawClient(t).Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.SendMessage, sendExt(topic), []byte("x")))
		require.NoError(t, err)
		assert.Equal(t, remoting.NoPermission, resp.Code)
		assert.Contains(t, resp.Remark, "No accessKey is configured")
	})

	// Creating a topic is for admins only.
	ext := func() map[string]string {
		return map[string]string{"topic": uniq("AdminMade"), "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}
	}
	resp := signedInvoke(t, srv.Broker, remoting.UpdateAndCreateTopic, ext(), "appKey01", "appSecret01")
	assert.Equal(t, remoting.NoPermission, resp.Code, resp.Remark)
	assert.Contains(t, resp.Remark, "admin")
	resp = signedInvoke(t, srv.Broker, remoting.UpdateAndCreateTopic, ext(), "adminKey01", "adminSecret01")
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// Editing the file takes effect while running: deny the topic.
	edited := strings.Replace(aclFile, "      - DeniedTopic=DENY", "      - DeniedTopic=DENY\n      - "+topic+"=SUB", 1)
	require.NoError(t, os.WriteFile(file, []byte(edited), 0o644))
	require.Eventually(t, func() bool {
		err := trySend(good, topic, "after-edit")
		return err != nil && strings.Contains(err.Error(), "PUB on topic "+topic)
	}, 15*time.Second, 300*time.Millisecond, "the edited ACL file did not take effect")
	// A broken edit keeps the last good rules.
	require.NoError(t, os.WriteFile(file, []byte("accounts: [ {accessKey: "), 0o644))
	time.Sleep(time.Second)
	err := trySend(good, topic, "after-broken-edit")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PUB on topic "+topic)
	assert.NoError(t, trySend(good, uniq("StillAllowed"), "x"), "other topics keep their rules")

	// A global white list lets a matching address in without a signature.
	require.NoError(t, os.WriteFile(file, []byte("globalWhiteRemoteAddresses:\n  - 127.0.0.*\n"+aclFile), 0o644))
	anon := aclProducer(t, srv.Namesrv, "", "")
	require.Eventually(t, func() bool { return trySend(anon, uniq("Whitelisted"), "x") == nil }, 15*time.Second, 300*time.Millisecond)
}
