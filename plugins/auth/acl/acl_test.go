package acl

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/auth/authtest"
	"github.com/quivermq/quiver/core/remoting"
)

var ctx = context.Background()

func TestAuthenticateOrder(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	route := map[string]string{"topic": "TopicA"}
	tests := []struct {
		name    string
		give    auth.Request
		want    auth.Principal
		wantErr string
	}{
		{
			name: "global white list, no access key",
			give: auth.Request{Code: 10, RemoteAddr: "10.10.103.7:4000"},
			want: auth.Principal{Trusted: true},
		},
		{
			name: "global white list, bad signature",
			give: auth.Request{Code: 10, RemoteAddr: "192.168.0.2:4000", ExtFields: map[string]string{"AccessKey": "RocketMQ", "Signature": "bad"}},
			want: auth.Principal{Trusted: true},
		},
		{
			name:    "no access key",
			give:    auth.Request{Code: 105, RemoteAddr: "172.16.0.1:1", ExtFields: route},
			wantErr: "acl: No accessKey is configured",
		},
		{
			name:    "nil ext fields",
			give:    auth.Request{Code: 105, RemoteAddr: "172.16.0.1:1"},
			wantErr: "acl: No accessKey is configured",
		},
		{
			name:    "unknown access key",
			give:    auth.Request{Code: 105, RemoteAddr: "172.16.0.1:1", ExtFields: map[string]string{"AccessKey": "nobody12", "Signature": "x"}},
			wantErr: "acl: No acl config for nobody12",
		},
		{
			name: "account white list skips the signature",
			give: auth.Request{Code: 105, RemoteAddr: "192.168.9.77:1", ExtFields: map[string]string{"AccessKey": "RocketMQ"}},
			want: auth.Principal{AccessKey: "RocketMQ", Trusted: true},
		},
		{
			name:    "another account's white list does not help",
			give:    auth.Request{Code: 105, RemoteAddr: "192.168.1.77:1", ExtFields: map[string]string{"AccessKey": "RocketMQ"}},
			wantErr: "acl: Check signature failed for accessKey=RocketMQ",
		},
		{
			name: "admin account white list",
			give: auth.Request{Code: 17, RemoteAddr: "192.168.1.77:1", ExtFields: map[string]string{"AccessKey": "rocketmq2"}},
			want: auth.Principal{AccessKey: "rocketmq2", Admin: true, Trusted: true},
		},
		{
			name:    "missing signature",
			give:    auth.Request{Code: 105, RemoteAddr: "172.16.0.1:1", ExtFields: map[string]string{"AccessKey": "RocketMQ", "topic": "T"}},
			wantErr: "acl: Check signature failed for accessKey=RocketMQ",
		},
		{
			name: "Java signature",
			give: signed(105, route, nil, "RocketMQ"),
			want: auth.Principal{AccessKey: "RocketMQ"},
		},
		{
			name: "Go client signature with token",
			give: func() auth.Request {
				ext := map[string]string{"topic": "T"}
				goClientSign(ext, []byte("body"), "adminperms", skAdminPer, "token")
				return auth.Request{Code: 10, RemoteAddr: "[2001:db8::1]:5", ExtFields: ext, Body: []byte("body")}
			}(),
			want: auth.Principal{AccessKey: "adminperms", Admin: true},
		},
		{
			name: "signed with another account's secret",
			give: func() auth.Request {
				ext := map[string]string{"topic": "T"}
				goClientSign(ext, nil, "RocketMQ", skAdmin, "")
				return auth.Request{Code: 10, RemoteAddr: "172.16.0.1:1", ExtFields: ext}
			}(),
			wantErr: "acl: Check signature failed for accessKey=RocketMQ",
		},
		{
			name: "unparsable remote address still checks the signature",
			give: func() auth.Request {
				r := signed(105, route, nil, "RocketMQ")
				r.RemoteAddr = "nats:inbox"
				return r
			}(),
			want: auth.Principal{AccessKey: "RocketMQ"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, tt.give)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				assert.True(t, errors.Is(err, auth.ErrUnauthenticated))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p)
		})
	}
}

