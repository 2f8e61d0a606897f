package acl2_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

const (
	rootUser = "root"
	rootPass = "root-password-0123456789"
)

// server is a router guarded by the kernel's guard with ACL 2.0 (and
// optionally ACL 1.0) on, served over TCP on 127.0.0.1, with a send
// handler that answers SUCCESS.
type server struct {
	addr  string
	file  string
	guard *kernel.Guard
	c     *remoting.Client
	sends int
}

func startServer(t *testing.T, section map[string]any, more map[string]any) *server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config", "acl2.json")
	sec := map[string]any{"enabled": true, "file": file, "init_username": rootUser, "init_password": rootPass}
	for k, v := range section {
		sec[k] = v
	}
	authSec := map[string]any{"acl2": sec}
	for k, v := range more {
		authSec[k] = v
	}
	plan, err := kernel.NewPlan(config.FromMap(map[string]any{"transports": []string{}, "auth": authSec}),
		kernel.Spec{Plugins: kernel.Plugins{Auth: []auth.Provider{acl2.NewProvider(), acl.NewProvider()}}})
	require.NoError(t, err)
	lc := fxtest.NewLifecycle(t)
	g, err := kernel.NewGuard(lc, plan, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	lc.RequireStart()
	t.Cleanup(lc.RequireStop)
	s := &server{file: file, guard: g}
	r := remoting.NewRouter()
	g.Apply(r)
	ok := func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		s.sends++
		return remoting.NewResponse(req, remoting.Success, "")
	}
	for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.PullMessage, remoting.HeartBeat, remoting.UpdateAndCreateTopic} {
		r.Register(code, ok)
	}
	ln, err := tcp.Listen(context.Background(), "127.0.0.1:0", tcp.NewConfig(), 0)
	require.NoError(t, err)
	s.addr = ln.Addr()
	srv := remoting.NewServer(r, nil, remoting.ServerOptions{})
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	s.c = remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return tcp.NewConn(nc, tcp.NewConfig(), 0), nil
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { s.c.Close() })
	return s
}

