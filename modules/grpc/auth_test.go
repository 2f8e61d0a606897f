package grpc_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/grpcapi"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

const (
	skPub   = "sk-pub-Hq27b"
	skSub   = "sk-sub-Jm58c"
	skAdmin = "sk-admin-Vn93d"
)

// aclYAML: "pub" may publish to AuthT only; "sub" may subscribe to AuthT
// with group AuthG only; "admin" is an admin without listed permissions.
const aclYAML = `
accounts:
  - accessKey: pubuser
    secretKey: ` + skPub + `
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AuthT=PUB]
  - accessKey: subuser
    secretKey: ` + skSub + `
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AuthT=SUB]
    groupPerms: [AuthG=SUB]
  - accessKey: adminuser
    secretKey: ` + skAdmin + `
    admin: true
`

// withACL enables the ACL plugin with the rules in yaml on the endpoint;
// tune changes the plugin's configuration.
func withACL(t testing.TB, yaml string, tune ...func(*acl.Config)) nodeOpt {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	cfg := acl.NewConfig()
	cfg.File = file
	cfg.ReloadInterval = 0
	for _, f := range tune {
		f(cfg)
	}
	a, err := acl.New(cfg, auth.Deps{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return withAuth(a)
}

// withAuth enables the ACL a on the endpoint.
func withAuth(a *acl.ACL) nodeOpt {
	return func(_ *grpcmod.Config, d *grpcmod.Deps) {
		d.Auth = append(d.Auth, grpcmod.AuthPlugin{Authenticator: a, Authorizer: a})
	}
}

// signed is a call context carrying what a 5.x client with ak/sk sends,
// dated at.
func (n *node) signed(ak, sk string, at time.Time) context.Context {
	return n.signedAs(ak, sk, ak+"-client@1", at)
}

// signedAs is signed for the client id id.
func (n *node) signedAs(ak, sk, id string, at time.Time) context.Context {
	dt := at.UTC().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write([]byte(dt))
	sig := strings.ToUpper(hex.EncodeToString(mac.Sum(nil))) // as the Node.js and Java clients
	return metadata.AppendToOutgoingContext(n.ctxAs(id), "x-mq-date-time", dt,
		"authorization", "MQv2-HMAC-SHA1 Credential="+ak+", SignedHeaders=x-mq-date-time, Signature="+sig)
}

func (n *node) send(ctx context.Context, topic string) *grpcapi.Status {
	n.t.Helper()
	resp, err := n.cli.SendMessage(ctx, &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg(topic, "AUTHID"+topic, "body", nil)}})
	require.NoError(n.t, err)
	return resp.GetStatus()
}