func TestCheckPermissions(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	send := func(topic string) (int32, map[string]string, string) {
		return remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": topic}, ""
	}
	pull := func(topic, group string) (int32, map[string]string, string) {
		return remoting.PullMessage, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0"}, ""
	}
	hb := func(group string, topics ...string) (int32, map[string]string, string) {
		subs := make([]string, len(topics))
		for i, t := range topics {
			subs[i] = `{"topic":"` + t + `","subString":"*"}`
		}
		return remoting.HeartBeat, nil, `{"clientID":"c","consumerDataSet":[{"groupName":"` + group + `","subscriptionDataSet":[` + strings.Join(subs, ",") + `]}]}`
	}
	admin := func(code int32) func() (int32, map[string]string, string) {
		return func() (int32, map[string]string, string) { return code, map[string]string{"topic": "New"}, "" }
	}
	type req func() (int32, map[string]string, string)
	tests := []struct {
		name    string
		ak      string
		give    req
		wantErr string // "" = allowed
	}{
		{name: "PUB|SUB topic", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("topicB") }},
		{name: "PUB topic", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("topicP") }},
		{name: "DENY topic", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("topicA") }, wantErr: "acl: no permission: PUB on topic topicA for accessKey RocketMQ"},
		{name: "SUB-only topic refuses PUB", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("topicC") }, wantErr: "acl: no permission: PUB on topic topicC for accessKey RocketMQ"},
		{name: "unlisted topic uses defaultTopicPerm DENY", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("other") }, wantErr: "PUB on topic other"},
		{name: "trace topic PUB always allowed", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("RMQ_SYS_TRACE_TOPIC") }},
		{name: "retry topic needs group SUB (listed SUB)", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("%RETRY%groupC") }},
		{name: "retry topic of a DENY group", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return send("%RETRY%groupA") }, wantErr: "acl: no permission: SUB on group groupA for accessKey RocketMQ"},
		{name: "pull SUB topic, SUB group", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return pull("topicC", "groupC") }},
		{name: "pull PUB-only topic", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return pull("topicP", "groupC") }, wantErr: "SUB on topic topicP"},
		{name: "pull with DENY group", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return pull("topicB", "groupA") }, wantErr: "SUB on group groupA"},
		{name: "pull with unlisted group uses defaultGroupPerm SUB", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return pull("topicB", "groupX") }},
		{name: "heartbeat allowed", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return hb("groupB", "topicB", "%RETRY%groupB") }},
		{name: "heartbeat with a DENY topic", ak: "RocketMQ", give: func() (int32, map[string]string, string) { return hb("groupB", "topicB", "topicA") }, wantErr: "SUB on topic topicA"},
		{name: "admin code for a non-admin", ak: "RocketMQ", give: admin(remoting.UpdateAndCreateTopic), wantErr: "acl: no permission: admin required for request code 17 (UPDATE_AND_CREATE_TOPIC) for accessKey RocketMQ"},
		{name: "delete topic for a non-admin", ak: "RocketMQ", give: admin(remoting.DeleteTopicInBroker), wantErr: "admin required for request code 215"},
		{name: "reset offset for a non-admin", ak: "RocketMQ", give: admin(remoting.InvokeBrokerToResetOffset), wantErr: "admin required for request code 222"},
		{name: "signature-only code", ak: "RocketMQ", give: func() (int32, map[string]string, string) {
			return remoting.GetRouteInfoByTopic, map[string]string{"topic": "AnyTopic"}, ""
		}},
		{name: "malformed request refused", ak: "RocketMQ", give: func() (int32, map[string]string, string) {
			return remoting.PullMessage, map[string]string{"topic": "topicB"}, ""
		}, wantErr: "acl: PULL_MESSAGE (11): the consumerGroup field is missing"},

		{name: "admin without perms: any topic", ak: "rocketmq2", give: func() (int32, map[string]string, string) { return send("anything") }},
		{name: "admin without perms: any pull", ak: "rocketmq2", give: func() (int32, map[string]string, string) { return pull("x", "y") }},
		{name: "admin without perms: create topic", ak: "rocketmq2", give: admin(remoting.UpdateAndCreateTopic)},
		{name: "admin without perms: delete in namesrv", ak: "rocketmq2", give: admin(remoting.DeleteTopicInNamesrv)},

		{name: "admin with perms: create topic", ak: "adminperms", give: admin(remoting.UpdateAndCreateTopic)},
		{name: "admin with perms: unlisted topic uses the DENY default", ak: "adminperms", give: func() (int32, map[string]string, string) { return send("anything") }, wantErr: "PUB on topic anything for accessKey adminperms"},
		{name: "admin with perms: listed topic", ak: "adminperms", give: func() (int32, map[string]string, string) { return pull("topicA", "g") }},
		{name: "admin with perms: SUB-only topic refuses PUB", ak: "adminperms", give: func() (int32, map[string]string, string) { return send("topicA") }, wantErr: "PUB on topic topicA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ext, body := tt.give()
			req := signed(code, ext, []byte(body), tt.ak)
			_, err := a.Check(ctx, req)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.True(t, errors.Is(err, auth.ErrDenied), "%v", err)
			for _, s := range testSecrets {
				assert.NotContains(t, err.Error(), s)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	user := auth.Principal{AccessKey: "RocketMQ"}
	assert.NoError(t, a.Authorize(ctx, user, auth.Resource{Name: "topicB"}, auth.Pub))
	assert.NoError(t, a.Authorize(ctx, user, auth.Resource{Name: "groupB", IsGroup: true}, auth.Pub), "IsGroup without the prefix")
	assert.NoError(t, a.Authorize(ctx, user, auth.Resource{Name: "%RETRY%groupB"}, auth.Pub), "the prefix makes a group")
	assert.ErrorIs(t, a.Authorize(ctx, user, auth.Resource{Name: "groupA", IsGroup: true}, auth.Sub), auth.ErrDenied)
	assert.ErrorIs(t, a.Authorize(ctx, user, auth.Resource{Name: "topicB"}, 0), auth.ErrDenied, "no action is no permission")
	assert.ErrorIs(t, a.Authorize(ctx, user, auth.Resource{}, auth.Admin), auth.ErrDenied)
	assert.NoError(t, a.Authorize(ctx, auth.Principal{AccessKey: "rocketmq2", Admin: true}, auth.Resource{}, auth.Admin))
	err := a.Authorize(ctx, auth.Principal{AccessKey: "gone1234"}, auth.Resource{Name: "T"}, auth.Pub)
	assert.ErrorIs(t, err, auth.ErrDenied)
	assert.EqualError(t, err, "acl: no acl config for accessKey gone1234")
	assert.NoError(t, a.Authorize(ctx, auth.Principal{Trusted: true}, auth.Resource{Name: "topicA"}, auth.Pub), "trusted principals pass")
}

func TestInterceptor(t *testing.T) {
	a, _, _ := newACL(t, testYAML)
	ic := a.Interceptor()

	ok := signed(remoting.SendMessage, map[string]string{"topic": "topicB"}, []byte("hi"), "RocketMQ")
	cmd := &remoting.Command{Code: ok.Code, Opaque: 7, ExtFields: ok.ExtFields, Body: ok.Body}
	assert.Nil(t, ic(ctx, nil, cmd))

	bad := signed(remoting.SendMessage, map[string]string{"topic": "topicA"}, []byte("hi"), "RocketMQ")
	cmd = &remoting.Command{Code: bad.Code, Opaque: 8, ExtFields: bad.ExtFields, Body: bad.Body}
	resp := ic(ctx, nil, cmd)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, int32(8), resp.Opaque)
	assert.True(t, resp.IsResponse())
	assert.Equal(t, "acl: no permission: PUB on topic topicA for accessKey RocketMQ", resp.Remark)

	cmd = &remoting.Command{Code: remoting.SendMessage, Opaque: 9, ExtFields: map[string]string{"topic": "topicB", "AccessKey": "RocketMQ", "Signature": "AAAA"}}
	resp = ic(ctx, nil, cmd)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, "acl: Check signature failed for accessKey=RocketMQ", resp.Remark)

	resp = ic(ctx, nil, &remoting.Command{Code: remoting.GetRouteInfoByTopic, ExtFields: map[string]string{"topic": "T"}})
	require.NotNil(t, resp)
	assert.Equal(t, "acl: No accessKey is configured", resp.Remark)
}

