package auth_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/auth/authtest"
)

func TestAllowAllConformance(t *testing.T) {
	authtest.Run(t, func(*testing.T) (auth.Authenticator, auth.Authorizer) {
		return auth.AllowAll{}, auth.AllowAll{}
	}, authtest.WithRequests(auth.Request{Code: 10, RemoteAddr: "127.0.0.1:1", ExtFields: map[string]string{"topic": "T"}}))
}

func TestAllowAll(t *testing.T) {
	p, err := auth.AllowAll{}.Authenticate(context.Background(), auth.Request{})
	require.NoError(t, err)
	assert.Equal(t, auth.Principal{Trusted: true, Admin: true}, p)
	assert.NoError(t, auth.AllowAll{}.Authorize(context.Background(), auth.Principal{}, auth.Resource{Name: "T"}, auth.Admin))
}
