package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// With ACL on, mq admin signs with --access-key/--secret-key: the admin
// account may create topics and read stats, a plain account may not
// create topics, and an unsigned command is refused.
func TestAdminWithACL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(`accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
`), 0o644))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"acl.enabled=true", "acl.file=" + file, "acl.access_key=adminKey01", "acl.secret_key=adminSecret01",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
	ns := dev.Namesrv
	admin := []string{"--access-key", "adminKey01", "--secret-key", "adminSecret01"}
	app := []string{"--access-key", "appKey01", "--secret-key", "appSecret01"}

	mqOK(t, ns, append([]string{"topic", "create", "--topic", "AclTopic", "--read-queues", "1", "--write-queues", "1"}, admin...)...)
	_, err := mqRun(t, ns, append([]string{"topic", "create", "--topic", "AclTopic2"}, app...)...)
	assert.Error(t, err, "a plain account creates no topic")
	_, err = mqRun(t, ns, "topic", "create", "--topic", "AclTopic3")
	assert.Error(t, err, "unsigned")

	var res map[string]any
	mqJSON(t, ns, &res, append([]string{"message", "send", "--topic", "AclTopic", "--body", "signed", "--keys", "ak"}, app...)...)
	var qs []queueStats
	mqJSON(t, ns, &qs, append([]string{"topic", "status", "--topic", "AclTopic"}, admin...)...)
	require.Len(t, qs, 1)
	assert.EqualValues(t, 1, qs[0].MaxOffset)
	var ms []messageView
	mqJSON(t, ns, &ms, append([]string{"message", "query", "--topic", "AclTopic", "--key", "ak"}, admin...)...)
	require.Len(t, ms, 1)
	var rt map[string]map[string]string
	mqJSON(t, ns, &rt, append([]string{"broker", "status"}, admin...)...)
	assert.NotEmpty(t, rt[dev.Broker])
	// Signed as the admin, an unknown group is reported as unknown (exit
	// 1), not refused for permissions.
	out := mqFail(t, ns, 1, append([]string{"dlq", "list", "--group", "NoGroup"}, admin...)...)
	assert.Contains(t, out, "NoGroup")
	assert.NotContains(t, strings.ToLower(out), "permission")
}
