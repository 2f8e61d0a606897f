package acl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// TestWhiteListSemantics: RocketMQ's white lists by default (an account's
// white list lets a wrong signature through and a non-admin delete a
// topic; the global one lets unsigned admin calls through), and with
// acl.strict_white_list admin codes from those addresses need a valid
// signature of an account allowed to send them.
func TestWhiteListSemantics(t *testing.T) {
	del := map[string]string{"topic": "topicB"}
	// RocketMQ (not admin) is white-listed at 192.168.9.*; 10.10.103.* is
	// globally white-listed.
	wrongSig := auth.Request{Code: remoting.DeleteTopicInBroker, RemoteAddr: "192.168.9.7:1",
		ExtFields: map[string]string{"topic": "topicB", "AccessKey": "RocketMQ", "Signature": "wrong"}}
	unsigned := auth.Request{Code: remoting.DeleteTopicInBroker, RemoteAddr: "10.10.103.7:1", ExtFields: del}
	pubWrongSig := auth.Request{Code: remoting.SendMessageV2, RemoteAddr: "192.168.9.7:1",
		ExtFields: map[string]string{"b": "topicB", "a": "PG", "AccessKey": "RocketMQ", "Signature": "wrong"}}
	adminSigned := signed(remoting.DeleteTopicInBroker, del, nil, "rocketmq2")
	adminSigned.RemoteAddr = "10.10.103.7:1"
	userSigned := signed(remoting.DeleteTopicInBroker, del, nil, "RocketMQ")
	userSigned.RemoteAddr = "192.168.9.7:1"

	t.Run("rocketmq semantics", func(t *testing.T) {
		a, _, logs := newACL(t, testYAML)
		for _, req := range []auth.Request{wrongSig, unsigned, pubWrongSig, userSigned} {
			_, err := a.Check(ctx, req)
			assert.NoError(t, err, "code %d from %s", req.Code, req.RemoteAddr)
		}
		// The start-up log names who bypasses signatures.
		out := logs.String()
		assert.Contains(t, out, "white-listed addresses skip signature checks")
		assert.Contains(t, out, "10.10.103.*")
		assert.Contains(t, out, "RocketMQ:192.168.9.*")
		w := a.WhiteLists()
		assert.Equal(t, []string{"10.10.103.*", "192.168.0.{1,2}"}, w.Global)
		assert.Equal(t, map[string]string{"RocketMQ": "192.168.9.*", "rocketmq2": "192.168.1.*"}, w.Accounts)
		assert.False(t, w.Strict)
	})
	t.Run("strict_white_list", func(t *testing.T) {
		a, _, _ := newACL(t, testYAML)
		a.strictWhite = true
		_, err := a.Check(ctx, wrongSig)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Check signature failed for accessKey=RocketMQ")
		assert.Contains(t, err.Error(), "acl.strict_white_list")
		_, err = a.Check(ctx, unsigned)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "No accessKey is configured")
		_, err = a.Check(ctx, userSigned)
		require.Error(t, err, "a valid signature of a non-admin account")
		assert.ErrorIs(t, err, auth.ErrDenied)
		assert.Contains(t, err.Error(), "admin required")
		_, err = a.Check(ctx, adminSigned)
		assert.NoError(t, err, "an admin's signature from a white-listed address")
		// Codes that are not admin codes keep RocketMQ's white list.
		_, err = a.Check(ctx, pubWrongSig)
		assert.NoError(t, err)
		assert.True(t, a.WhiteLists().Strict)
	})
}

func TestWhiteListReloadLogged(t *testing.T) {
	a, path, logs := newACL(t, testYAML)
	writeFile(t, path, strings.Replace(testYAML, "10.10.103.*", "10.99.0.0/16", 1))
	require.NoError(t, a.Reload())
	assert.Contains(t, logs.String(), "10.99.0.0/16")
	assert.Equal(t, "10.99.0.0/16", a.WhiteLists().Global[0])
}
