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
	"github.com/quivermq/quiver/plugins/auth/acl/acl49test"
)

// TestAdminACL2Runbook is a RocketMQ 5.3 team's ACL runbook through mq
// admin with mqadmin's names and flags, against mq dev with ACL 2.0 on:
// create a user, grant Pub on a topic prefix and Sub on a group, list,
// revoke, disable, delete. Every change is in force for the very next
// request (the store is swapped when the change is written).
func TestAdminACL2Runbook(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mq dev")
	}
	dir := t.TempDir()
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(dir, "acl2.json"),
		"auth.acl2.init_username=root", "auth.acl2.init_password=root-secret-0123456789",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "root", "root-secret-0123456789", "") }})
	ns := dev.Namesrv
	root := []string{"--access-key", "root", "--secret-key", "root-secret-0123456789"}
	app := []string{"--access-key", "app", "--secret-key", "app-secret-01"}
	as := func(who []string, args ...string) []string { return append(args, who...) }

	mqOK(t, ns, as(root, "topic", "create", "--topic", "orders-eu", "--read-queues", "1", "--write-queues", "1")...)
	mqOK(t, ns, as(root, "topic", "create", "--topic", "payments", "--read-queues", "1", "--write-queues", "1")...)

	var done acl2Done
	mqJSON(t, ns, &done, as(root, "createUser", "-u", "app", "-p", "app-secret-01")...)
	assert.Equal(t, []string{dev.Broker}, done.Brokers)
	mqJSON(t, ns, &done, as(root, "createAcl", "-s", "User:app", "-r", "Topic:orders*", "-a", "Pub")...)
	mqJSON(t, ns, &done, as(root, "createAcl", "-s", "User:app", "-r", "Group:g1", "-a", "Sub", "-i", "127.0.0.1,10.0.0.0/8")...)

	var users []userView
	mqJSON(t, ns, &users, as(root, "listUser")...)
	names := []string{}
	for _, u := range users {
		names = append(names, u.Username+"/"+u.UserType+"/"+u.UserStatus)
	}
	assert.ElementsMatch(t, []string{"app/Normal/enable", "root/Super/enable"}, names)
	out := mqOK(t, ns, as(root, "listUser", "--output", "json")...)
	assert.NotContains(t, out, "app-secret-01", "passwords are not listed")
	var es []aclEntryView
	mqJSON(t, ns, &es, as(root, "listAcl", "-s", "User:app")...)
	require.Len(t, es, 2)
	assert.Equal(t, aclEntryView{Broker: dev.Broker, Subject: "User:app", PolicyType: "Custom", Resource: "Topic:orders*", Actions: []string{"Pub"}, SourceIPs: []string{}, Decision: "Allow"}, es[0])
	assert.Equal(t, []string{"127.0.0.1", "10.0.0.0/8"}, es[1].SourceIPs)
	mqJSON(t, ns, &es, as(root, "getAcl", "-s", "User:app")...)
	assert.Len(t, es, 2)

	// Enforced: Pub on the prefix, nothing else.
	mqOK(t, ns, as(app, "message", "send", "--topic", "orders-eu", "--body", "one")...)
	_, err := mqRun(t, ns, as(app, "message", "send", "--topic", "payments", "--body", "no")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "User:app has no permission to access Topic:payments")
	_, err = mqRun(t, ns, as(app, "createUser", "-u", "mallory", "-p", "mallory-pw-1")...)
	require.Error(t, err, "a Normal user without Cluster Update makes no user")

	// Revoke: the next send is refused.
	mqOK(t, ns, as(root, "deleteAcl", "-s", "User:app", "-r", "Topic:orders*")...)
	_, err = mqRun(t, ns, as(app, "message", "send", "--topic", "orders-eu", "--body", "revoked")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no matched policies")
	mqOK(t, ns, as(root, "updateAcl", "-s", "User:app", "-r", "Topic:orders*", "-a", "Pub")...)
	mqOK(t, ns, as(app, "message", "send", "--topic", "orders-eu", "--body", "again")...)

	// Disable, then delete.
	mqOK(t, ns, as(root, "updateUser", "-u", "app", "-s", "disable")...)
	_, err = mqRun(t, ns, as(app, "message", "send", "--topic", "orders-eu", "--body", "disabled")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "User:app is disabled")
	mqOK(t, ns, as(root, "deleteUser", "-u", "app")...)
	_, err = mqRun(t, ns, as(app, "message", "send", "--topic", "orders-eu", "--body", "deleted")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "User:app is not found")
	mqJSON(t, ns, &users, as(root, "listUser", "-f", "app")...)
	assert.Empty(t, users)
	mqJSON(t, ns, &es, as(root, "listAcl")...)
	assert.Empty(t, es, "a deleted user's policies go with it")

	// Unsigned: refused.
	_, err = mqRun(t, ns, "listUser")
	require.Error(t, err)
}

// TestAdminMigrateAuthFromV1: mq admin migrateAuthFromV1 turns 4.9.8's
// sample plain_acl.yml into users and policies on the broker; a second run
// leaves them alone.
func TestAdminMigrateAuthFromV1(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mq dev")
	}
	dir := t.TempDir()
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(dir, "acl2.json"),
		"auth.acl2.init_username=root", "auth.acl2.init_password=root-secret-0123456789",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "root", "root-secret-0123456789", "") }})
	root := []string{"--access-key", "root", "--secret-key", "root-secret-0123456789"}
	v1 := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(v1, []byte(acl49test.Sample), 0o600))
	var res migrateView
	mqJSON(t, dev.Namesrv, &res, append([]string{"migrateAuthFromV1", "-f", v1}, root...)...)
	assert.Equal(t, []migratedUser{{dev.Broker, "RocketMQ", "created Normal"}, {dev.Broker, "rocketmq2", "created Super"}}, res.Users)
	assert.Len(t, res.Notes, 2, "the white lists are not migrated")
	mqJSON(t, dev.Namesrv, &res, append([]string{"migrateAuthFromV1", "-f", v1}, root...)...)
	assert.Equal(t, []migratedUser{{dev.Broker, "RocketMQ", "left alone (exists)"}, {dev.Broker, "rocketmq2", "left alone (exists)"}}, res.Users)
	var es []aclEntryView
	mqJSON(t, dev.Namesrv, &es, append([]string{"getAcl", "-s", "User:RocketMQ"}, root...)...)
	var keys []string
	for _, e := range es {
		keys = append(keys, e.PolicyType+" "+e.Resource+" "+strings.Join(e.Actions, ",")+" "+e.Decision)
	}
	assert.Contains(t, keys, "Custom Topic:topicA Pub,Sub Deny")
	assert.Contains(t, keys, "Default Topic:topicC Pub Deny")
	assert.Contains(t, keys, "Default Group:* Sub Allow")
}