// as sends code signed by user (unsigned when user is "").
func (s *server) as(t *testing.T, user, pass string, code int32, ext map[string]string, body any) *remoting.Command {
	t.Helper()
	if ext == nil {
		ext = map[string]string{}
	}
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(t, err)
	}
	req := remoting.NewRequest(code, ext, raw)
	if user != "" {
		acl.Sign(req.ExtFields, req.Body, user, pass, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.c.Invoke(ctx, s.addr, req)
	require.NoError(t, err)
	return resp
}

func (s *server) root(t *testing.T, code int32, ext map[string]string, body any) *remoting.Command {
	t.Helper()
	return s.as(t, rootUser, rootPass, code, ext, body)
}

func mustOK(t *testing.T, resp *remoting.Command) {
	t.Helper()
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

var authCodes = []int32{
	remoting.AuthCreateUser, remoting.AuthUpdateUser, remoting.AuthDeleteUser, remoting.AuthGetUser, remoting.AuthListUser,
	remoting.AuthCreateACL, remoting.AuthUpdateACL, remoting.AuthDeleteACL, remoting.AuthGetACL, remoting.AuthListACL,
}

// craftedAuth is a plausible frame of each AUTH_* code.
func craftedAuth(code int32) (map[string]string, any) {
	acl := map[string]any{"subject": "User:victim", "policies": []any{map[string]any{"policyType": "Custom",
		"entries": []any{map[string]any{"resource": "*", "actions": []string{"All"}, "decision": "Allow"}}}}}
	switch code {
	case remoting.AuthCreateUser, remoting.AuthUpdateUser:
		return map[string]string{"username": "mallory"}, map[string]string{"username": "mallory", "password": "pw-12345678", "userType": "Super"}
	case remoting.AuthDeleteUser, remoting.AuthGetUser:
		return map[string]string{"username": "victim"}, nil
	case remoting.AuthListUser:
		return map[string]string{"filter": ""}, nil
	case remoting.AuthCreateACL, remoting.AuthUpdateACL:
		return map[string]string{"subject": "User:victim"}, acl
	case remoting.AuthDeleteACL:
		return map[string]string{"subject": "User:victim", "resource": "Topic:t"}, nil
	case remoting.AuthGetACL:
		return map[string]string{"subject": "User:victim"}, nil
	}
	return map[string]string{"subjectFilter": ""}, nil
}

// TestAuthCodesWire: every AUTH_* code is Java's: create, update, get,
// list, delete users and ACLs with Java's headers and JSON bodies.
func TestAuthCodesWire(t *testing.T) {
	s := startServer(t, nil, nil)
	mustOK(t, s.root(t, remoting.AuthCreateUser, map[string]string{"username": "app"}, map[string]string{"password": "app-secret-1", "userType": "Normal"}))
	resp := s.root(t, remoting.AuthCreateUser, map[string]string{"username": "app"}, map[string]string{"password": "x"})
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, "The user is existed", resp.Remark)
	resp = s.root(t, remoting.AuthCreateUser, map[string]string{}, map[string]string{"password": "x"})
	assert.EqualValues(t, 29, resp.Code)
	assert.Equal(t, "The username is blank", resp.Remark)

	resp = s.root(t, remoting.AuthGetUser, map[string]string{"username": "app"}, nil)
	mustOK(t, resp)
	assert.JSONEq(t, `{"username":"app","password":"app-secret-1","userType":"Normal","userStatus":"enable"}`, string(resp.Body))
	resp = s.root(t, remoting.AuthGetUser, map[string]string{"username": "ghost"}, nil)
	mustOK(t, resp)
	assert.Empty(t, resp.Body, "an unknown user: SUCCESS without a body, as Java")

	mustOK(t, s.root(t, remoting.AuthUpdateUser, map[string]string{"username": "app"}, map[string]string{"userStatus": "disable"}))
	resp = s.root(t, remoting.AuthListUser, map[string]string{"filter": "ap"}, nil)
	mustOK(t, resp)
	assert.JSONEq(t, `[{"username":"app","password":"app-secret-1","userType":"Normal","userStatus":"disable"}]`, string(resp.Body))
	resp = s.root(t, remoting.AuthUpdateUser, map[string]string{"username": "ghost"}, map[string]string{"password": "x"})
	assert.Equal(t, "The user is not exist", resp.Remark)

	aclBody := map[string]any{"subject": "User:app", "policies": []any{map[string]any{"policyType": "Custom", "entries": []any{
		map[string]any{"resource": "Topic:orders*", "actions": []string{"Pub"}, "sourceIps": []string{"127.0.0.1"}, "decision": "Allow"},
		map[string]any{"resource": "Group:g1", "actions": []string{"Sub"}, "decision": "Allow"}}}}}
	mustOK(t, s.root(t, remoting.AuthCreateACL, map[string]string{"subject": "User:app"}, aclBody))
	resp = s.root(t, remoting.AuthCreateACL, map[string]string{"subject": "User:ghost"}, map[string]any{"policies": aclBody["policies"]})
	assert.Equal(t, "The subject of User:ghost is not exist.", resp.Remark)
	mustOK(t, s.root(t, remoting.AuthUpdateACL, map[string]string{"subject": "User:app"}, map[string]any{"policies": []any{map[string]any{"policyType": "Custom",
		"entries": []any{map[string]any{"resource": "Group:g1", "actions": []string{"Sub", "Get"}, "decision": "Allow"}}}}}))
	resp = s.root(t, remoting.AuthGetACL, map[string]string{"subject": "User:app"}, nil)
	mustOK(t, resp)
	assert.JSONEq(t, `{"subject":"User:app","policies":[{"policyType":"Custom","entries":[
		{"resource":"Topic:orders*","actions":["Pub"],"sourceIps":["127.0.0.1"],"decision":"Allow"},
		{"resource":"Group:g1","actions":["Sub","Get"],"decision":"Allow"}]}]}`, string(resp.Body))
	resp = s.root(t, remoting.AuthListACL, map[string]string{"subjectFilter": "app", "resourceFilter": "Group"}, nil)
	mustOK(t, resp)
	assert.JSONEq(t, `[{"subject":"User:app","policies":[{"policyType":"Custom","entries":[{"resource":"Group:g1","actions":["Sub","Get"],"decision":"Allow"}]}]}]`, string(resp.Body))
	mustOK(t, s.root(t, remoting.AuthDeleteACL, map[string]string{"subject": "User:app", "resource": "Group:g1"}, nil))
	resp = s.root(t, remoting.AuthGetACL, map[string]string{"subject": "User:app"}, nil)
	assert.NotContains(t, string(resp.Body), "Group:g1")
	mustOK(t, s.root(t, remoting.AuthDeleteACL, map[string]string{"subject": "User:app"}, nil))
	resp = s.root(t, remoting.AuthDeleteACL, map[string]string{"subject": "User:app"}, nil)
	assert.Equal(t, "The acl is not exist.", resp.Remark)
	mustOK(t, s.root(t, remoting.AuthDeleteUser, map[string]string{"username": "app"}, nil))
	mustOK(t, s.root(t, remoting.AuthDeleteUser, map[string]string{"username": "app"}, nil))
	resp = s.root(t, remoting.AuthListUser, nil, nil)
	assert.JSONEq(t, `[{"username":"root","password":"`+rootPass+`","userType":"Super","userStatus":"enable"}]`, string(resp.Body))

	// Durable: a new store reads what was acknowledged.
	st, err := acl2.OpenStore(s.file)
	require.NoError(t, err)
	_, ok := st.GetUser("app")
	assert.False(t, ok)
	_, ok = st.GetUser(rootUser)
	assert.True(t, ok)
}

// TestAuthCodesRefusedWithoutTheRight: crafted frames of every AUTH_*
// code from an unsigned client, an unknown user, a wrong password, a
// user without Cluster Update/Get, a user with Get only (changes) and a
// disabled user are refused before anything changes; a Normal user with
// Cluster Update cannot create or raise a Super user.
func TestAuthCodesRefusedWithoutTheRight(t *testing.T) {
	s := startServer(t, nil, nil)
	mk := func(name string, entries ...map[string]any) {
		mustOK(t, s.root(t, remoting.AuthCreateUser, map[string]string{"username": name}, map[string]string{"password": name + "-pw-123"}))
		if len(entries) > 0 {
			mustOK(t, s.root(t, remoting.AuthCreateACL, map[string]string{"subject": "User:" + name},
				map[string]any{"policies": []any{map[string]any{"policyType": "Custom", "entries": entries}}}))
		}
	}
	mk("victim", map[string]any{"resource": "Topic:t", "actions": []string{"Pub"}, "decision": "Allow"})
	mk("nobody")
	mk("pubber", map[string]any{"resource": "*", "actions": []string{"Pub", "Sub"}, "decision": "Allow"})
	mk("reader", map[string]any{"resource": "Cluster:*", "actions": []string{"Get"}, "decision": "Allow"})
	mk("denied", map[string]any{"resource": "Cluster:*", "actions": []string{"All"}, "decision": "Allow"},
		map[string]any{"resource": "Cluster:DefaultCluster", "actions": []string{"Update", "Get"}, "decision": "Deny"})
	mk("operator", map[string]any{"resource": "Cluster:DefaultCluster", "actions": []string{"Update", "Get"}, "decision": "Allow"})
	mk("off", map[string]any{"resource": "*", "actions": []string{"All"}, "decision": "Allow"})
	mustOK(t, s.root(t, remoting.AuthUpdateUser, map[string]string{"username": "off"}, map[string]string{"userStatus": "disable"}))
	before := s.root(t, remoting.AuthListACL, nil, nil).Body
	beforeUsers := s.root(t, remoting.AuthListUser, nil, nil).Body

	type caller struct{ name, user, pass string }
	callers := []caller{
		{"unsigned", "", ""}, {"unknown user", "ghost", "ghost-pw-123"}, {"wrong password", "nobody", "wrong"},
		{"no policy", "nobody", "nobody-pw-123"}, {"Pub and Sub on everything", "pubber", "pubber-pw-123"},
		{"Cluster Deny over Cluster:*", "denied", "denied-pw-123"}, {"disabled", "off", "off-pw-123"},
	}
	for _, code := range authCodes {
		ext, body := craftedAuth(code)
		for _, c := range callers {
			resp := s.as(t, c.user, c.pass, code, copyExt(ext), body)
			assert.Equal(t, remoting.NoPermission, resp.Code, "%s by %s: %q", remoting.RequestCodeName(code), c.name, resp.Remark)
			assert.True(t, strings.HasPrefix(resp.Remark, "acl2: "), "%s by %s: %q", remoting.RequestCodeName(code), c.name, resp.Remark)
		}
		// Get on the cluster reads, but changes nothing.
		resp := s.as(t, "reader", "reader-pw-123", code, copyExt(ext), body)
		if code == remoting.AuthGetUser || code == remoting.AuthListUser || code == remoting.AuthGetACL || code == remoting.AuthListACL {
			assert.Equal(t, remoting.Success, resp.Code, "%s by reader: %q", remoting.RequestCodeName(code), resp.Remark)
		} else {
			assert.Equal(t, remoting.NoPermission, resp.Code, "%s by reader: %q", remoting.RequestCodeName(code), resp.Remark)
		}
	}
	assert.JSONEq(t, string(before), string(s.root(t, remoting.AuthListACL, nil, nil).Body), "no ACL changed")
	assert.JSONEq(t, string(beforeUsers), string(s.root(t, remoting.AuthListUser, nil, nil).Body), "no user changed")

	// Cluster Update is not enough to make or touch a Super user.
	resp := s.as(t, "operator", "operator-pw-123", remoting.AuthCreateUser, map[string]string{"username": "mallory"}, map[string]string{"password": "pw-1234567", "userType": "Super"})
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "The super user can only be create by super user", resp.Remark)
	resp = s.as(t, "operator", "operator-pw-123", remoting.AuthUpdateUser, map[string]string{"username": "victim"}, map[string]string{"userType": "Super"})
	assert.Equal(t, "The super user can only be update by super user", resp.Remark)
	resp = s.as(t, "operator", "operator-pw-123", remoting.AuthDeleteUser, map[string]string{"username": rootUser}, nil)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	resp = s.as(t, "operator", "operator-pw-123", remoting.AuthUpdateUser, map[string]string{"username": rootUser}, map[string]string{"password": "taken-over"})
	assert.Equal(t, remoting.NoPermission, resp.Code)
	mustOK(t, s.as(t, "operator", "operator-pw-123", remoting.AuthCreateUser, map[string]string{"username": "helper"}, map[string]string{"password": "pw-1234567"}))
}

func copyExt(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