func TestConformance(t *testing.T) {
	var seeds []auth.Request
	for _, ak := range []string{"RocketMQ", "rocketmq2", "adminperms"} {
		seeds = append(seeds,
			signed(remoting.SendMessage, map[string]string{"producerGroup": "PG", "topic": "topicB"}, []byte("body"), ak),
			signed(remoting.HeartBeat, nil, []byte(hbBody), ak),
			signed(remoting.GetRouteInfoByTopic, map[string]string{"topic": "topicB"}, nil, ak),
		)
	}
	goSigned := map[string]string{"consumerGroup": "groupB", "topic": "topicB"}
	goClientSign(goSigned, nil, "RocketMQ", skUser, "tok")
	seeds = append(seeds, auth.Request{Code: remoting.PullMessage, RemoteAddr: "127.0.0.1:1", ExtFields: goSigned})
	authtest.Run(t, func(t *testing.T) (auth.Authenticator, auth.Authorizer) {
		a, _, _ := newACL(t, testYAML)
		return a, a
	}, authtest.Secrets(testSecrets...), authtest.WithRequests(seeds...),
		authtest.WithHMACRequests(
			auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "RocketMQ", Content: []byte(dt5x), MAC: macOf(skUser, dt5x)},
			auth.HMACRequest{RemoteAddr: "10.0.0.1:5", AccessKey: "rocketmq2", Content: []byte(dt5x), MAC: macOf(skAdmin, dt5x)},
			auth.HMACRequest{RemoteAddr: "192.168.9.3:5", AccessKey: "RocketMQ"}, // the account's white list
		))
}

