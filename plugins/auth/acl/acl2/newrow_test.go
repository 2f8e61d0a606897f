package acl2_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// declared is an auth plugin with only the declared interfaces, as the
// guard sees a third-party one: the account is the AccessKey field and
// may publish to topic T only.
type declared struct{}

func (declared) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	if ak := req.ExtFields["AccessKey"]; ak != "" {
		return auth.Principal{AccessKey: ak}, nil
	}
	return auth.Principal{}, auth.ErrUnauthenticated
}

func (declared) Authorize(_ context.Context, _ auth.Principal, res auth.Resource, act auth.Action) error {
	if res == (auth.Resource{Name: "T"}) && act == auth.Pub {
		return nil
	}
	return fmt.Errorf("%w: %d on %q", auth.ErrDenied, act, res.Name)
}

func (declared) ID() string     { return "declared" }
func (declared) NewConfig() any { return &struct{}{} }
func (declared) Open(context.Context, any, auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
	return declared{}, declared{}, nil
}

// TestNewRowReachesEveryReader: a request code added as one row of the
// request-code table (core/remoting codeRows) is named by it (what `mq
// admin` and the logs print), and decided by its rule in the kernel
// guard, ACL 1.0 and ACL 2.0; before the row, every one of them refuses
// the code.
func TestNewRowReachesEveryReader(t *testing.T) {
	const code int32 = 4999
	ctx := context.Background()
	plan, err := kernel.NewPlan(config.FromMap(map[string]any{"transports": []string{}, "declared": map[string]any{"enabled": true}}),
		kernel.Spec{Plugins: kernel.Plugins{Auth: []auth.Provider{declared{}}}})
	require.NoError(t, err)
	g, err := kernel.NewGuard(fxtest.NewLifecycle(t), plan, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	r := remoting.NewRouter()
	r.Register(code, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, remoting.Success, "")
	})
	g.Apply(r)
	guard := func(topic string) int32 {
		return r.Handle(ctx, nil, remoting.NewRequest(code, map[string]string{"AccessKey": "alice", "topic": topic}, nil)).Code
	}
	v2 := newPlugin(t, acl2.AuditOff, nil, allow("Topic:T", "Pub"))

	assert.Equal(t, "UNKNOWN_4999", remoting.RequestCodeName(code))
	assert.Equal(t, remoting.NoPermission, guard("T"), "guard without the row")
	_, _, err = acl.Required(ctx, auth.Request{Code: code, ExtFields: map[string]string{"topic": "T"}})
	require.ErrorIs(t, err, auth.ErrDenied, "ACL 1.0 without the row")
	assert.ErrorIs(t, check(v2, code, map[string]string{"topic": "T"}, ""), auth.ErrDenied, "ACL 2.0 without the row")

	t.Cleanup(remoting.AddCodeForTest(remoting.CodeInfo{
		Code: code, Name: "QUIVER_TEST_PUBLISH", From: remoting.Quiver, ServedBy: remoting.RoleBroker,
		Auth: remoting.AuthRule{Kind: remoting.AuthResources, Needs: []remoting.AuthSource{{From: remoting.FromHeader, Path: "topic", Perm: auth.Pub}}},
	}))

	assert.Equal(t, "QUIVER_TEST_PUBLISH", remoting.RequestCodeName(code))
	assert.Equal(t, remoting.Success, guard("T"), "guard: PUB on T")
	assert.Equal(t, remoting.NoPermission, guard("U"), "guard: no PUB on U")
	rule, needs, err := acl.Required(ctx, auth.Request{Code: code, ExtFields: map[string]string{"topic": "T"}})
	require.NoError(t, err)
	assert.Equal(t, "QUIVER_TEST_PUBLISH", rule.Name())
	assert.Equal(t, []acl.Need{{Resource: auth.Resource{Name: "T"}, Action: auth.Pub}}, needs, "ACL 1.0")
	_, ok := acl.RuleFor(code)
	assert.True(t, ok, "ACL 1.0's table (docs/SECURITY.md) lists it")
	assert.NoError(t, check(v2, code, map[string]string{"topic": "T"}, ""), "ACL 2.0: Pub on Topic:T")
	assert.ErrorIs(t, check(v2, code, map[string]string{"topic": "U"}, ""), auth.ErrDenied, "ACL 2.0: nothing on U")
}