func TestAuthSignatures(t *testing.T) {
	n := startNodeWith(t, false, withACL(t, aclYAML))
	n.topic("AuthT", 1)
	now := time.Now()
	bad := metadata.AppendToOutgoingContext(n.ctx(), "x-mq-date-time", now.UTC().Format("20060102T150405Z"),
		"authorization", "MQv2-HMAC-SHA1 Credential=pubuser, SignedHeaders=x-mq-date-time, Signature=00112233445566778899AABBCCDDEEFF00112233")
	tests := []struct {
		name     string
		give     context.Context
		wantCode grpcapi.Code
		wantMsg  string
	}{
		{"good signature", n.signed("pubuser", skPub, now), grpcapi.Code_OK, ""},
		{"lower-case hex and region in Credential", func() context.Context {
			dt := now.UTC().Format("20060102T150405Z")
			mac := hmac.New(sha1.New, []byte(skPub))
			mac.Write([]byte(dt))
			return metadata.AppendToOutgoingContext(n.ctx(), "x-mq-date-time", dt,
				"authorization", "MQv2-HMAC-SHA1 Credential=pubuser/region/channel, SignedHeaders=x-mq-date-time, Signature="+hex.EncodeToString(mac.Sum(nil)))
		}(), grpcapi.Code_OK, ""},
		{"bad signature", bad, grpcapi.Code_UNAUTHORIZED, "Check signature failed for accessKey=pubuser"},
		{"wrong secret", n.signed("pubuser", skSub, now), grpcapi.Code_UNAUTHORIZED, "Check signature failed for accessKey=pubuser"},
		{"unknown access key", n.signed("nobody", skPub, now), grpcapi.Code_UNAUTHORIZED, "No acl config for nobody"},
		{"clock 20 minutes behind", n.signed("pubuser", skPub, now.Add(-20*time.Minute)), grpcapi.Code_UNAUTHORIZED, "grpc.max_clock_skew"},
		{"clock 20 minutes ahead", n.signed("pubuser", skPub, now.Add(20*time.Minute)), grpcapi.Code_UNAUTHORIZED, "grpc.max_clock_skew"},
		{"no metadata", n.ctx(), grpcapi.Code_UNAUTHORIZED, "No accessKey is configured"},
		{"no date-time", metadata.AppendToOutgoingContext(n.ctx(),
			"authorization", "MQv2-HMAC-SHA1 Credential=pubuser, SignedHeaders=x-mq-date-time, Signature=0011"), grpcapi.Code_UNAUTHORIZED, "x-mq-date-time"},
		{"malformed header", metadata.AppendToOutgoingContext(n.ctx(), "authorization", "garbage"), grpcapi.Code_UNAUTHORIZED, "authorization header"},
		{"unknown algorithm", metadata.AppendToOutgoingContext(n.ctx(), "authorization", "MQv9-HMAC-MD5 Credential=pubuser, Signature=00"), grpcapi.Code_UNAUTHORIZED, "unknown algorithm"},
		{"signature not hex", metadata.AppendToOutgoingContext(n.ctx(), "x-mq-date-time", now.UTC().Format("20060102T150405Z"),
			"authorization", "MQv2-HMAC-SHA1 Credential=pubuser, SignedHeaders=x-mq-date-time, Signature=zz"), grpcapi.Code_UNAUTHORIZED, "not hex"},
		{"no permission for topic", n.signed("subuser", skSub, now), grpcapi.Code_FORBIDDEN, "PUB on topic AuthT for accessKey subuser"},
		{"admin without listed permissions", n.signed("adminuser", skAdmin, now), grpcapi.Code_OK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := n.send(tt.give, "AuthT")
			assert.Equal(t, tt.wantCode, st.GetCode(), st.GetMessage())
			assert.Contains(t, st.GetMessage(), tt.wantMsg)
			assert.NotContains(t, st.GetMessage(), "sk-", "a refusal never shows a secret")
		})
	}
	// The endpoint keeps serving after refusals.
	st := n.send(n.signed("pubuser", skPub, time.Now()), "AuthT")
	assert.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
}

