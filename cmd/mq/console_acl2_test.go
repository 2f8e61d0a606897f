package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

const (
	acl2RootUser = "root"
	acl2RootPass = "root-secret-0123456789"
)

// acl2ConsoleDev starts mq dev with ACL 2.0 on (the Super user root) and
// its console logging in with ACL accounts.
func acl2ConsoleDev(t *testing.T) (ns, base string) {
	t.Helper()
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(t.TempDir(), "acl2.json"),
		"auth.acl2.init_username=" + acl2RootUser, "auth.acl2.init_password=" + acl2RootPass,
		"console.listen=" + consoleAddr, "console.auth=acl",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, acl2RootUser, acl2RootPass, "") }})
	waitListening(t, consoleAddr)
	return dev.Namesrv, "http://" + consoleAddr
}

func (h *consoleHTTP) login(ak, sk string) {
	h.t.Helper()
	var si sessionInfo
	require.Equal(h.t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {ak}, "secretKey": {sk}}, nil, &si))
	h.csrf = si.CSRF
}

func (h *consoleHTTP) logout() {
	h.t.Helper()
	var si sessionInfo
	require.Equal(h.t, http.StatusOK, h.do("POST", "/api/logout", nil, nil, &si))
	h.csrf = si.CSRF
}

// acl2Users is the users of a view as name/type/status.
func acl2Users(v acl2View) []string {
	out := []string{}
	for _, u := range v.Users {
		out = append(out, u.Username+"/"+u.UserType+"/"+u.UserStatus)
	}
	return out
}

