package kernel

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// declaredOnly is an auth plugin with only the declared interfaces: the
// account is the AccessKey field; alice may publish and subscribe on
// topic T with group G, admin is an admin, broker a cluster member.
type declaredOnly struct{}

func (declaredOnly) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	switch ak := req.ExtFields["AccessKey"]; ak {
	case "alice":
		return auth.Principal{AccessKey: ak}, nil
	case "admin":
		return auth.Principal{AccessKey: ak, Admin: true}, nil
	case "broker":
		return auth.Principal{AccessKey: ak, Cluster: true}, nil
	}
	return auth.Principal{}, fmt.Errorf("%w: unknown account", auth.ErrUnauthenticated)
}

func (declaredOnly) Authorize(_ context.Context, p auth.Principal, res auth.Resource, act auth.Action) error {
	if p.Admin {
		return nil
	}
	if act != auth.Admin && (res == auth.Resource{Name: "T"} || res == auth.Resource{Name: "%RETRY%G", IsGroup: true}) {
		return nil
	}
	return fmt.Errorf("%w: %d on %q", auth.ErrDenied, act, res.Name)
}

type declaredProvider struct{}

func (declaredProvider) ID() string     { return "declared" }
func (declaredProvider) NewConfig() any { return &struct{}{} }
func (declaredProvider) Open(context.Context, any, auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
	return declaredOnly{}, declaredOnly{}, nil
}

// A plugin with only auth.Authenticator and auth.Authorizer is enough:
// the guard authenticates every request and authorizes what its code
// needs (guard_needs.go).
func TestGuardDeclaredInterfaces(t *testing.T) {
	g, err := guardFor(t, map[string]any{"declared": map[string]any{"enabled": true}}, declaredProvider{})
	require.NoError(t, err)
	require.Len(t, g.Interceptors, 1)
	r := remoting.NewRouter()
	ok := func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendReplyMessage, remoting.SendReplyMessageV2, remoting.PullMessage, remoting.HeartBeat, remoting.RegisterBroker, remoting.UpdateAndCreateTopic,
		remoting.GetTopicStatsInfo, remoting.GetAllTopicConfig, remoting.CheckTransactionState, 4242} {
		r.Register(code, ok)
	}
	g.Apply(r)

	tests := []struct {
		name string
		code int32
		ext  map[string]string
		want int32
	}{
		{"send to a permitted topic", remoting.SendMessage, map[string]string{"AccessKey": "alice", "topic": "T"}, remoting.Success},
		{"send v2 names the topic b", remoting.SendMessageV2, map[string]string{"AccessKey": "alice", "b": "T"}, remoting.Success},
		{"send to another topic", remoting.SendMessage, map[string]string{"AccessKey": "alice", "topic": "U"}, remoting.NoPermission},
		{"reply to a permitted topic", remoting.SendReplyMessage, map[string]string{"AccessKey": "alice", "topic": "T"}, remoting.Success},
		{"reply v2 names the topic b", remoting.SendReplyMessageV2, map[string]string{"AccessKey": "alice", "b": "T"}, remoting.Success},
		{"reply to another topic", remoting.SendReplyMessageV2, map[string]string{"AccessKey": "alice", "b": "U"}, remoting.NoPermission},
		{"send naming no topic", remoting.SendMessage, map[string]string{"AccessKey": "alice"}, remoting.NoPermission},
		{"unknown account", remoting.SendMessage, map[string]string{"AccessKey": "mallory", "topic": "T"}, remoting.NoPermission},
		{"pull with a permitted group", remoting.PullMessage, map[string]string{"AccessKey": "alice", "topic": "T", "consumerGroup": "G"}, remoting.Success},
		{"pull with another group", remoting.PullMessage, map[string]string{"AccessKey": "alice", "topic": "T", "consumerGroup": "H"}, remoting.NoPermission},
		{"heartbeat needs a valid sender", remoting.HeartBeat, map[string]string{"AccessKey": "alice"}, remoting.Success},
		{"heartbeat of nobody", remoting.HeartBeat, nil, remoting.NoPermission},
		{"an unlisted code needs admin", remoting.UpdateAndCreateTopic, map[string]string{"AccessKey": "alice", "topic": "T"}, remoting.NoPermission},
		{"admin may", remoting.UpdateAndCreateTopic, map[string]string{"AccessKey": "admin", "topic": "T"}, remoting.Success},
		{"register broker needs a cluster member", remoting.RegisterBroker, map[string]string{"AccessKey": "admin"}, remoting.NoPermission},
		{"cluster member registers", remoting.RegisterBroker, map[string]string{"AccessKey": "broker"}, remoting.Success},
		// What the request-code table says (core/remoting codeRows), as ACL does.
		{"send v2 checks b, not a topic field beside it", remoting.SendMessageV2, map[string]string{"AccessKey": "alice", "topic": "T", "b": "U"}, remoting.NoPermission},
		{"topic stats need SUB on the topic", remoting.GetTopicStatsInfo, map[string]string{"AccessKey": "alice", "topic": "T"}, remoting.Success},
		{"topic stats of another topic", remoting.GetTopicStatsInfo, map[string]string{"AccessKey": "alice", "topic": "U"}, remoting.NoPermission},
		{"a slave copies from its master", remoting.GetAllTopicConfig, map[string]string{"AccessKey": "broker"}, remoting.Success},
		{"an account may not copy it", remoting.GetAllTopicConfig, map[string]string{"AccessKey": "alice"}, remoting.NoPermission},
		{"a client-served code is refused, admin too", remoting.CheckTransactionState, map[string]string{"AccessKey": "admin"}, remoting.NoPermission},
		{"a code without a row is refused, admin too", 4242, map[string]string{"AccessKey": "admin"}, remoting.NoPermission},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.Handle(context.Background(), nil, remoting.NewRequest(tt.code, tt.ext, nil))
			require.NotNil(t, resp)
			assert.Equal(t, tt.want, resp.Code, "remark %q", resp.Remark)
			if tt.want == remoting.NoPermission {
				assert.NotEmpty(t, resp.Remark, "a refusal says why")
			}
		})
	}

	// The process's own credential passes without the plugin.
	req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{}, nil)
	g.Sign(req)
	assert.Equal(t, remoting.Success, r.Handle(context.Background(), nil, req).Code)
}

type mapConfig struct {
	Tokens map[string]string `koanf:"tokens"`
}

type mapProvider struct{ got *mapConfig }

func (mapProvider) ID() string     { return "mapped" }
func (mapProvider) NewConfig() any { return &mapConfig{} }
func (p mapProvider) Open(_ context.Context, cfg any, _ auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
	*p.got = *cfg.(*mapConfig)
	return declaredOnly{}, declaredOnly{}, nil
}

// A plugin's section is decoded with its nested keys (a map field), less
// the guard's own enabled and namesrv_enabled.
func TestGuardDecodesNestedKeys(t *testing.T) {
	got := &mapConfig{}
	_, err := guardFor(t, map[string]any{"mapped": map[string]any{"enabled": true, NamesrvKey: false, "tokens": map[string]any{"alice": "a-token", "bob": "b-token"}}}, mapProvider{got: got})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"alice": "a-token", "bob": "b-token"}, got.Tokens)
}