func TestAuthPermissionsPerRPC(t *testing.T) {
	n := startNodeWith(t, true, withACL(t, aclYAML))
	n.topic("AuthT", 1)
	n.topic("OtherT", 1)
	now := time.Now()
	sub := func() context.Context { return n.signed("subuser", skSub, now) }
	pub := func() context.Context { return n.signed("pubuser", skPub, now) }

	// QueryRoute needs PUB or SUB on the topic.
	for _, ctx := range []context.Context{sub(), pub()} {
		qr, err := n.cli.QueryRoute(ctx, &grpcapi.QueryRouteRequest{Topic: res("AuthT")})
		require.NoError(t, err)
		assert.Equal(t, grpcapi.Code_OK, qr.GetStatus().GetCode(), qr.GetStatus().GetMessage())
	}
	qr, err := n.cli.QueryRoute(sub(), &grpcapi.QueryRouteRequest{Topic: res("OtherT")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, qr.GetStatus().GetCode(), qr.GetStatus().GetMessage())

	// QueryAssignment: SUB on group and topic.
	qa, err := n.cli.QueryAssignment(sub(), &grpcapi.QueryAssignmentRequest{Topic: res("AuthT"), Group: res("AuthG")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, qa.GetStatus().GetCode(), qa.GetStatus().GetMessage())
	qa, err = n.cli.QueryAssignment(sub(), &grpcapi.QueryAssignmentRequest{Topic: res("AuthT"), Group: res("OtherG")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, qa.GetStatus().GetCode())
	assert.Contains(t, qa.GetStatus().GetMessage(), "SUB on group OtherG")

	// Heartbeat: a consumer's group; a producer's needs nothing more.
	hb, err := n.cli.Heartbeat(pub(), &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_PRODUCER})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, hb.GetStatus().GetCode(), hb.GetStatus().GetMessage())
	hb, err = n.cli.Heartbeat(pub(), &grpcapi.HeartbeatRequest{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER, Group: res("AuthG")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, hb.GetStatus().GetCode())

	// ReceiveMessage (server-streamed): refused in the first response.
	recv := func(ctx context.Context, group, topic string) *grpcapi.Status {
		stream, err := n.cli.ReceiveMessage(ctx, &grpcapi.ReceiveMessageRequest{Group: res(group), MessageQueue: &grpcapi.MessageQueue{Topic: res(topic), Id: -1},
			BatchSize: 1, InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(100 * time.Millisecond)})
		require.NoError(t, err)
		var st *grpcapi.Status
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return st
			}
			require.NoError(t, err)
			if r.GetStatus() != nil && st == nil {
				st = r.GetStatus()
			}
		}
	}
	assert.Equal(t, grpcapi.Code_FORBIDDEN, recv(pub(), "AuthG", "AuthT").GetCode(), "pubuser lacks SUB")
	assert.Equal(t, grpcapi.Code_FORBIDDEN, recv(sub(), "OtherG", "AuthT").GetCode(), "subuser lacks the group")
	st := recv(sub(), "AuthG", "AuthT")
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, st.GetCode(), st.GetMessage())
	unauth := recv(n.ctx(), "AuthG", "AuthT")
	assert.Equal(t, grpcapi.Code_UNAUTHORIZED, unauth.GetCode(), unauth.GetMessage())

	// AckMessage and ChangeInvisibleDuration: group and topic.
	ack, err := n.cli.AckMessage(pub(), &grpcapi.AckMessageRequest{Group: res("AuthG"), Topic: res("AuthT"), Entries: []*grpcapi.AckMessageEntry{{ReceiptHandle: "x"}}})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, ack.GetStatus().GetCode())
	ci, err := n.cli.ChangeInvisibleDuration(sub(), &grpcapi.ChangeInvisibleDurationRequest{Group: res("AuthG"), Topic: res("OtherT"), ReceiptHandle: "x", InvisibleDuration: durationpb.New(time.Second)})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, ci.GetStatus().GetCode())
	assert.Contains(t, ci.GetStatus().GetMessage(), "SUB on topic OtherT")

	// An empty group is a bad request, not a permission question.
	ack, err = n.cli.AckMessage(sub(), &grpcapi.AckMessageRequest{Topic: res("AuthT")})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_ILLEGAL_CONSUMER_GROUP, ack.GetStatus().GetCode())

	// Pull and offsets: SUB on group and topic (QueryOffset: the topic).
	pull := func(ctx context.Context) *grpcapi.Status {
		stream, err := n.cli.PullMessage(ctx, &grpcapi.PullMessageRequest{Group: res("AuthG"), MessageQueue: &grpcapi.MessageQueue{Topic: res("AuthT")}})
		require.NoError(t, err)
		r, err := stream.Recv()
		require.NoError(t, err)
		return r.GetStatus()
	}
	assert.Equal(t, grpcapi.Code_FORBIDDEN, pull(pub()).GetCode())
	assert.Equal(t, grpcapi.Code_MESSAGE_NOT_FOUND, pull(sub()).GetCode())
	mq := &grpcapi.MessageQueue{Topic: res("AuthT")}
	uo, err := n.cli.UpdateOffset(pub(), &grpcapi.UpdateOffsetRequest{Group: res("AuthG"), MessageQueue: mq})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, uo.GetStatus().GetCode())
	uo, err = n.cli.UpdateOffset(sub(), &grpcapi.UpdateOffsetRequest{Group: res("AuthG"), MessageQueue: mq})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, uo.GetStatus().GetCode(), uo.GetStatus().GetMessage())
	gof, err := n.cli.GetOffset(pub(), &grpcapi.GetOffsetRequest{Group: res("AuthG"), MessageQueue: mq})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, gof.GetStatus().GetCode())
	qo, err := n.cli.QueryOffset(pub(), &grpcapi.QueryOffsetRequest{MessageQueue: mq})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, qo.GetStatus().GetCode())
	qo, err = n.cli.QueryOffset(sub(), &grpcapi.QueryOffsetRequest{MessageQueue: mq})
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, qo.GetStatus().GetCode(), qo.GetStatus().GetMessage())

	// Telemetry: settings naming a topic the account may not publish to
	// are answered inside the stream with FORBIDDEN and no settings, and
	// the stream then ends with gRPC OK (RocketMQ's proxy answers its
	// pipeline's refusals so; the 5.x clients fail startup on it, while a
	// gRPC error makes them renew the stream forever); allowed settings
	// are answered.
	telemetry := func(ctx context.Context, s *grpcapi.Settings) (*grpcapi.TelemetryCommand, error) {
		stream, err := n.cli.Telemetry(ctx)
		require.NoError(t, err)
		// A stream the server refused at once may fail Send with io.EOF:
		// its status is what Recv returns.
		if err := stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: s}}); !errors.Is(err, io.EOF) {
			require.NoError(t, err)
		}
		got, err := stream.Recv()
		if err == nil && got.GetStatus().GetCode() != grpcapi.Code_OK {
			assert.Nil(t, got.GetSettings(), "a refusal carries no settings")
			_, end := stream.Recv()
			assert.ErrorIs(t, end, io.EOF, "the stream ends with gRPC OK after the refusal")
		}
		_ = stream.CloseSend()
		return got, err
	}
	pubSettings := func(topic string) *grpcapi.Settings {
		return &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum(), PubSub: &grpcapi.Settings_Publishing{Publishing: &grpcapi.Publishing{Topics: []*grpcapi.Resource{res(topic)}}}}
	}
	got, err := telemetry(pub(), pubSettings("AuthT"))
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
	got, err = telemetry(pub(), pubSettings("OtherT"))
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, got.GetStatus().GetCode())
	assert.Contains(t, got.GetStatus().GetMessage(), "PUB on topic OtherT")
	got, err = telemetry(n.ctx(), pubSettings("AuthT"))
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_UNAUTHORIZED, got.GetStatus().GetCode(), got.GetStatus().GetMessage())
	subSettings := &grpcapi.Settings{ClientType: grpcapi.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{
		Group: res("AuthG"), Subscriptions: []*grpcapi.SubscriptionEntry{{Topic: res("AuthT"), Expression: &grpcapi.FilterExpression{Type: grpcapi.FilterType_TAG, Expression: "*"}}}}}}
	got, err = telemetry(sub(), subSettings)
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
	got, err = telemetry(pub(), subSettings)
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_FORBIDDEN, got.GetStatus().GetCode(), got.GetStatus().GetMessage())
}

