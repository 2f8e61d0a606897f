package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// The topic and group the authz accounts have permissions on.
const (
	authzTopic = "AuthzT"
	authzGroup = "AuthzG"
)

// authzACL has one account per identity of the table test.
const authzACL = `accounts:
  - accessKey: noperm01
    secretKey: nopermSecret01
  - accessKey: subonly1
    secretKey: subonlySecret1
    topicPerms: [AuthzT=SUB]
    groupPerms: [AuthzG=SUB]
  - accessKey: pubonly1
    secretKey: pubonlySecret1
    topicPerms: [AuthzT=PUB]
    groupPerms: [AuthzG=PUB]
  - accessKey: admin001
    secretKey: adminSecret01
    admin: true
  - accessKey: broker01
    secretKey: brokerSecret01
    role: broker
`

// identity is who sends a request in the table test.
type identity struct {
	name, ak, sk   string
	admin, cluster bool
	perms          map[auth.Action]bool // what it holds on authzTopic and authzGroup
}

var identities = []identity{
	{name: "unsigned"},
	{name: "no-permission", ak: "noperm01", sk: "nopermSecret01"},
	{name: "SUB-only", ak: "subonly1", sk: "subonlySecret1", perms: map[auth.Action]bool{auth.Sub: true, auth.Any: true}},
	{name: "PUB-only", ak: "pubonly1", sk: "pubonlySecret1", perms: map[auth.Action]bool{auth.Pub: true, auth.Any: true}},
	{name: "admin", ak: "admin001", sk: "adminSecret01", admin: true},
	{name: "broker role", ak: "broker01", sk: "brokerSecret01", cluster: true},
}

// allowed is what the table says about id sending a request built by
// authzRequest for r.
func (id identity) allowed(r acl.Rule) bool {
	if id.ak == "" {
		return false
	}
	switch r.Kind {
	case acl.Public, acl.Listed:
		return true
	case acl.Resources:
		if id.admin {
			return true // an admin account listing no perms has them all
		}
		for _, s := range r.Needs {
			if !id.perms[s.Perm] {
				return false
			}
		}
		return true
	case acl.AdminOnly:
		return id.admin
	case acl.AdminOrCluster:
		return id.admin || id.cluster
	case acl.ClusterOnly:
		return id.cluster
	}
	return false
}

func (id identity) sign(req *remoting.Command) {
	if id.ak != "" {
		acl.Sign(req.ExtFields, req.Body, id.ak, id.sk, "")
	}
}

// authzRequest builds a request for r naming authzTopic and authzGroup
// wherever r reads a topic or group, and the message at offset wherever
// it reads a stored message.
func authzRequest(r acl.Rule, offset int64) *remoting.Command {
	ext := map[string]string{}
	var body map[string]any
	for _, s := range r.Needs {
		name := authzTopic
		if s.Group {
			name = authzGroup
		}
		switch s.From {
		case acl.Header:
			ext[s.Path] = name
		case acl.Stored:
			ext[s.Path] = strconv.FormatInt(offset, 10)
		case acl.Body:
			if body == nil {
				body = map[string]any{}
			}
			setPath(body, strings.Split(s.Path, "."), name)
		}
	}
	req := remoting.NewRequest(r.Code, ext, nil)
	if body != nil {
		req.Body, _ = json.Marshal(body)
	}
	return req
}

// setPath sets path to v in m; "key[]" is a list of one object.
func setPath(m map[string]any, path []string, v string) {
	key, each := strings.CutSuffix(path[0], "[]")
	if len(path) == 1 {
		m[key] = v
		return
	}
	if !each {
		sub, _ := m[key].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			m[key] = sub
		}
		setPath(sub, path[1:], v)
		return
	}
	list, _ := m[key].([]any)
	if len(list) == 0 {
		list = []any{map[string]any{}}
		m[key] = list
	}
	setPath(list[0].(map[string]any), path[1:], v)
}

// authzServers is a name server and a broker composed in this process
// (mq dev's graph, the real routers) with ACL on at both.
type authzServers struct {
	Namesrv, Broker string
	ns              *namesrv.Server
	b               *broker.Broker
	Dir             string
}

