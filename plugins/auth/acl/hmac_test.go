package acl

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
)

func macOf(secret, content string) []byte {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(content))
	return m.Sum(nil)
}

func TestAuthenticateHMAC(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	const dt = "20250309T195445Z"
	good := auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "RocketMQ", Content: []byte(dt), MAC: macOf(skUser, dt)}
	accepted := []struct {
		name string
		give auth.HMACRequest
		want auth.Principal
	}{
		{"good", good, auth.Principal{AccessKey: "RocketMQ"}},
		{"admin", auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "rocketmq2", Content: []byte(dt), MAC: macOf(skAdmin, dt)},
			auth.Principal{AccessKey: "rocketmq2", Admin: true}},
		{"global white list", auth.HMACRequest{RemoteAddr: "10.10.103.7:5"}, auth.Principal{Trusted: true}},
		{"account white list", auth.HMACRequest{RemoteAddr: "192.168.9.3:5", AccessKey: "RocketMQ"},
			auth.Principal{AccessKey: "RocketMQ", Trusted: true}},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.AuthenticateHMAC(context.Background(), tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p)
		})
	}
	refused := []struct {
		name string
		give auth.HMACRequest
		want string
	}{
		{"wrong secret", auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "RocketMQ", Content: []byte(dt), MAC: macOf(skAdmin, dt)}, "Check signature failed for accessKey=RocketMQ"},
		{"other content", auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "RocketMQ", Content: []byte("20250309T195446Z"), MAC: macOf(skUser, dt)}, "Check signature failed"},
		{"no MAC", auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "RocketMQ", Content: []byte(dt)}, "Check signature failed"},
		{"unknown key", auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "nobody", Content: []byte(dt), MAC: macOf(skUser, dt)}, "No acl config for nobody"},
		{"no key", auth.HMACRequest{RemoteAddr: "10.0.0.1:5"}, "No accessKey is configured"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.AuthenticateHMAC(context.Background(), tt.give)
			require.ErrorIs(t, err, auth.ErrUnauthenticated)
			assert.Contains(t, err.Error(), tt.want)
			for _, s := range testSecrets {
				assert.NotContains(t, err.Error(), s)
			}
		})
	}

	a.signMode = SignRequire
	_, err := a.AuthenticateHMAC(context.Background(), good)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "strict_signatures=require")
}