func TestAuthWhiteLists(t *testing.T) {
	tests := []struct {
		name string
		give string // the ACL file
	}{
		{"globalWhiteRemoteAddresses", "globalWhiteRemoteAddresses: [127.0.0.*]\n" + aclYAML},
		{"account whiteRemoteAddress", strings.Replace(aclYAML, "    topicPerms: [AuthT=SUB]", "    whiteRemoteAddress: 127.0.0.1\n    topicPerms: [AuthT=SUB]", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startNodeWith(t, false, withACL(t, tt.give))
			n.topic("AuthT", 1)
			ctx := n.ctx() // no signature at all
			if tt.name == "account whiteRemoteAddress" {
				// The account is named, its signature is not checked.
				ctx = metadata.AppendToOutgoingContext(n.ctx(), "authorization", "MQv2-HMAC-SHA1 Credential=subuser, SignedHeaders=x-mq-date-time, Signature=00",
					"x-mq-date-time", "20000101T000000Z")
			}
			st := n.send(ctx, "AuthT")
			assert.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
		})
	}
}

func TestAuthStrictSignaturesRequire(t *testing.T) {
	n := startNodeWith(t, false, withACL(t, aclYAML, func(c *acl.Config) { c.StrictSignatures = acl.SignRequire }))
	n.topic("AuthT", 1)
	st := n.send(n.signed("pubuser", skPub, time.Now()), "AuthT")
	assert.Equal(t, grpcapi.Code_UNAUTHORIZED, st.GetCode())
	assert.Contains(t, st.GetMessage(), "acl.strict_signatures=require")
}

func TestAuthPluginWithoutHMAC(t *testing.T) {
	n := startNode(t)
	_, err := grpcmod.New(grpcmod.NewConfig(), grpcmod.Deps{Broker: n.b, Auth: []grpcmod.AuthPlugin{{Authenticator: auth.AllowAll{}, Authorizer: auth.AllowAll{}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot check RocketMQ 5 client signatures")
}