// startAuthz starts mq dev's graph in this process with ACL on at the
// broker and the name server (acl.namesrv_enabled) and the accounts of
// aclText.
func startAuthz(t *testing.T, aclText string, sets ...string) *authzServers {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclText), 0o600))
	s := &authzServers{
		Namesrv: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)),
		Broker:  fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)),
		Dir:     dir,
	}
	all := append([]string{
		"namesrv.listen=" + s.Namesrv, "broker.listen=" + s.Broker, "storage.dir=" + filepath.Join(dir, "store"),
		"log.level=error", "acl.enabled=true", "acl.namesrv_enabled=true", "acl.file=" + file,
		fmt.Sprintf("metrics.listen=127.0.0.1:%d", testserver.FreePort(t)),
	}, sets...)
	cfg, err := server.Load(config.Options{Sets: all}, server.Dev)
	require.NoError(t, err)
	plan, err := kernel.NewPlan(cfg, server.Spec(server.Dev, aclPlugins()))
	require.NoError(t, err)
	app := fx.New(plan.Options(), fx.Populate(&s.ns, &s.b))
	require.NoError(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, app.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, app.Stop(ctx))
	})
	// Ready once the broker registered, through the name server's ACL
	// (the dev broker's own credential, no account configured for it).
	c := rawClient(t)
	require.Eventually(t, func() bool {
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
		acl.Sign(req.ExtFields, nil, "admin001", "adminSecret01", "") // every ACL file of these tests has it
		resp, err := invoke(c, s.Namesrv, req)
		return err == nil && resp.Code == remoting.Success && strings.Contains(string(resp.Body), s.Broker)
	}, 20*time.Second, 20*time.Millisecond, "the dev broker did not register with its name server")
	return s
}

func invoke(c *remoting.Client, addr string, req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Invoke(ctx, addr, req)
}

// aclRefused reports whether resp is the ACL's refusal (not a
// processor's own NO_PERMISSION, such as a topic that is not writable).
func aclRefused(resp *remoting.Command) bool {
	return resp.Code == remoting.NoPermission && strings.HasPrefix(resp.Remark, "acl: ")
}

// sendRaw sends one message to topic as the account ak/sk and returns its
// commit-log offset.
func sendRaw(t *testing.T, c *remoting.Client, addr, topic, ak, sk string) int64 {
	t.Helper()
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "AuthzPG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": "", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false",
	}, []byte("secret body of "+topic))
	acl.Sign(req.ExtFields, req.Body, ak, sk, "")
	resp, err := invoke(c, addr, req)
	require.NoError(t, err)
	// A SYNC_MASTER without a slave stores it and says so.
	require.Contains(t, []int32{remoting.Success, remoting.SlaveNotAvailable}, resp.Code, resp.Remark)
	_, off, err := message.ParseOffsetMsgID(resp.ExtFields["msgId"])
	require.NoError(t, err)
	return off
}

func createTopic(t *testing.T, c *remoting.Client, addr, topic string) {
	t.Helper()
	req := remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil)
	acl.Sign(req.ExtFields, nil, "admin001", "adminSecret01", "")
	resp, err := invoke(c, addr, req)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// TestAuthzTable sends every request code the composed broker and name