// dt5x is an x-mq-date-time value, the content a 5.x client signs.
const dt5x = "20250309T195445Z"

func TestProvider(t *testing.T) {
	p := NewProvider()
	assert.Equal(t, "acl", p.ID())
	cfg, ok := p.NewConfig().(*Config)
	require.True(t, ok)
	assert.Equal(t, DefaultReloadInterval, cfg.ReloadInterval)
	assert.Error(t, cfg.Validate(), "file is required")

	_, _, err := p.Open(ctx, struct{}{}, auth.Deps{})
	assert.ErrorContains(t, err, "want *acl.Config")

	_, path, _ := newACL(t, testYAML)
	cfg.File = path
	an, az, err := p.Open(ctx, cfg, auth.Deps{})
	require.NoError(t, err)
	assert.Same(t, an.(*ACL), az.(*ACL))
	c, ok := an.(io.Closer)
	require.True(t, ok, "the owner closes the provider's result")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")

	cfg.File = path + ".missing"
	_, _, err = p.Open(ctx, cfg, auth.Deps{})
	assert.ErrorContains(t, err, "no such file")
}

func TestConfigValidate(t *testing.T) {
	c := &Config{File: "x", ReloadInterval: -1}
	assert.ErrorContains(t, c.Validate(), "reload_interval")
	c = &Config{File: "x"}
	assert.NoError(t, c.Validate())
}

func BenchmarkCheck(b *testing.B) {
	a, _, _ := newACL(b, testYAML)
	tests := []struct {
		name string
		req  auth.Request
	}{
		{"send", signed(remoting.SendMessage, map[string]string{
			"producerGroup": "PG", "topic": "topicB", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
			"properties": "UNIQ_KEY\x01AC110001000000000000000000000000\x02WAIT\x01true\x02", "reconsumeTimes": "0",
			"unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "bname": "broker-a",
		}, make([]byte, 1024), "RocketMQ")},
		{"heartbeat", signed(remoting.HeartBeat, nil, []byte(hbBody), "rocketmq2")},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Check(ctx, tt.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
