package acl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

func TestLoadValid(t *testing.T) {
	r, err := parseRules([]byte(testYAML))
	require.NoError(t, err)
	require.Len(t, r.accounts, 3)
	u := r.accounts["RocketMQ"]
	assert.Equal(t, []byte(skUser), u.secretKey)
	assert.False(t, u.admin)
	assert.Equal(t, PermDeny, u.defaultTopic)
	assert.Equal(t, PermSub, u.defaultGroup)
	assert.Equal(t, map[string]byte{
		"topicA": PermDeny, "topicB": PermPub | PermSub, "topicC": PermSub, "topicP": PermPub,
		"%RETRY%groupA": PermDeny, "%RETRY%groupB": PermPub | PermSub, "%RETRY%groupC": PermSub,
	}, u.perms)
	adm := r.accounts["rocketmq2"]
	assert.True(t, adm.admin)
	assert.Nil(t, adm.perms)
	assert.Equal(t, PermDeny, adm.defaultTopic, "an unset default is DENY")
	assert.Equal(t, PermDeny, adm.defaultGroup)
}

func TestLoadJavaSample(t *testing.T) {
	// RocketMQ 4.9's distribution/conf/plain_acl.yml (layout and values),
	// with secrets long enough and a dataVersion as Java's tools write it.
	const java = `globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1700000000000
`
	r, err := parseRules([]byte(java))
	require.NoError(t, err)
	assert.Len(t, r.accounts, 2)
	assert.Equal(t, []byte("12345678"), r.accounts["RocketMQ"].secretKey, "a numeric YAML value is a string")
}

func TestLoadErrors(t *testing.T) {
	const secret = "topsecret-Vb55"
	acct := func(body string) string {
		return "accounts:\n  - accessKey: RocketMQ\n    secretKey: " + secret + "\n" + body
	}
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "empty", give: "", want: []string{"the file is empty"}},
		{name: "comments only", give: "# nothing\n", want: []string{"the file is empty"}},
		{name: "not YAML", give: "accounts: [", want: []string{"yaml:"}},
		{name: "unknown top-level key", give: "globalWhiteRemoteAddress: []\n", want: []string{"field globalWhiteRemoteAddress not found"}},
		{name: "unknown account key", give: acct("    whiteRemoteAdress: 1.2.3.4\n"), want: []string{"field whiteRemoteAdress not found"}},
		{name: "short secret", give: "accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", want: []string{"accounts[0] (accessKey RocketMQ).secretKey: must be longer than 6 characters"}},
		{name: "missing secret", give: "accounts:\n  - accessKey: RocketMQ\n", want: []string{"secretKey: must be longer than 6"}},
		{name: "short access key", give: "accounts:\n  - accessKey: abcdef\n    secretKey: " + secret + "\n", want: []string{"accounts[0].accessKey: must be longer than 6 characters"}},
		{name: "duplicate access key", give: acct("") + "  - accessKey: RocketMQ\n    secretKey: other-secret-1\n", want: []string{"accounts[1] (accessKey RocketMQ): the accessKey is listed twice"}},
		{name: "bad default perm", give: acct("    defaultTopicPerm: ALL\n"), want: []string{"defaultTopicPerm: permission \"ALL\""}},
		{name: "bad topic perm", give: acct("    topicPerms: [topicA]\n"), want: []string{"topicPerms[0]: \"topicA\" is not name=PERM"}},
		{name: "empty topic perm", give: acct("    topicPerms: [topicA=]\n"), want: []string{"topicPerms[0]"}},
		{name: "bad group perm", give: acct("    groupPerms: [g=PUB=SUB]\n"), want: []string{"groupPerms[0]"}},
		{name: "bad white address", give: acct("    whiteRemoteAddress: 192.168.*\n"), want: []string{"whiteRemoteAddress: address \"192.168.*\""}},
		{name: "bad global address", give: "globalWhiteRemoteAddresses: [300.1.1.1]\n", want: []string{"globalWhiteRemoteAddresses"}},
		{name: "several problems", give: acct("    defaultTopicPerm: X\n    defaultGroupPerm: Y\n"), want: []string{"defaultTopicPerm", "defaultGroupPerm"}},
		{name: "secret in a bool", give: "accounts:\n  - accessKey: RocketMQ\n    admin: " + secret + "\n    secretKey: " + secret + "\n", want: []string{"cannot unmarshal"}},
		{name: "secret in a list", give: "accounts:\n  - accessKey: RocketMQ\n    secretKey: [" + secret + "]\n", want: []string{"cannot unmarshal"}},
		{name: "secret as an address", give: acct("    whiteRemoteAddress: " + secret + "\n"), want: []string{"whiteRemoteAddress"}},
		{name: "broken syntax near the secret", give: "accounts:\n  - accessKey: RocketMQ\n    secretKey: \"" + secret + "\n", want: []string{"yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRules([]byte(tt.give))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), secret)
			assert.NotContains(t, err.Error(), secret[:7], "not even yaml's truncated quote")
		})
	}
}

