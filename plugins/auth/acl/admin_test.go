package acl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

const adminYAML = `# Accounts of the test cluster.
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  # the application
  - accessKey: RocketMQ
    secretKey: ` + skUser + `
    defaultTopicPerm: DENY
    topicPerms:
      - topicA=PUB
  - accessKey: rocketmq2
    secretKey: ` + skAdmin + `
    admin: true
`

func TestAccountAdminEditsTheFile(t *testing.T) {
	a, path, _ := newACL(t, adminYAML)
	v0, err := a.Snapshot(ctx)
	require.NoError(t, err)

	// A new account takes effect at once and is in the file.
	white := "192.168.5.*"
	require.NoError(t, a.UpdateAccount(ctx, auth.AccountUpdate{AccessKey: "newUser01", SecretKey: "newSecret01",
		WhiteRemoteAddress: &white, DefaultTopicPerm: "SUB", TopicPerms: []string{"topicX=PUB|SUB"}, GroupPerms: []string{}}))
	_, err = a.Check(ctx, signedWith(remoting.SendMessageV2, map[string]string{"b": "topicX", "a": "PG"}, "newUser01", "newSecret01"))
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	assert.Contains(t, text, "# Accounts of the test cluster.", "comments survive")
	assert.Contains(t, text, "# the application")
	assert.Contains(t, text, "accessKey: newUser01")
	assert.Contains(t, text, "topicX=PUB|SUB")
	assert.Contains(t, text, "whiteRemoteAddress: 192.168.5.*")
	fresh, err := parseRules(data)
	require.NoError(t, err, "the file on disk loads")
	assert.Contains(t, fresh.accounts, "newUser01")
	v1, _ := a.Snapshot(ctx)
	assert.Greater(t, v1.Version.Counter, v0.Version.Counter)

	// Updating merges: fields not given stay, admin is always written.
	require.NoError(t, a.UpdateAccount(ctx, auth.AccountUpdate{AccessKey: "RocketMQ", SecretKey: "rotated-Secret9", Admin: false}))
	snap, _ := a.Snapshot(ctx)
	var user auth.Account
	for _, acc := range snap.Accounts {
		if acc.AccessKey == "RocketMQ" {
			user = acc
		}
	}
	assert.Equal(t, "rotated-Secret9", user.SecretKey)
	assert.Equal(t, []string{"topicA=PUB"}, user.TopicPerms)
	assert.Equal(t, "DENY", user.DefaultTopicPerm)
	_, err = a.Check(ctx, signed(remoting.GetRouteInfoByTopic, map[string]string{"topic": "topicA"}, nil, "RocketMQ"))
	assert.Error(t, err, "the old secret no longer works")

	// Bad input is refused and the file is unchanged.
	before, _ := os.ReadFile(path)
	for _, u := range []auth.AccountUpdate{
		{AccessKey: "short", SecretKey: "longenough1"},
		{AccessKey: "longenough", SecretKey: "short"},
		{AccessKey: "longenough", SecretKey: "longenough1", TopicPerms: []string{"noequals"}},
		{AccessKey: "longenough", SecretKey: "longenough1", DefaultTopicPerm: "WRITE"},
	} {
		err := a.UpdateAccount(ctx, u)
		assert.Error(t, err, "%+v", u)
		if err != nil {
			assert.NotContains(t, err.Error(), "longenough1", "no secret in the error")
		}
	}
	require.Error(t, a.SetGlobalWhiteAddrs(ctx, []string{"300.1.1.1"}))
	after, _ := os.ReadFile(path)
	assert.Equal(t, string(before), string(after))

	// Delete.
	require.NoError(t, a.DeleteAccount(ctx, "newUser01"))
	_, err = a.Check(ctx, signedWith(remoting.SendMessageV2, map[string]string{"b": "topicX", "a": "PG"}, "newUser01", "newSecret01"))
	assert.ErrorContains(t, err, "No acl config for newUser01")
	assert.ErrorIs(t, a.DeleteAccount(ctx, "newUser01"), auth.ErrNotFound)

	// The global white list.
	require.NoError(t, a.SetGlobalWhiteAddrs(ctx, []string{"10.1.0.0/16", "127.0.0.2"}))
	_, err = a.Check(ctx, auth.Request{Code: remoting.DeleteTopicInBroker, RemoteAddr: "10.1.2.3:1", ExtFields: map[string]string{"topic": "T"}})
	assert.NoError(t, err)
	_, err = a.Check(ctx, auth.Request{Code: remoting.DeleteTopicInBroker, RemoteAddr: "10.10.103.1:1", ExtFields: map[string]string{"topic": "T"}})
	assert.Error(t, err, "the old list is gone")
	data, _ = os.ReadFile(path)
	assert.Contains(t, string(data), "10.1.0.0/16")
	assert.NotContains(t, string(data), "10.10.103")

	// No temporary files are left next to the ACL file.
	ents, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.Contains(e.Name(), ".tmp-"), e.Name())
	}
}

func TestAuthorizeAdmin(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	req := func(ak string) auth.Request {
		return signed(remoting.UpdateAndCreateACLConfig, map[string]string{"accessKey": "x"}, nil, ak)
	}
	assert.NoError(t, a.AuthorizeAdmin(ctx, req("rocketmq2")))
	err := a.AuthorizeAdmin(ctx, req("RocketMQ"))
	assert.ErrorIs(t, err, auth.ErrDenied)
	assert.ErrorContains(t, err, "admin required")
	wl := auth.Request{Code: remoting.UpdateAndCreateACLConfig, RemoteAddr: "10.10.103.4:1", ExtFields: map[string]string{"accessKey": "x"}}
	assert.NoError(t, a.AuthorizeAdmin(ctx, wl), "RocketMQ semantics: the global white list skips everything")
	a.strictWhite = true
	assert.Error(t, a.AuthorizeAdmin(ctx, wl))
}

func signedWith(code int32, ext map[string]string, ak, sk string) auth.Request {
	e := map[string]string{}
	for k, v := range ext {
		e[k] = v
	}
	Sign(e, nil, ak, sk, "")
	return auth.Request{Code: code, RemoteAddr: "172.16.0.9:51234", ExtFields: e}
}

// TestAccountAdminConcurrentEdits: edits are serialized, none is lost,
// and checks keep running meanwhile.
func TestAccountAdminConcurrentEdits(t *testing.T) {
	a, path, _ := newACL(t, adminYAML)
	const n = 8
	errs := make(chan error, n+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if _, err := a.Check(ctx, signed(remoting.GetRouteInfoByTopic, map[string]string{"topic": "topicA"}, nil, "RocketMQ")); err != nil {
				errs <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- a.UpdateAccount(ctx, auth.AccountUpdate{AccessKey: fmt.Sprintf("parallel%02d", i), SecretKey: "parallelSecret"})
		}()
	}
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := parseRules(data)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		assert.Contains(t, r.accounts, fmt.Sprintf("parallel%02d", i))
		assert.Contains(t, a.rules.Load().accounts, fmt.Sprintf("parallel%02d", i))
	}
}