// TestConsoleACL2UsersAndPolicies drives the console's ACL 2.0 page on a
// live mq dev with auth.acl2 on: a Super user logged in creates, lists,
// updates and deletes a user and its policy entries; each change is the
// broker's (mq admin listUser and listAcl see it); passwords are never
// shown; cross-origin writes, writes without the CSRF token, writes of a
// read-only console and deletes without the typed confirmation are
// refused; a Normal user logged in is refused by the broker.
func TestConsoleACL2UsersAndPolicies(t *testing.T) {
	ns, base := acl2ConsoleDev(t)
	root := []string{"--access-key", acl2RootUser, "--secret-key", acl2RootPass}
	h := newConsoleHTTP(t, base)
	var e map[string]string
	assert.Equal(t, http.StatusUnauthorized, h.do("GET", "/api/acl2", nil, nil, &e), "no login")
	h.login(acl2RootUser, acl2RootPass)

	var v acl2View
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2", nil, nil, &v))
	assert.True(t, v.Enabled)
	assert.Equal(t, []string{"root/Super/enable"}, acl2Users(v))
	assert.Empty(t, v.ACLs)

	// Create a user, with the refusals first.
	create := url.Values{"mode": {"create"}, "username": {"app"}, "password": {"app-secret-01"}, "userType": {"Normal"}}
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/acl2/users", create, map[string]string{"Origin": "http://evil.example"}, &e), "cross-origin")
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/acl2/users", create, map[string]string{consoleCSRFHeader: ""}, &e), "no CSRF token")
	var users []userView
	mqJSON(t, ns, &users, append([]string{"listUser"}, root...)...)
	require.Len(t, users, 1, "refused writes made no user")
	var res map[string]any
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/users", create, nil, &res))
	assert.NotEqual(t, http.StatusOK, h.do("POST", "/api/acl2/users", create, nil, &e), "a second create")
	for _, bad := range []url.Values{
		{"mode": {"create"}, "username": {"nopw"}},
		{"mode": {"create"}, "username": {"a:b"}, "password": {"pw-0123456789"}},
		{"mode": {"update"}, "username": {"app"}, "userType": {"Admin"}},
		{"mode": {"update"}, "username": {"app"}, "userStatus": {"paused"}},
		{"mode": {"replace"}, "username": {"app"}},
	} {
		assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/acl2/users", bad, nil, &e), "%v", bad)
	}
	mqJSON(t, ns, &users, append([]string{"getUser", "-u", "app"}, root...)...)
	require.Len(t, users, 1)
	assert.Equal(t, "Normal", users[0].UserType)

	// Policies: create two entries, list them, update one.
	grant := url.Values{"mode": {"create"}, "subject": {"User:app"}, "resources": {"Topic:orders*,Group:g1"}, "actions": {"Pub,Sub"},
		"sourceIps": {"127.0.0.1,10.0.0.0/8"}, "decision": {"Allow"}}
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/acl2/acls", grant, map[string]string{"Origin": "http://evil.example"}, &e), "cross-origin")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/acls", grant, nil, &res))
	for _, bad := range []url.Values{
		{"mode": {"create"}, "subject": {"User:app"}, "resources": {"Topic:x"}, "actions": {"Fly"}},
		{"mode": {"create"}, "subject": {"User:app"}, "resources": {"Topic:x"}, "actions": {"Pub"}, "decision": {"Maybe"}},
		{"mode": {"create"}, "subject": {"User:app"}, "resources": {"Bogus:x"}, "actions": {"Pub"}},
		{"mode": {"create"}, "subject": {""}, "resources": {"Topic:x"}, "actions": {"Pub"}},
		{"mode": {"create"}, "subject": {"User:app"}, "resources": {""}, "actions": {"Pub"}},
	} {
		assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/acl2/acls", bad, nil, &e), "%v", bad)
	}
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2", nil, nil, &v))
	assert.ElementsMatch(t, []string{"app/Normal/enable", "root/Super/enable"}, acl2Users(v))
	require.Len(t, v.ACLs, 2)
	assert.Equal(t, aclEntryView{Broker: v.Broker, Subject: "User:app", PolicyType: "Custom", Resource: "Topic:orders*",
		Actions: []string{"Pub", "Sub"}, SourceIPs: []string{"127.0.0.1", "10.0.0.0/8"}, Decision: "Allow"}, v.ACLs[0])
	assert.Equal(t, "Group:g1", v.ACLs[1].Resource)
	deny := url.Values{"mode": {"update"}, "subject": {"app"}, "resources": {"Group:g1"}, "actions": {"Sub"}, "decision": {"Deny"}}
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/acls", deny, nil, &res))
	var es []aclEntryView
	mqJSON(t, ns, &es, append([]string{"listAcl", "-s", "User:app", "-r", "Group:g1"}, root...)...)
	require.Len(t, es, 1)
	assert.Equal(t, "Deny", es[0].Decision)
	assert.Equal(t, []string{"Sub"}, es[0].Actions)
	assert.Empty(t, es[0].SourceIPs)

	// Update the user: disable it; a listing never carries a password.
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/users", url.Values{"mode": {"update"}, "username": {"app"}, "userStatus": {"disable"}}, nil, &res))
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2?user=app", nil, nil, &v))
	assert.Equal(t, []string{"app/Normal/disable"}, acl2Users(v))
	raw := map[string]any{}
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2", nil, nil, &raw))
	assert.NotContains(t, fmt.Sprint(raw), "app-secret-01")
	assert.NotContains(t, fmt.Sprint(raw), acl2RootPass)
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/users", url.Values{"mode": {"update"}, "username": {"app"}, "userStatus": {"enable"}}, nil, &res))

	// A Normal user logged in is refused by the broker.
	h.logout()
	h.login("app", "app-secret-01")
	assert.Equal(t, http.StatusBadGateway, h.do("POST", "/api/acl2/users", url.Values{"mode": {"create"}, "username": {"mallory"}, "password": {"mallory-pw-1"}}, nil, &e))
	assert.Contains(t, e["error"], "no permission")
	assert.Equal(t, http.StatusBadGateway, h.do("GET", "/api/acl2", nil, nil, &e))
	h.logout()
	h.login(acl2RootUser, acl2RootPass)

	// A read-only console refuses the writes.
	ro := newConsole(ns, false, &adminOpts{output: "json", accessKey: acl2RootUser, secretKey: acl2RootPass}, nil)
	require.NoError(t, ro.Start(context.Background(), "127.0.0.1:0", time.Hour))
	defer ro.Stop(context.Background())
	rh := newConsoleHTTP(t, "http://"+ro.Addr())
	require.Equal(t, http.StatusOK, rh.do("GET", "/api/acl2", nil, nil, &v), "a read-only console reads")
	assert.Len(t, v.Users, 2)
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/acl2/users", url.Values{"mode": {"create"}, "username": {"ro"}, "password": {"ro-secret-01"}}, nil, &e))
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/acl2/acls", grant, nil, &e))
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/acl2/acls/delete", url.Values{"subject": {"User:app"}, "confirm": {"User:app"}}, nil, &e))
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/acl2/users/app/delete", url.Values{"confirm": {"app"}}, nil, &e))

	// Delete an entry, then the user, each with its typed confirmation.
	delEntry := url.Values{"subject": {"User:app"}, "resource": {"Topic:orders*"}, "confirm": {"User:app"}}
	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/acl2/acls/delete", delEntry, nil, &e))
	assert.Contains(t, e["error"], "confirm")
	delEntry.Set("confirm", "Topic:orders*")
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/acl2/acls/delete", delEntry, map[string]string{consoleCSRFHeader: ""}, &e), "no CSRF token")
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/acls/delete", delEntry, nil, &res))
	mqJSON(t, ns, &es, append([]string{"listAcl", "-s", "User:app"}, root...)...)
	require.Len(t, es, 1)
	assert.Equal(t, "Group:g1", es[0].Resource)

	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/acl2/users/app/delete", url.Values{"confirm": {"other"}}, nil, &e))
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/acl2/users/app/delete", url.Values{"confirm": {"app"}}, map[string]string{"Origin": "http://evil.example"}, &e))
	require.Equal(t, http.StatusOK, h.do("POST", "/api/acl2/users/app/delete", url.Values{"confirm": {"app"}}, nil, &res))
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2", nil, nil, &v))
	assert.Equal(t, []string{"root/Super/enable"}, acl2Users(v))
	assert.Empty(t, v.ACLs, "a deleted user's policies go with it")
	mqJSON(t, ns, &users, append([]string{"listUser", "-f", "app"}, root...)...)
	assert.Empty(t, users)
}

// TestConsoleACL2Off: on a cluster without ACL 2.0 the page says so and
// its writes are refused with the reason.
func TestConsoleACL2Off(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	c := newConsole(dev.Namesrv, true, nil, nil)
	require.NoError(t, c.Start(context.Background(), "127.0.0.1:0", time.Hour))
	defer c.Stop(context.Background())
	h := newConsoleHTTP(t, "http://"+c.Addr())
	var v acl2View
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl2", nil, nil, &v))
	assert.False(t, v.Enabled)
	assert.Contains(t, v.Note, "ACL 2.0 is off")
	assert.Empty(t, v.Users)
	var e map[string]string
	assert.Equal(t, http.StatusBadRequest, h.do("POST", "/api/acl2/users", url.Values{"mode": {"create"}, "username": {"app"}, "password": {"app-secret-01"}}, nil, &e))
	assert.Contains(t, e["error"], "ACL 2.0 is off")
}