func TestReload(t *testing.T) {
	a, path, logs := newACL(t, testYAML)
	send := signed(remoting.SendMessage, map[string]string{"topic": "topicA"}, nil, "RocketMQ")
	_, err := a.Check(ctx, send)
	require.ErrorIs(t, err, auth.ErrDenied)

	require.NoError(t, a.Reload(), "an unchanged file")

	writeFile(t, path, strings.Replace(testYAML, "topicA=DENY", "topicA=PUB", 1))
	require.NoError(t, a.Reload())
	_, err = a.Check(ctx, send)
	assert.NoError(t, err, "the new rules apply")
	assert.Contains(t, logs.String(), "rules reloaded")

	// A broken edit keeps the last good rules, logs at Error once, and
	// never logs a secret.
	broken := strings.Replace(testYAML, "admin: false", "admin: "+skUser, 1)
	writeFile(t, path, broken)
	err = a.Reload()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), skUser)
	_, err = a.Check(ctx, send)
	assert.NoError(t, err, "the last good rules stay")
	require.Error(t, a.Reload(), "still broken")
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "level=ERROR"), out)
	assert.Contains(t, out, "keeping the last good rules")
	for _, s := range testSecrets {
		assert.NotContains(t, out, s)
	}

	// Removing the file keeps the rules too.
	require.NoError(t, os.Remove(path))
	require.ErrorContains(t, a.Reload(), "no such file")
	_, err = a.Check(ctx, send)
	assert.NoError(t, err)

	// A fixed file loads again; removing an account takes effect.
	writeFile(t, path, strings.Replace(testYAML, "accessKey: RocketMQ", "accessKey: Renamed1", 1))
	require.NoError(t, a.Reload())
	_, err = a.Check(ctx, send)
	assert.ErrorIs(t, err, auth.ErrUnauthenticated)
	assert.EqualError(t, err, "acl: No acl config for RocketMQ")
}

func TestReloadSameSizeSameSecond(t *testing.T) {
	a, path, _ := newACL(t, testYAML)
	send := signed(remoting.SendMessage, map[string]string{"topic": "topicC"}, nil, "RocketMQ")
	_, err := a.Check(ctx, send)
	require.Error(t, err)
	// "topicC=SUB" → "topicC=PUB": same size; force the same mtime.
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(testYAML, "topicC=SUB", "topicC=PUB", 1)), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	require.NoError(t, a.Reload())
	_, err = a.Check(ctx, send)
	assert.NoError(t, err, "a same-size edit within the same mtime is seen (content hash)")
}

func TestReloadPolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeFile(t, path, testYAML)
	logs := &logBuffer{}
	cfg := &Config{File: path, ReloadInterval: 10 * time.Millisecond}
	a, err := New(cfg, auth.Deps{Logger: logs.logger()})
	require.NoError(t, err)
	defer a.Close()

	send := signed(remoting.SendMessage, map[string]string{"topic": "topicA"}, nil, "RocketMQ")
	_, err = a.Check(ctx, send)
	require.Error(t, err)
	writeFile(t, path, strings.Replace(testYAML, "topicA=DENY", "topicA=PUB|SUB", 1))
	require.Eventually(t, func() bool {
		_, err := a.Check(ctx, send)
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)

	writeFile(t, path, "accounts: [")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "level=ERROR") }, 5*time.Second, 5*time.Millisecond)
	_, err = a.Check(ctx, send)
	assert.NoError(t, err, "the last good rules stay")
	require.NoError(t, a.Close())
}
