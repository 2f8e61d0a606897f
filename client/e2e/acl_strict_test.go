package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const strictACLFile = `accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: brokerKey01
    secretKey: brokerSecret01
    role: broker
`

func writeACL(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(strictACLFile), 0o600))
	return file
}

func rawInvoke(t *testing.T, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, req)
	require.NoError(t, err)
	return resp
}

// TestStrictSignaturesRequired (issue 22): with acl.strict_signatures =
// require, Quiver's client signing strictly sends and administers, the
// same client signing ACL 1.0 is refused, and a captured strict request
// can be neither replayed nor re-targeted at another code.
func TestStrictSignaturesRequired(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + writeACL(t),
		"acl.strict_signatures=require"}})
	e := &env{srv: srv, ns: srv.Namesrv}
	topic := uniq("Strict")

	p, err := producer.New(e.client(t, client.WithCredentials("appKey01", "appSecret01", ""), client.WithStrictSignatures()), uniq("PG"))
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	sendSync(t, p, msg(topic, "strict"))

	old, err := producer.New(e.client(t, client.WithCredentials("appKey01", "appSecret01", "")), uniq("PG"))
	require.NoError(t, err)
	t.Cleanup(func() { old.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = old.SendSync(ctx, msg(topic, "acl 1.0"))
	require.Error(t, err)
	assert.Equal(t, remoting.NoPermission, client.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), "a strict signature is required")

	// The admin API, signed strictly by an admin.
	adm := admin.New(e.client(t, client.WithCredentials("adminKey01", "adminSecret01", ""), client.WithStrictSignatures()))
	cfg, err := adm.ACLConfig(ctx, srv.Broker)
	require.NoError(t, err)
	assert.Len(t, cfg.PlainAccessConfigs, 3)

	// Replay: the same signed SEND twice.
	sendReq := func() *remoting.Command {
		return remoting.NewRequest(remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": "",
			"reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false"}, []byte("once"))
	}
	captured := sendReq()
	acl.SignStrict(captured.Code, captured.ExtFields, captured.Body, "appKey01", "appSecret01", "", time.Now())
	replay := sendReq()
	replay.ExtFields = map[string]string{}
	for k, v := range captured.ExtFields {
		replay.ExtFields[k] = v
	}
	resp := rawInvoke(t, srv.Broker, captured)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = rawInvoke(t, srv.Broker, replay)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Contains(t, resp.Remark, "replayed request refused")

	// Re-targeting: an admin's signed route query re-sent as a delete.
	route := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	acl.SignStrict(route.Code, route.ExtFields, nil, "adminKey01", "adminSecret01", "", time.Now())
	route.Code = remoting.DeleteTopicInBroker
	resp = rawInvoke(t, srv.Broker, route)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Contains(t, resp.Remark, "Check signature failed for accessKey=adminKey01")
	sendSync(t, p, msg(topic, "the topic is still there"))
}

// TestACL10RetargetingDocumented: what strict signatures prevent, shown
// with ACL 1.0 in the default mode (accept): a signed route query re-sent
// as DELETE_TOPIC_IN_BROKER deletes the topic. docs/SECURITY.md says so.
func TestACL10RetargetingDocumented(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + writeACL(t)}})
	e := &env{srv: srv, ns: srv.Namesrv}
	topic := uniq("Retarget")
	p, err := producer.New(e.client(t, client.WithCredentials("appKey01", "appSecret01", "")), uniq("PG"))
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	sendSync(t, p, msg(topic, "x"))

	route := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	acl.Sign(route.ExtFields, nil, "adminKey01", "adminSecret01", "")
	route.Code = remoting.DeleteTopicInBroker
	resp := rawInvoke(t, srv.Broker, route)
	assert.Equal(t, remoting.Success, resp.Code, "ACL 1.0 cannot tell: %s", resp.Remark)
}

// TestNamesrvRefusalIsAPermissionError (issue 21): with acl.namesrv_enabled
// Quiver's client reports a refused route lookup as NO_PERMISSION with the
// reason, not as a missing route.
func TestNamesrvRefusalIsAPermissionError(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + writeACL(t),
		"acl.namesrv_enabled=true", "acl.access_key=brokerKey01", "acl.secret_key=brokerSecret01"},
		Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
	e := &env{srv: srv, ns: srv.Namesrv}
	c := e.client(t, client.WithCredentials("appKey01", "wrongSecret", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.FetchRoute(ctx, "TBW102")
	require.Error(t, err)
	assert.Equal(t, remoting.NoPermission, client.CodeOf(err), err.Error())
	assert.Contains(t, err.Error(), "NO_PERMISSION")
	assert.Contains(t, err.Error(), "Check signature failed for accessKey=appKey01")
	assert.NotErrorIs(t, err, client.ErrNoRoute)
}
