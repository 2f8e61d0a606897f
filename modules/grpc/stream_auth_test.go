package grpc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/transaction"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// reloadableACL is an ACL on a file the test rewrites; reload installs
// the file's new rules.
func reloadableACL(t *testing.T, yaml string) (a *acl.ACL, rewrite func(yaml string)) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	cfg := acl.NewConfig()
	cfg.File = file
	cfg.ReloadInterval = 0
	a, err := acl.New(cfg, auth.Deps{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a, func(yaml string) {
		t.Helper()
		require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
		require.NoError(t, a.Reload())
	}
}

const txACL = `
accounts:
  - accessKey: pubuser
    secretKey: ` + skPub + `
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TxA=PUB]
  - accessKey: adminuser
    secretKey: ` + skAdmin + `
    admin: true
`

// TestRevokedPubStopsCheckBacks: a Telemetry stream is authenticated when
// it opens; once its account's PUB on a topic is removed, the stream is
// sent no more check-backs of that topic's transactions (they carry other
// producers' message bodies).
func TestRevokedPubStopsCheckBacks(t *testing.T) {
	a, rewrite := reloadableACL(t, txACL)
	var tx *transaction.Service
	n := startNodeWith(t, false, withAuth(a), withTx(t, time.Minute, &tx))
	n.topic("TxA", 1)
	pub := n.signed("pubuser", skPub, time.Now())
	stream, got, err := n.openTelemetry(pub, pubSettings("TxA"))
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode(), got.GetStatus().GetMessage())

	sendTx := func(id string) *grpcapi.SendResultEntry {
		m := msg("TxA", id, "secret body "+id, &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_TRANSACTION})
		resp, err := n.cli.SendMessage(n.signed("adminuser", skAdmin, time.Now()), &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{m}})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		return resp.GetEntries()[0]
	}
	e1 := sendTx("tx-1")
	tx.CheckNow(context.Background())
	cmd, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, "tx-1", cmd.GetRecoverOrphanedTransactionCommand().GetMessage().GetSystemProperties().GetMessageId(), "checked back while PUB is held")
	require.Equal(t, 1, tx.CheckTimes(e1.GetOffset()))

	rewrite(`
accounts:
  - accessKey: pubuser
    secretKey: ` + skPub + `
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: adminuser
    secretKey: ` + skAdmin + `
    admin: true
`)
	e2 := sendTx("tx-2")
	tx.CheckNow(context.Background())
	assert.Equal(t, 0, tx.CheckTimes(e2.GetOffset()), "no check-back to a stream whose account lost PUB")
	assert.Equal(t, 1, tx.CheckTimes(e1.GetOffset()), "nor of the earlier transaction")
	require.NoError(t, stream.CloseSend())
}

// TestClientIDBoundToAccount: a client id is bound to the account that
// first used it; another account's NotifyClientTermination, Heartbeat or
// Telemetry stream with that id is refused and the client's settings
// (here: FIFO consumption) stay.
func TestClientIDBoundToAccount(t *testing.T) {
	n := startNodeWith(t, false, withACL(t, aclYAML))
	n.topic("AuthT", 1)
	const victim = "victim@1"
	sub := n.signedAs("subuser", skSub, victim, time.Now())
	fifo := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{
		Group: res("AuthG"), Fifo: proto.Bool(true), Subscriptions: []*grpcapi.SubscriptionEntry{{Topic: res("AuthT"), Expression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"}}}}}}
	stream, got, err := n.openTelemetry(sub, fifo)
	require.NoError(t, err)
	require.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
	held := n.srv.HeldSettings()
	require.Positive(t, held)

	foreign := func() context.Context { return n.signedAs("pubuser", skPub, victim, time.Now()) }
	term, err := n.cli.NotifyClientTermination(foreign(), &grpcapi.NotifyClientTerminationRequest{})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, term.GetStatus().GetCode(), term.GetStatus().GetMessage())
	hb, err := n.cli.Heartbeat(foreign(), &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, hb.GetStatus().GetCode(), hb.GetStatus().GetMessage())
	_, got, err = n.openTelemetry(foreign(), pubSettings("AuthT"))
	require.NoError(t, err, "the refusal is answered inside the stream")
	assert.Equal(t, grpcapi.Code_FORBIDDEN, got.GetStatus().GetCode(), got.GetStatus().GetMessage())
	assert.Contains(t, got.GetStatus().GetMessage(), "another account")
	assert.Equal(t, held, n.srv.HeldSettings(), "the victim's settings stay")

	// The client's own account may end it.
	term, err = n.cli.NotifyClientTermination(n.signedAs("subuser", skSub, victim, time.Now()), &grpcapi.NotifyClientTerminationRequest{Group: res("AuthG")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, term.GetStatus().GetCode(), term.GetStatus().GetMessage())
	assert.Zero(t, n.srv.HeldSettings())
	require.NoError(t, stream.CloseSend())
}
