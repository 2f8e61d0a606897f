package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/retry"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

func httpJSON(t *testing.T, method, u string, form url.Values, v any) int {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if v != nil {
		require.NoError(t, json.Unmarshal(b, v), string(b))
	}
	return resp.StatusCode
}

// TestConsoleAPI drives the console of a live mq dev over HTTP: the page,
// the topic and the group with its lag, a key search showing the body, and
// a DLQ resend whose message reaches the retry topic, an offset reset
// (refused from another origin) and a read-only console refusing actions.
// The page itself: console_browser_test.go.
func TestConsoleAPI(t *testing.T) {
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=" + consoleAddr}})
	waitListening(t, consoleAddr)
	ns, base := dev.Namesrv, "http://"+consoleAddr
	const topic, group = "ConsoleTopic", "ConsoleGroup"
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1")
	var ids []string
	for i := 0; i < 3; i++ {
		var res map[string]any
		mqJSON(t, ns, &res, "message", "send", "--topic", topic, "--body", fmt.Sprintf("console-body-%d", i), "--keys", fmt.Sprintf("ck-%d", i))
		ids = append(ids, res["offsetMsgId"].(string))
	}
	fakeConsumer(t, dev.Broker, group, topic, 1)

	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(page), "Quiver console")

	var info map[string]any
	httpJSON(t, "GET", base+"/api/info", nil, &info)
	assert.Equal(t, true, info["admin"])

	var cluster []map[string]any
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/cluster", nil, &cluster))
	require.Len(t, cluster, 1)
	assert.Equal(t, dev.Broker, cluster[0]["addr"])

	require.Eventually(t, func() bool {
		var ts listPage[topicSummary]
		httpJSON(t, "GET", base+"/api/topics?q=console", nil, &ts)
		for _, s := range ts.Items {
			if s.Topic == topic {
				return s.Messages == 3 && len(s.Queues) == 1 && s.Queues[0].MaxOffset == 3
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "topic with 3 messages")

	var gs []groupSummary
	httpJSON(t, "GET", base+"/api/groups", nil, &gs)
	var found bool
	for _, g := range gs {
		if g.Group == group {
			found = true
			assert.Equal(t, groupSummary{Group: group, Lag: 2, Clients: 1}, groupSummary{Group: g.Group, Lag: g.Lag, Clients: g.Clients})
		}
	}
	assert.True(t, found, "group listed: %+v", gs)
	var st groupStatus
	httpJSON(t, "GET", base+"/api/group?group="+group, nil, &st)
	assert.EqualValues(t, 2, st.Lag)
	require.Len(t, st.Clients, 1)

	var ms []messageView
	httpJSON(t, "GET", base+"/api/messages?"+url.Values{"topic": {topic}, "key": {"ck-1"}}.Encode(), nil, &ms)
	require.Len(t, ms, 1)
	assert.Equal(t, "console-body-1", ms[0].Body)
	assert.Equal(t, "ck-1", ms[0].Properties[message.PropertyKeys])
	httpJSON(t, "GET", base+"/api/messages?id="+ids[2], nil, &ms)
	require.Len(t, ms, 1)
	assert.Equal(t, "console-body-2", ms[0].Body)
	httpJSON(t, "GET", base+"/api/messages?"+url.Values{"topic": {topic}, "begin": {"-1h"}}.Encode(), nil, &ms)
	assert.Len(t, ms, 3)
	var e map[string]string
	assert.Equal(t, http.StatusBadGateway, httpJSON(t, "GET", base+"/api/messages?id=nonsense", nil, &e))
	assert.NotEmpty(t, e["error"])

	// A dead letter: send message 0 back with delay level -1.
	_, off, err := message.ParseOffsetMsgID(ids[0])
	require.NoError(t, err)
	c := benchClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Invoke(ctx, dev.Broker, remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": fmt.Sprint(off), "delayLevel": "-1", "originMsgId": ids[0], "maxReconsumeTimes": "16"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, r.Code, r.Remark)
	require.Eventually(t, func() bool {
		httpJSON(t, "GET", base+"/api/dlq?group="+group, nil, &ms)
		return len(ms) == 1
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, "console-body-0", ms[0].Body)

	h := newConsoleHTTP(t, base)
	var resent []retry.Resent
	require.Equal(t, http.StatusOK, h.do("POST", "/api/dlq/resend", url.Values{"group": {group}, "msgId": {ms[0].MsgID}}, nil, &resent))
	require.Len(t, resent, 1)
	require.Eventually(t, func() bool {
		out, err := mqRun(t, ns, "message", "consume", "--topic", protocol.RetryTopic(group), "--output", "json")
		if err != nil {
			return false
		}
		var got []messageView
		return json.Unmarshal([]byte(out), &got) == nil && len(got) == 1 && got[0].Body == "console-body-0"
	}, 20*time.Second, 100*time.Millisecond, "resent dead letter in the retry topic")

	var reset []queueOffset
	// The report: a cross-site reset was accepted (200).
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/offset/reset", url.Values{"group": {group}, "topic": {topic}, "timestamp": {"-1h"}}, map[string]string{"Origin": "http://evil.example"}, &e))
	require.Equal(t, http.StatusOK, h.do("POST", "/api/offset/reset", url.Values{"group": {group}, "topic": {topic}, "timestamp": {"-1h"}}, nil, &reset))
	require.Len(t, reset, 1)
	assert.EqualValues(t, 0, reset[0].Offset)

	// A read-only console refuses actions and says so in /api/info.
	ro := newConsole(ns, false, nil, nil)
	require.NoError(t, ro.Start(context.Background(), "127.0.0.1:0", 20*time.Millisecond))
	defer ro.Stop(context.Background())
	rbase := "http://" + ro.Addr()
	httpJSON(t, "GET", rbase+"/api/info", nil, &info)
	assert.Equal(t, false, info["admin"])
	rh := newConsoleHTTP(t, rbase)
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/dlq/resend", url.Values{"group": {group}}, nil, &e))
	assert.Contains(t, e["error"], "read-only")
	assert.Equal(t, http.StatusForbidden, rh.do("POST", "/api/offset/reset", url.Values{"group": {group}, "topic": {topic}, "timestamp": {"-1h"}}, nil, nil))
	var hv histView
	require.Eventually(t, func() bool {
		httpJSON(t, "GET", rbase+"/api/history?kind=lag", nil, &hv)
		for _, l := range hv.Lines {
			if l.Name == group && len(l.Values) >= 2 && l.Values[len(l.Values)-1] != nil && *l.Values[len(l.Values)-1] == 3 {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "lag history")
}

// TestConsoleHistoryBeforeFirstPage: the console samples from its start,
// with nobody using it: the first request ever made to it finds samples
// older than itself, and with more topics than the cap it tracks only the
// cap, the written topic among them.
func TestConsoleHistoryBeforeFirstPage(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	ns := dev.Namesrv
	for i := range 6 {
		mqOK(t, ns, "topic", "create", "--topic", fmt.Sprintf("HistTopic%d", i), "--read-queues", "1", "--write-queues", "1")
	}
	c := newConsole(ns, false, nil, nil)
	c.hist.caps[kindTopic] = 3
	require.NoError(t, c.Start(context.Background(), "127.0.0.1:0", 20*time.Millisecond))
	defer c.Stop(context.Background())
	require.Eventually(t, func() bool { return len(c.hist.tracked(kindTopic)) == 3 && c.hist.samples() >= 3 },
		10*time.Second, 10*time.Millisecond, "sampled with no request made")
	// Written now: more recently active than any tracked idle topic, it
	// takes a slot (the probe reaches it within a tick at this size).
	mqOK(t, ns, "message", "send", "--topic", "HistTopic5", "--body", "x")
	require.Eventually(t, func() bool { return containsStr(c.hist.tracked(kindTopic), "HistTopic5") },
		10*time.Second, 10*time.Millisecond, "the written topic is tracked")
	require.Len(t, c.hist.tracked(kindTopic), 3, "never more than the cap")

	first := time.Now().UnixMilli()
	var hv histView
	require.Equal(t, http.StatusOK, httpJSON(t, "GET", "http://"+c.Addr()+"/api/history?kind=topic&name=HistTopic5", nil, &hv))
	require.NotEmpty(t, hv.Times)
	assert.Less(t, hv.Times[0], first, "history older than the first request")
	require.Len(t, hv.Lines, 2)
	assert.Equal(t, "HistTopic5 in", hv.Lines[0].Name)
	httpJSON(t, "GET", "http://"+c.Addr()+"/api/history?kind=broker", nil, &hv)
	require.Len(t, hv.Lines, 2)
	assert.Equal(t, "broker-a in", hv.Lines[0].Name)
	var e map[string]string
	assert.Equal(t, http.StatusBadRequest, httpJSON(t, "GET", "http://"+c.Addr()+"/api/history?kind=nonsense", nil, &e))
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// aclDev starts mq dev with ACL on (appKey01: a plain account that may
// publish and subscribe; adminKey01: an admin) and its console logging
// in with ACL accounts.
func aclDev(t *testing.T) (ns, base string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
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
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{
		"acl.enabled=true", "acl.file=" + file, "acl.access_key=adminKey01", "acl.secret_key=adminSecret01",
		"console.listen=" + consoleAddr, "console.auth=acl",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
	waitListening(t, consoleAddr)
	return dev.Namesrv, "http://" + consoleAddr
}

// waitListening waits for mq dev's console at addr: mq dev is ready once
// its broker is routed, and the console may bind a moment later.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, 10*time.Second, 20*time.Millisecond, "console listening on %s", addr)
}

// TestConsoleACLLogin: with console.auth: acl the console needs a login
// with an ACL account's keys, refuses a wrong secret, and acts with the
// account's rights: a plain account may send but not create topics or
// read the ACL; an admin may, and secrets are never shown.
func TestConsoleACLLogin(t *testing.T) {
	_, base := aclDev(t)
	h := newConsoleHTTP(t, base)
	var e map[string]string
	assert.Equal(t, http.StatusUnauthorized, h.do("GET", "/api/topics", nil, nil, &e))
	assert.Equal(t, http.StatusUnauthorized, h.do("POST", "/api/login", url.Values{"accessKey": {"appKey01"}, "secretKey": {"wrongSecret01"}}, nil, &e))
	assert.Contains(t, e["error"], "wrong credentials")
	assert.Equal(t, http.StatusUnauthorized, h.do("POST", "/api/login", url.Values{"accessKey": {"nobody01"}, "secretKey": {"appSecret01"}}, nil, &e))

	var si sessionInfo
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {"appKey01"}, "secretKey": {"appSecret01"}}, nil, &si))
	assert.Equal(t, "appKey01", si.User)
	h.csrf = si.CSRF
	assert.Equal(t, http.StatusBadGateway, h.do("POST", "/api/topics", url.Values{"topic": {"AclConsoleTopic"}, "mode": {"create"}}, nil, &e))
	assert.Contains(t, e["error"], "no permission")
	assert.Equal(t, http.StatusBadGateway, h.do("GET", "/api/acl", nil, nil, &e))
	assert.Contains(t, e["error"], "no permission")

	require.Equal(t, http.StatusOK, h.do("POST", "/api/logout", nil, nil, &si))
	h.csrf = si.CSRF
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {"adminKey01"}, "secretKey": {"adminSecret01"}}, nil, &si))
	h.csrf = si.CSRF
	var res map[string]any
	require.Equal(t, http.StatusOK, h.do("POST", "/api/topics", url.Values{"topic": {"AclConsoleTopic"}, "mode": {"create"}, "readQueues": {"1"}, "writeQueues": {"1"}}, nil, &res))
	require.Equal(t, http.StatusOK, h.do("GET", "/api/acl", nil, nil, &res))
	accts := res["acl"].(map[string]any)["plainAccessConfigs"].([]any)
	require.Len(t, accts, 2)
	for _, a := range accts {
		assert.Empty(t, a.(map[string]any)["secretKey"], "secrets are never shown")
	}

	// The plain account may send to the topic the admin made.
	require.Equal(t, http.StatusOK, h.do("POST", "/api/logout", nil, nil, &si))
	h.csrf = si.CSRF
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"accessKey": {"appKey01"}, "secretKey": {"appSecret01"}}, nil, &si))
	h.csrf = si.CSRF
	require.Equal(t, http.StatusOK, h.do("POST", "/api/messages/send", url.Values{"topic": {"AclConsoleTopic"}, "body": {"from app"}}, nil, &res))
}
