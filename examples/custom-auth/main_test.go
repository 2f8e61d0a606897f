package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

const (
	aliceToken = "alice-token-1"
	rootToken  = "root-token-1"
)

// TestGraphsValidate: each role's graph, with this binary's plugins, is
// complete.
func TestGraphsValidate(t *testing.T) {
	for name, r := range roles {
		plan, err := kernel.NewPlan(config.FromMap(map[string]any{"broker.standalone": true}), server.Spec(r, plugins()))
		require.NoError(t, err, name)
		require.NoError(t, fx.ValidateApp(plan.Options()), name)
	}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mq-token")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// TestTokenAuth starts the example binary as dev with tokenauth on and
// shows requests allowed and refused by a plugin that implements only
// auth.Authenticator and auth.Authorizer: the admin creates a topic and
// alice may not; an official-client producer with alice's token sends to
// her topic, and is refused on another topic and with a wrong token.
func TestTokenAuth(t *testing.T) {
	rlog.SetLogLevel("error")
	srv := testserver.StartDev(t, testserver.Options{Binary: buildBinary(t), Sets: []string{
		"auth.token.enabled=true",
		"auth.token.tokens.alice=" + aliceToken, "auth.token.topics.alice=Orders",
		"auth.token.tokens.root=" + rootToken, "auth.token.admins=root",
	}})

	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	createTopic := func(topic, ak, token string) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
			"topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
			"AccessKey": ak, "SecurityToken": token,
		}, nil))
		require.NoError(t, err)
		return resp
	}
	resp := createTopic("Orders", "alice", aliceToken)
	assert.Equal(t, remoting.NoPermission, resp.Code, "alice is no admin")
	assert.Contains(t, resp.Remark, "tokenauth: alice may not administer")
	resp = createTopic("Orders", "root", "not-roots-token")
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Contains(t, resp.Remark, "wrong or missing token for root")
	assert.NotContains(t, resp.Remark, rootToken)
	for _, topic := range []string{"Orders", "Payments"} {
		resp = createTopic(topic, "root", rootToken)
		require.Equal(t, remoting.Success, resp.Code, "the admin creates %s: %s", topic, resp.Remark)
	}
	waitRoute(t, c, srv.Namesrv, "Orders")
	waitRoute(t, c, srv.Namesrv, "Payments")

	send := func(group, token, topic string) error {
		t.Helper()
		p, err := rocketmq.NewProducer(producer.WithNameServer([]string{srv.Namesrv}), producer.WithGroupName(group),
			producer.WithRetry(0), producer.WithCredentials(primitive.Credentials{AccessKey: "alice", SecretKey: "unused", SecurityToken: token}))
		require.NoError(t, err)
		require.NoError(t, p.Start())
		defer p.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("hello")))
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("status %v", res.Status)
		}
		return err
	}
	require.NoError(t, send("PG_ok", aliceToken, "Orders"), "alice sends to her topic")
	err := send("PG_other", aliceToken, "Payments")
	require.Error(t, err, "alice may not send to Payments")
	assert.Contains(t, err.Error(), "alice may not publish to")
	err = send("PG_wrong", "wrong-token-9", "Orders")
	require.Error(t, err, "a wrong token is refused")
	assert.Contains(t, err.Error(), "wrong or missing token for alice")
}

func waitRoute(t *testing.T, c *remoting.Client, ns, topic string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		return err == nil && resp.Code == remoting.Success
	}, 20*time.Second, 20*time.Millisecond, "no route for %s", topic)
}
