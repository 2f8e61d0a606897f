package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/quivermq/quiver/internal/netlimit/netlimittest"
)

// consoleHTTP is a browser-like client of a console: a cookie jar, the
// session's CSRF token, and the console's own Origin on every request
// unless a test overrides it.
type consoleHTTP struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newConsoleHTTP(t *testing.T, base string) *consoleHTTP {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	h := &consoleHTTP{t: t, base: base, c: &http.Client{Jar: jar}}
	var si sessionInfo
	require.Equal(t, http.StatusOK, h.do("GET", "/api/session", nil, nil, &si))
	require.NotEmpty(t, si.CSRF)
	h.csrf = si.CSRF
	return h
}

// do sends one request; hdr entries replace the defaults (an empty value
// removes the header). v receives the JSON answer when not nil.
func (h *consoleHTTP) do(method, path string, form url.Values, hdr map[string]string, v any) int {
	h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, h.base+path, body)
	require.NoError(h.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method != "GET" {
		req.Header.Set("Origin", h.base)
		req.Header.Set(consoleCSRFHeader, h.csrf)
	}
	for k, val := range hdr {
		if val == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, val)
		}
	}
	if hdr["Host"] != "" {
		req.Host = hdr["Host"]
	}
	resp, err := h.c.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if v != nil {
		require.NoError(h.t, json.Unmarshal(b, v), "%s %s: %s", method, path, b)
	}
	return resp.StatusCode
}

// startTestConsole serves a console on 127.0.0.1 whose name server
// refuses connections (the guard answers before any cluster call).
func startTestConsole(t *testing.T, allow bool, auth string) string {
	t.Helper()
	c := newConsole(fmt.Sprintf("127.0.0.1:%d", closedPort(t)), allow, nil, nil)
	ca, err := parseConsoleAuth(auth)
	require.NoError(t, err)
	c.auth = ca
	require.NoError(t, c.Start(context.Background(), "127.0.0.1:0", 3600e9))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return "http://" + c.Addr()
}

// closedPort is a port nothing listens on (1 is privileged and unused).
func closedPort(t *testing.T) int {
	t.Helper()
	return 1
}

// TestConsoleSameOrigin: a state-changing request from another origin, or
// without the session's token, is refused with 403 before it reaches the
// cluster; so is a rebound DNS name on a loopback console.
func TestConsoleSameOrigin(t *testing.T) {
	base := startTestConsole(t, true, "")
	h := newConsoleHTTP(t, base)
	reset := url.Values{"group": {"G"}, "topic": {"T"}, "timestamp": {"-1h"}}
	tests := []struct {
		name string
		give map[string]string
		want string
	}{
		{"evil origin", map[string]string{"Origin": "http://evil.example"}, "cross-origin request refused"},
		{"null origin", map[string]string{"Origin": "null"}, "cross-origin request refused"},
		{"other port", map[string]string{"Origin": "http://127.0.0.1:1"}, "cross-origin request refused"},
		{"evil referer", map[string]string{"Origin": "", "Referer": "http://evil.example/page"}, "cross-origin request refused"},
		{"sec-fetch-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "cross-site request refused"},
		{"no token", map[string]string{consoleCSRFHeader: ""}, "CSRF token"},
		{"wrong token", map[string]string{consoleCSRFHeader: "x" + h.csrf[1:]}, "CSRF token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e map[string]string
			assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/offset/reset", reset, tt.give, &e))
			assert.Contains(t, e["error"], tt.want)
		})
	}
	t.Run("token of another session", func(t *testing.T) {
		other := newConsoleHTTP(t, base)
		var e map[string]string
		assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/offset/reset", reset, map[string]string{consoleCSRFHeader: other.csrf}, &e))
		assert.Contains(t, e["error"], "CSRF token")
	})
	t.Run("rebound host name", func(t *testing.T) {
		var e map[string]string
		assert.Equal(t, http.StatusForbidden, h.do("GET", "/api/info", nil, map[string]string{"Host": "evil.example:8080"}, &e))
		assert.Contains(t, e["error"], "loopback names only")
		assert.Equal(t, http.StatusOK, h.do("GET", "/api/info", nil, map[string]string{"Host": "localhost"}, nil))
	})
	t.Run("same origin passes", func(t *testing.T) {
		// Through the guard to the cluster, whose name server is down.
		var e map[string]string
		assert.Equal(t, http.StatusBadGateway, h.do("POST", "/api/offset/reset", reset, nil, &e))
		assert.NotContains(t, e["error"], "refused (")
		// A Referer of the console is enough without Origin (old browsers).
		assert.Equal(t, http.StatusBadGateway, h.do("POST", "/api/offset/reset", reset, map[string]string{"Origin": "", "Referer": base + "/groups"}, nil))
	})
	t.Run("framing forbidden", func(t *testing.T) {
		resp, err := http.Get(base + "/topics/SomeTopic")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	})
}

