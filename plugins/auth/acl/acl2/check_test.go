package acl2_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

func newPlugin(t *testing.T, audit string, logs *bytes.Buffer, entries ...acl2.Entry) *acl2.Plugin {
	t.Helper()
	cfg := acl2.NewConfig()
	cfg.File = filepath.Join(t.TempDir(), "acl2.json")
	cfg.Audit = audit
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	p, err := acl2.New(cfg, auth.Deps{Logger: log})
	require.NoError(t, err)
	require.NoError(t, p.Store().CreateUser(acl2.User{Username: "app", Password: "app-secret-1"}))
	if len(entries) > 0 {
		require.NoError(t, p.Store().PutACL(acl2.ACL{Subject: "User:app", Policies: []acl2.Policy{{PolicyType: "Custom", Entries: entries}}}))
	}
	return p
}

func allow(res string, acts ...string) acl2.Entry {
	return acl2.Entry{Resource: res, Actions: acts, Decision: "Allow"}
}

func check(p *acl2.Plugin, code int32, ext map[string]string, body string) error {
	e := map[string]string{}
	for k, v := range ext {
		e[k] = v
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	acl.Sign(e, b, "app", "app-secret-1", "")
	_, err := p.Check(context.Background(), auth.Request{Code: code, RemoteAddr: "10.1.2.3:5000", ExtFields: e, Body: b})
	return err
}

// TestEveryCodeThroughThePolicies: each kind of row of the permission
// table maps to ACL 2.0 resources and actions; a code without a row is
// refused even to a user allowed everything but Super.
func TestEveryCodeThroughThePolicies(t *testing.T) {
	cases := []struct {
		name  string
		code  int32
		ext   map[string]string
		body  string
		grant acl2.Entry
	}{
		{"send", remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "T"}, "", allow("Topic:T", "Pub")},
		{"send v2", remoting.SendMessageV2, map[string]string{"a": "PG", "b": "T"}, "", allow("Topic:T", "Pub")},
		{"pull needs the group too", remoting.PullMessage, map[string]string{"topic": "T", "consumerGroup": "G"}, "", allow("Group:G", "Sub")},
		{"heartbeat", remoting.HeartBeat, nil, `{"clientID":"c","producerDataSet":[{"groupName":"PG"}],"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"%RETRY%G"}]}]}`, allow("Group:G", "Sub")},
		{"create topic", remoting.UpdateAndCreateTopic, map[string]string{"topic": "T"}, "", allow("Topic:T", "Create")},
		{"delete topic", remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, "", allow("Topic:T", "Delete")},
		{"create group", remoting.UpdateAndCreateSubscriptionGroup, nil, `{"groupName":"G"}`, allow("Group:G", "Create")},
		{"delete group", remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "G"}, "", allow("Group:G", "Delete")},
		{"broker config read", remoting.GetBrokerConfig, nil, "", allow("Cluster:DefaultCluster", "Get")},
		{"broker config write", remoting.UpdateBrokerConfig, nil, "a=b", allow("Cluster:DefaultCluster", "Update")},
		{"all topics", remoting.GetAllTopicConfig, nil, "", allow("Topic:*", "List")},
		{"register broker", remoting.RegisterBroker, nil, "", allow("Cluster:*", "Update")},
		{"user admin", remoting.AuthCreateUser, map[string]string{"username": "x"}, `{"password":"x-secret-1"}`, allow("Cluster:DefaultCluster", "Update")},
		{"user read", remoting.AuthListUser, nil, "", allow("Cluster:DefaultCluster", "Get")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			none := newPlugin(t, acl2.AuditOff, nil)
			assert.Error(t, check(none, c.code, c.ext, c.body), "no policy")
			extra := []acl2.Entry{c.grant}
			if c.name == "pull needs the group too" {
				p := newPlugin(t, acl2.AuditOff, nil, c.grant)
				assert.Error(t, check(p, c.code, c.ext, c.body), "Sub on the topic is missing")
				extra = append(extra, allow("Topic:T", "Sub"))
			}
			p := newPlugin(t, acl2.AuditOff, nil, extra...)
			assert.NoError(t, check(p, c.code, c.ext, c.body))
		})
	}
	all := newPlugin(t, acl2.AuditOff, nil, allow("*", "All"))
	err := check(all, 9999, nil, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not in the permission table")
	assert.Error(t, check(all, remoting.CheckTransactionState, nil, ""), "a code clients serve")
	none := newPlugin(t, acl2.AuditOff, nil)
	assert.NoError(t, check(none, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, ""), "a public code needs a user only")
}

// TestAuditLog: auth.acl2.audit=all logs every decision with audit=true,
// the user, the request, the resource, the actions, the source, the
// decision and the entry that decided; deny only the refusals; off none.
// No password is logged.
func TestAuditLog(t *testing.T) {
	var logs bytes.Buffer
	p := newPlugin(t, acl2.AuditAll, &logs, allow("Topic:orders*", "Pub"))
	require.NoError(t, check(p, remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "orders-eu"}, ""))
	require.Error(t, check(p, remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "payments"}, ""))
	out := logs.String()
	for _, want := range []string{
		`msg="acl2: authorization" audit=true user=app code=10 request=SEND_MESSAGE resource=Topic:orders-eu actions=Pub source=10.1.2.3:5000 decision=Allow entry=Topic:orders*`,
		`level=WARN msg="acl2: authorization" audit=true user=app code=10 request=SEND_MESSAGE resource=Topic:payments actions=Pub source=10.1.2.3:5000 decision=Deny entry="" reason="User:app has no permission to access Topic:payments from 10.1.2.3, no matched policies."`,
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "app-secret-1")

	logs.Reset()
	p = newPlugin(t, acl2.AuditDeny, &logs, allow("Topic:orders*", "Pub"))
	require.NoError(t, check(p, remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "orders-eu"}, ""))
	assert.NotContains(t, logs.String(), "decision=Allow")
	require.Error(t, check(p, remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "payments"}, ""))
	assert.Contains(t, logs.String(), "decision=Deny")
	// A bad signature is a refusal too.
	e := map[string]string{"producerGroup": "PG", "topic": "orders-eu"}
	acl.Sign(e, nil, "app", "wrong", "")
	_, err := p.Check(context.Background(), auth.Request{Code: remoting.SendMessage, RemoteAddr: "10.1.2.3:5000", ExtFields: e})
	require.Error(t, err)
	assert.Contains(t, logs.String(), `reason="acl2: check signature failed for User:app"`)

	logs.Reset()
	p = newPlugin(t, acl2.AuditOff, &logs)
	require.Error(t, check(p, remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "payments"}, ""))
	assert.False(t, strings.Contains(logs.String(), "audit=true"))
}
