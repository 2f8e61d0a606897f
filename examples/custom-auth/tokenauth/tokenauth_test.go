package tokenauth_test

import (
	"testing"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/auth/authtest"
	"github.com/quivermq/quiver/examples/custom-auth/tokenauth"
)

const aliceToken = "alice-token-1"

func TestConformance(t *testing.T) {
	authtest.Run(t, func(t *testing.T) (auth.Authenticator, auth.Authorizer) {
		a, err := tokenauth.New(&tokenauth.Config{
			Tokens: map[string]string{"alice": aliceToken, "root": "root-token-1"},
			Topics: map[string][]string{"alice": {"Orders", "G"}},
			Admins: []string{"root"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return a, a
	}, authtest.Secrets(aliceToken, "root-token-1"),
		authtest.WithRequests(auth.Request{Code: 10, ExtFields: map[string]string{"AccessKey": "alice", "SecurityToken": aliceToken, "topic": "Orders"}}))
}