// server route, as each identity (unsigned, no permission, SUB-only,
// PUB-only, admin, broker role), and checks the outcome against the
// permission table: the ACL refuses exactly what the table says it must.
// A code a router serves without a row in the table fails the test.
func TestAuthzTable(t *testing.T) {
	s := startAuthz(t, authzACL)
	c := rawClient(t)
	createTopic(t, c, s.Broker, authzTopic)
	offset := sendRaw(t, c, s.Broker, authzTopic, "admin001", "adminSecret01")

	routed := map[int32][]string{}
	for _, code := range s.ns.Router().Codes() {
		routed[code] = append(routed[code], s.Namesrv)
	}
	for _, code := range s.b.Router().Codes() {
		routed[code] = append(routed[code], s.Broker)
	}
	codes := slices.Sorted(func(yield func(int32) bool) {
		for c := range routed {
			if !yield(c) {
				return
			}
		}
	})
	require.NotEmpty(t, codes)
	for _, code := range codes {
		_, ok := acl.RuleFor(code)
		assert.True(t, ok, "request code %d (%s) is routed but has no row in the permission table (plugins/auth/acl/table.go)", code, remoting.RequestCodeName(code))
	}
	checked := 0
	for _, code := range codes {
		r, ok := acl.RuleFor(code)
		if !ok {
			continue
		}
		for _, addr := range routed[code] {
			for _, id := range identities {
				req := authzRequest(r, offset)
				id.sign(req)
				resp, err := invoke(c, addr, req)
				require.NoError(t, err, "%s to %s as %s", r.Name(), addr, id.name)
				want := id.allowed(r)
				assert.Equal(t, want, !aclRefused(resp), "%s (%d, %s) to %s as %s: answer %d %q",
					r.Name(), code, r.Kind, addr, id.name, resp.Code, resp.Remark)
				checked++
			}
		}
	}
	t.Logf("%d routed codes, %d requests checked against the table", len(codes), checked)

	// Lists of every topic hold, for an ordinary account, only the topics
	// it has a permission on; an admin and a cluster member see all.
	createTopic(t, c, s.Broker, "AuthzOther")
	list := func(id identity) []string {
		req := remoting.NewRequest(remoting.GetAllTopicListFromNameServer, map[string]string{}, nil)
		id.sign(req)
		resp, err := invoke(c, s.Namesrv, req)
		require.NoError(t, err)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		var l struct {
			TopicList []string `json:"topicList"`
		}
		require.NoError(t, json.Unmarshal(resp.Body, &l), string(resp.Body))
		return l.TopicList
	}
	require.Eventually(t, func() bool { return slices.Contains(list(identities[4]), "AuthzOther") }, 15*time.Second, 20*time.Millisecond)
	for _, id := range identities[1:] {
		got := list(id)
		switch {
		case id.admin || id.cluster:
			assert.Contains(t, got, "AuthzOther", id.name)
			assert.Contains(t, got, authzTopic, id.name)
			assert.Contains(t, got, "TBW102", id.name)
		case id.perms != nil:
			assert.Contains(t, got, authzTopic, id.name)
			assert.Subset(t, []string{authzTopic, "%RETRY%" + authzGroup}, got, id.name)
		default:
			assert.Empty(t, got, id.name)
		}
	}

	// A code no router serves and no row names is refused before it
	// reaches the router, admin included.
	for _, addr := range []string{s.Namesrv, s.Broker} {
		req := remoting.NewRequest(4242, map[string]string{}, nil)
		identities[4].sign(req)
		resp, err := invoke(c, addr, req)
		require.NoError(t, err)
		assert.True(t, aclRefused(resp), "code 4242 at %s: %d %q", addr, resp.Code, resp.Remark)
		assert.Contains(t, resp.Remark, "not in the permission table")
	}
}

// TestClusterCredentialAtStart: a separate broker that must act as a
// cluster member (a slave; a broker registering with name servers that
// check) does not start without credentials, and the error names the
// keys to set.
func TestClusterCredentialAtStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(authzACL), 0o600))
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"slave without keys", []string{"broker.role=SLAVE", "broker.id=1"}, "set auth.acl.access_key and auth.acl.secret_key to an account with role: broker"},
		{"registering with checking name servers without keys", []string{"acl.namesrv_enabled=true"}, "auth.acl.access_key and auth.acl.secret_key"},
		// An account without the role is logged, not fatal: the ACL file
		// may be fixed while the broker runs (TestReadyzWhileRegistrationRefused).
		{"slave signing as an admin", []string{"broker.role=SLAVE", "broker.id=1", "acl.access_key=admin001", "acl.secret_key=adminSecret01"}, ""},
		{"slave signing as a cluster member", []string{"broker.role=SLAVE", "broker.id=1", "acl.access_key=broker01", "acl.secret_key=brokerSecret01"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sets := append([]string{
				"broker.listen=127.0.0.1:0", "broker.namesrv=127.0.0.1:1", "storage.dir=" + filepath.Join(t.TempDir(), "store"),
				"log.level=error", "acl.enabled=true", "acl.file=" + file,
			}, tt.sets...)
			cfg, err := server.Load(config.Options{Sets: sets}, server.Broker)
			require.NoError(t, err)
			plan, err := kernel.NewPlan(cfg, server.Spec(server.Broker, aclPlugins()))
			var app *fx.App
			if err == nil {
				app = fx.New(plan.Options())
				err = app.Err()
			}
			if tt.want == "" {
				require.NoError(t, app.Err())
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, app.Start(ctx))
				require.NoError(t, app.Stop(ctx))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "Secret0")
		})
	}
}

// aclPlugins are the stock plugins of these tests, with ACL 1.0.
func aclPlugins() kernel.Plugins {
	return kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()}, Storage: []store.Provider{commitlog.NewProvider()},
		Filter: []filter.Provider{tag.NewProvider(), sql92.NewProvider()}, Auth: []auth.Provider{acl.NewProvider()}}
}
