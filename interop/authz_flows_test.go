package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

// flowsACL: an application account with exactly the permissions its
// producers and consumers need, nothing by default.
const flowsACL = `accounts:
  - accessKey: app00001
    secretKey: appSecret001
    topicPerms: [FlowTx=PUB|SUB, FlowOrd=PUB|SUB, FlowRetry=PUB|SUB]
    groupPerms: [FlowPG=PUB, FlowTxCG=SUB, FlowOrdCG=SUB, FlowRetryCG=SUB]
  - accessKey: admin001
    secretKey: adminSecret01
    admin: true
`

var appCreds = primitive.Credentials{AccessKey: "app00001", SecretKey: "appSecret001"}

func waitSignedRoute(t *testing.T, ns, topic, ak, sk string) {
	t.Helper()
	c := rawClient(t)
	require.Eventually(t, func() bool {
		resp, err := invoke(c, ns, signedAs(remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil), ak, sk))
		return err == nil && resp.Code == remoting.Success
	}, 20*time.Second, 20*time.Millisecond, "no route for %s", topic)
}

// TestACLClientFlows: with ACL on at the broker and the name server and
// the permission table in force, the official client's transactions
// (commit, rollback, check-back), orderly consumption and retries up to
// the DLQ work with an account that holds just what they need.
func TestACLClientFlows(t *testing.T) {
	s := startAuthz(t, flowsACL, "schedule.delay_levels=1s 1s 1s 1s 1s 1s 1s",
		"transaction.check_interval=1s", "transaction.timeout=1s", "transaction.check_max=100")
	c := rawClient(t)
	for _, topic := range []string{"FlowTx", "FlowOrd", "FlowRetry"} {
		createTopic(t, c, s.Broker, topic)
		waitSignedRoute(t, s.Namesrv, topic, "app00001", "appSecret001")
	}
	creds := consumer.WithCredentials(appCreds)

	t.Run("transactions", func(t *testing.T) {
		l := &txListener{
			exec: func(b string) primitive.LocalTransactionState {
				switch b {
				case "commit-me":
					return primitive.CommitMessageState
				case "roll-me":
					return primitive.RollbackMessageState
				}
				return primitive.UnkonwnState
			},
			check: state(primitive.CommitMessageState),
		}
		p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer([]string{s.Namesrv}),
			producer.WithGroupName("FlowPG"), producer.WithInstanceName(uniq("tx")), producer.WithRetry(2),
			producer.WithSendMsgTimeout(5*time.Second), producer.WithCredentials(appCreds))
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { p.Shutdown() })
		d := newDeliveries()
		newPushConsumer(t, s.Namesrv, "FlowTx", consumerOpts{group: "FlowTxCG", skipRouteWait: true, extra: []consumer.Option{creds}}, d.handle)
		for _, b := range []string{"commit-me", "roll-me", "checked-later"} {
			sendTx(t, p, "FlowTx", b)
		}
		waitFor(t, 30*time.Second, "committed and checked-back messages delivered", func() bool {
			return d.count("commit-me") == 1 && d.count("checked-later") == 1
		})
		assert.GreaterOrEqual(t, l.checked("checked-later"), 1)
		assert.Zero(t, d.count("roll-me"), "a rolled-back message was delivered")
	})

	t.Run("orderly", func(t *testing.T) {
		p := newProducer(t, s.Namesrv, producer.WithCredentials(appCreds), producer.WithGroupName("FlowPG"))
		col := newCollector()
		newPushConsumer(t, s.Namesrv, "FlowOrd", consumerOpts{group: "FlowOrdCG", skipRouteWait: true,
			extra: []consumer.Option{creds, consumer.WithConsumerOrder(true)}}, col.handle)
		for i := 0; i < 10; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := p.SendSync(ctx, primitive.NewMessage("FlowOrd", []byte(fmt.Sprintf("ord-%d", i))))
			cancel()
			require.NoError(t, err)
			require.Equal(t, primitive.SendOK, res.Status)
		}
		col.waitFor(t, 10, 30*time.Second)
	})

	t.Run("retry and DLQ", func(t *testing.T) {
		p := newProducer(t, s.Namesrv, producer.WithCredentials(appCreds), producer.WithGroupName("FlowPG"))
		a := newArrivals()
		a.retry = func(m *primitive.MessageExt) bool { return string(m.Body) == "poison" }
		newPushConsumer(t, s.Namesrv, "FlowRetry", consumerOpts{group: "FlowRetryCG", skipRouteWait: true,
			extra: []consumer.Option{creds, consumer.WithMaxReconsumeTimes(1)}}, a.handle)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := p.SendSync(ctx, primitive.NewMessage("FlowRetry", []byte("poison")))
		cancel()
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
		a.waitN(t, "poison", 2, 60*time.Second) // the first try and one retry, then the DLQ

		// The group's own account resends its dead letters; another
		// group's it may not.
		resend := func(group string) *remoting.Command {
			req := remoting.NewRequest(remoting.ResendDLQ, map[string]string{"group": group, "all": "true"}, nil)
			resp, err := invoke(c, s.Broker, signedAs(req, "app00001", "appSecret001"))
			require.NoError(t, err)
			return resp
		}
		resp := resend("SomeoneElsesCG")
		assert.True(t, aclRefused(resp), "RESEND_DLQ of another group answered %d %q", resp.Code, resp.Remark)
		require.Eventually(t, func() bool {
			resp = resend("FlowRetryCG")
			return resp.Code == remoting.Success && len(a.times("poison")) >= 3
		}, 30*time.Second, 500*time.Millisecond, "resend answered %d %q", resp.Code, resp.Remark)
	})
}
