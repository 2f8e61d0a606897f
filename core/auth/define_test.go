package auth_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
)

type tokenConfig struct{ Tokens map[string]string }

// TestDefine: Open hands its function a *C: the defaults for nil, the
// caller's own for a *C; another type is ErrBadConfig naming the type
// wanted, and the function is not called.
func TestDefine(t *testing.T) {
	var got *tokenConfig
	calls := 0
	d := auth.Define("token", func() *tokenConfig { return &tokenConfig{} },
		func(_ context.Context, c *tokenConfig, _ auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
			got, calls = c, calls+1
			return auth.AllowAll{}, auth.AllowAll{}, nil
		})
	var p auth.Provider = d
	assert.Equal(t, "token", p.ID())
	assert.Equal(t, &tokenConfig{}, p.NewConfig())
	ctx := context.Background()

	an, az, err := p.Open(ctx, nil, auth.Deps{})
	require.NoError(t, err)
	assert.NotNil(t, an)
	assert.NotNil(t, az)
	assert.Equal(t, &tokenConfig{}, got, "nil means the defaults")
	mine := &tokenConfig{Tokens: map[string]string{"alice": "secret-1"}}
	_, _, err = p.Open(ctx, mine, auth.Deps{})
	require.NoError(t, err)
	assert.Same(t, mine, got)

	an, az, err = p.Open(ctx, struct{}{}, auth.Deps{})
	assert.Nil(t, an)
	assert.Nil(t, az)
	assert.ErrorIs(t, err, auth.ErrBadConfig)
	assert.EqualError(t, err, "auth.token: config is struct {}, want *auth_test.tokenConfig: auth: bad config")
	assert.Equal(t, 2, calls)
}
