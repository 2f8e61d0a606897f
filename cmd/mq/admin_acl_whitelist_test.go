package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

// mq admin acl whitelist lists, per broker, the addresses that bypass
// signature checks; it is for admin accounts.
func TestAdminACLWhitelist(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(`globalWhiteRemoteAddresses:
  - 10.20.*.*
accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    whiteRemoteAddress: 192.168.3.0/24
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
`), 0o644))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file}})
	var got []whiteEntry
	mqJSON(t, dev.Namesrv, &got, "acl", "whitelist", "--access-key", "adminKey01", "--secret-key", "adminSecret01")
	assert.Equal(t, []whiteEntry{
		{Broker: dev.Broker, Scope: "global", Pattern: "10.20.*.*"},
		{Broker: dev.Broker, Scope: "account appKey01", Pattern: "192.168.3.0/24"},
	}, got)
	_, err := mqRun(t, dev.Namesrv, "acl", "whitelist", "--access-key", "appKey01", "--secret-key", "appSecret01")
	assert.Error(t, err, "not an admin")
}
