package kernel

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// codeSigner is an auth plugin that refuses everything and signs with the
// request code (auth.RequestSigner).
type codeSigner struct{ keyed bool }

func (codeSigner) Check(context.Context, auth.Request) (auth.Principal, error) {
	return auth.Principal{}, auth.ErrDenied
}
func (codeSigner) Authenticate(context.Context, auth.Request) (auth.Principal, error) {
	return auth.Principal{}, auth.ErrDenied
}
func (s codeSigner) SignRequest(ext map[string]string, _ []byte) bool {
	if s.keyed {
		ext["signed"] = "1.0"
	}
	return s.keyed
}
func (s codeSigner) SignCode(code int32, ext map[string]string, _ []byte) bool {
	if s.keyed {
		ext["signedCode"] = remoting.RequestCodeName(code)
	}
	return s.keyed
}

type codeSignerConfig struct {
	Keyed bool `koanf:"keyed"`
}

type codeSignerProvider struct{}

func (codeSignerProvider) ID() string     { return "fakeacl" }
func (codeSignerProvider) NewConfig() any { return &codeSignerConfig{} }
func (codeSignerProvider) Open(_ context.Context, cfg any, _ auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
	s := codeSigner{keyed: cfg.(*codeSignerConfig).Keyed}
	return s, auth.AllowAll{}, nil
}

func newTestGuard(t *testing.T, section map[string]any) *Guard {
	t.Helper()
	g, err := guardFor(t, map[string]any{"fakeacl": section}, codeSignerProvider{})
	require.NoError(t, err)
	return g
}

// <id>.namesrv_enabled decides whether the name server checks with the
// plugin (off by default, as RocketMQ 4.9's name server checks nothing);
// the broker always does. The key is the Guard's, not the plugin's.
func TestGuardNamesrvOptIn(t *testing.T) {
	for _, tt := range []struct {
		name        string
		give        map[string]any
		wantNamesrv bool
	}{
		{"default", map[string]any{"enabled": true}, false},
		{"opted in", map[string]any{"enabled": true, "namesrv_enabled": true}, true},
		{"opted out", map[string]any{"enabled": true, "namesrv_enabled": "false"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGuard(t, tt.give)
			assert.Len(t, g.Interceptors, 1, "the broker checks")
			assert.Equal(t, tt.wantNamesrv, g.NamesrvChecked())
			r := remoting.NewRouter()
			r.Register(remoting.GetRouteInfoByTopic, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
				return remoting.NewResponse(req, remoting.Success, "")
			})
			g.ApplyNamesrv(r)
			resp := r.Handle(context.Background(), nil, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
			require.NotNil(t, resp)
			want := remoting.Success
			if tt.wantNamesrv {
				want = remoting.NoPermission
			}
			assert.Equal(t, want, resp.Code)
			assert.Len(t, g.Authenticators(), 1)
		})
	}
}

// Sign prefers auth.RequestSigner, which signs the request code.
func TestGuardSignsTheCode(t *testing.T) {
	g := newTestGuard(t, map[string]any{"enabled": true, "keyed": true})
	assert.True(t, g.CanSign())
	req := remoting.NewRequest(remoting.RegisterBroker, nil, nil)
	g.Sign(req)
	assert.Equal(t, "REGISTER_BROKER", req.ExtFields["signedCode"])
	assert.NotContains(t, req.ExtFields, "signed")

	g = newTestGuard(t, map[string]any{"enabled": true})
	assert.False(t, g.CanSign())
}