// TestConsoleLogin: with console.auth a password hash, the API needs a
// login; a wrong password is refused, a right one rotates the session.
func TestConsoleLogin(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	require.NoError(t, err)
	base := startTestConsole(t, false, string(hash))
	h := newConsoleHTTP(t, base)
	var e map[string]string
	assert.Equal(t, http.StatusUnauthorized, h.do("GET", "/api/topics", nil, nil, &e))
	assert.Contains(t, e["error"], "login required")
	assert.Equal(t, http.StatusUnauthorized, h.do("GET", "/api/info", nil, nil, nil))
	var si sessionInfo
	require.Equal(t, http.StatusOK, h.do("GET", "/api/session", nil, nil, &si))
	assert.Equal(t, consoleAuthPassword, si.Auth)
	assert.Empty(t, si.User)

	assert.Equal(t, http.StatusUnauthorized, h.do("POST", "/api/login", url.Values{"password": {"wrong"}}, nil, &e))
	assert.Contains(t, e["error"], "wrong credentials")
	// Login is CSRF-protected too.
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/login", url.Values{"password": {"correct horse"}}, map[string]string{"Origin": "http://evil.example"}, nil))

	old := h.csrf
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"password": {"correct horse"}}, nil, &si))
	assert.Equal(t, "admin", si.User)
	assert.NotEqual(t, old, si.CSRF, "the session id rotates")
	h.csrf = si.CSRF
	var info map[string]any
	require.Equal(t, http.StatusOK, h.do("GET", "/api/info", nil, nil, &info))
	assert.Equal(t, false, info["admin"])
	assert.Equal(t, http.StatusForbidden, h.do("POST", "/api/offset/reset", url.Values{"group": {"G"}}, nil, &e))
	assert.Contains(t, e["error"], "read-only")

	require.Equal(t, http.StatusOK, h.do("POST", "/api/logout", nil, nil, &si))
	h.csrf = si.CSRF
	assert.Empty(t, si.User)
	assert.Equal(t, http.StatusUnauthorized, h.do("GET", "/api/info", nil, nil, nil))
}

func TestParseConsoleAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	tests := []struct {
		give, want, wantErr string
	}{
		{give: "", want: consoleAuthNone},
		{give: "acl", want: consoleAuthACL},
		{give: string(hash), want: consoleAuthPassword},
		{give: "$2a$10$short", wantErr: "not a bcrypt hash"},
		{give: "hunter2", wantErr: "mq console hash-password"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := parseConsoleAuth(tt.give)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.mode)
		})
	}
}

// TestConsoleHashPassword: mq console hash-password prints a bcrypt hash
// of the stdin line (spaces kept) that console.auth accepts.
func TestConsoleHashPassword(t *testing.T) {
	cmd := consoleCmd()
	var out strings.Builder
	cmd.SetArgs([]string{"hash-password"})
	cmd.SetIn(strings.NewReader("correct horse battery\n"))
	cmd.SetOut(&out)
	require.NoError(t, cmd.Execute())
	hash := strings.TrimSpace(out.String())
	require.NoError(t, bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse battery")))
	ca, err := parseConsoleAuth(hash)
	require.NoError(t, err)
	assert.Equal(t, consoleAuthPassword, ca.mode)

	cmd = consoleCmd()
	cmd.SetArgs([]string{"hash-password"})
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	assert.ErrorContains(t, cmd.Execute(), "give the password on stdin")
}

// TestConsoleLoginThrottle: 20 failed logins a minute from one address
// are answered with 429, even with the right password.
func TestConsoleLoginThrottle(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	require.NoError(t, err)
	base := startTestConsole(t, false, string(hash))
	h := newConsoleHTTP(t, base)
	for i := 0; i < 20; i++ {
		require.Equal(t, http.StatusUnauthorized, h.do("POST", "/api/login", url.Values{"password": {"wrong"}}, nil, nil))
	}
	var e map[string]string
	assert.Equal(t, http.StatusTooManyRequests, h.do("POST", "/api/login", url.Values{"password": {"right"}}, nil, &e))
	assert.Contains(t, e["error"], "too many failed logins")
}

// TestConsoleBounded: the console is bounded as the other servers are
// (internal/netlimit): a login form over 64KiB, which anyone may send, is
// answered 413 without being read and leaves the throttle alone, as is
// any body over it but the test message's (which may be 16MiB); a
// correct login still works after; connections over 64 from one IP are
// closed at accept.
func TestConsoleBounded(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	require.NoError(t, err)
	base := startTestConsole(t, true, string(hash))
	h := newConsoleHTTP(t, base)
	var e map[string]string
	big := url.Values{"password": {strings.Repeat("p", 1<<20)}}
	// (A client that does not wait for 100 Continue has its connection
	// reset while it writes what is not read.)
	wait := map[string]string{"Expect": "100-continue"}
	for range 30 { // more than the throttle allows wrong guesses
		require.Equal(t, http.StatusRequestEntityTooLarge, h.do("POST", "/api/login", big, wait, &e))
	}
	assert.Contains(t, e["error"], "too large")
	var si sessionInfo
	require.Equal(t, http.StatusOK, h.do("POST", "/api/login", url.Values{"password": {"correct horse"}}, nil, &si), "oversized logins were counted as guesses")
	h.csrf = si.CSRF

	// A form over 64KiB anywhere but the test message's route: 413.
	assert.Equal(t, http.StatusRequestEntityTooLarge, h.do("POST", "/api/offset/reset", url.Values{"group": {strings.Repeat("g", 100<<10)}}, wait, &e))
	// The test message's route reads up to 16MiB (it then fails on the
	// closed name server, not on its size).
	code := h.do("POST", consoleSendPath, url.Values{"topic": {"T"}, "body": {strings.Repeat("b", 1<<20)}}, nil, &e)
	assert.NotEqual(t, http.StatusRequestEntityTooLarge, code, e["error"])
	assert.Equal(t, http.StatusRequestEntityTooLarge, h.do("POST", consoleSendPath, url.Values{"topic": {"T"}, "body": {strings.Repeat("b", 17<<20)}}, wait, &e))

	// Connections per IP.
	kept := netlimittest.Kept(t, strings.TrimPrefix(base, "http://"), 70)
	h.c.CloseIdleConnections()
	assert.LessOrEqual(t, kept, 64, "connections from one IP over 64 were kept")
	assert.GreaterOrEqual(t, kept, 60)
}
