package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// testClock is a clock tests step by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// loginFrom posts a password login to the console's handler as a browser
// at remote (ip:port) would, and returns the status.
func loginFrom(t *testing.T, h http.Handler, s *consoleSessions, remote, password string) int {
	t.Helper()
	id := randToken()
	req := httptest.NewRequest("POST", "http://console.test/api/login", strings.NewReader(url.Values{"password": {password}}.Encode()))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://console.test")
	req.Header.Set(consoleCSRFHeader, s.csrf(id))
	req.AddCookie(&http.Cookie{Name: consoleCookie, Value: id})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestConsoleLoginThrottleAcrossAddresses is issue 37's report: 100
// addresses guessing 20 times each got 2,000 password checks and not one
// 429, because throttling was per address only. The account's limit now
// stops them at loginPerAccount checks a minute, the right password too,
// until the window passes.
func TestConsoleLoginThrottleAcrossAddresses(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	require.NoError(t, err)
	c := newConsole("127.0.0.1:1", false, nil, nil)
	c.auth, err = parseConsoleAuth(string(hash))
	require.NoError(t, err)
	clk := &testClock{t: time.Unix(1_800_000_000, 0)}
	c.sessions.now = clk.now
	h := c.handler()

	checked, throttled := 0, 0
	for a := 0; a < 100; a++ {
		for g := 0; g < 20; g++ {
			switch code := loginFrom(t, h, c.sessions, fmt.Sprintf("10.0.%d.%d:5000", a/256, a%256), "wrong"); code {
			case http.StatusUnauthorized:
				checked++
			case http.StatusTooManyRequests:
				throttled++
			default:
				t.Fatalf("address %d guess %d: status %d", a, g, code)
			}
		}
	}
	assert.Equal(t, loginPerAccount, checked, "password checks a minute at one account")
	assert.Equal(t, 2000-loginPerAccount, throttled)
	assert.Equal(t, http.StatusTooManyRequests, loginFrom(t, h, c.sessions, "10.9.9.9:1", "right"), "the account is throttled from a fresh address too")

	clk.step(loginWindow + loginStep)
	assert.Equal(t, http.StatusOK, loginFrom(t, h, c.sessions, "10.9.9.9:1", "right"), "the window passed")
}

// TestLoginLimiter: the three limits, IPv6 by /64, successful logins not
// counted, and the console-wide limit bounding guesses at many accounts
// from many addresses.
func TestLoginLimiter(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	t.Run("per address", func(t *testing.T) {
		l := newLoginLimiter()
		for i := 0; i < loginPerAddress; i++ {
			_, err := l.begin("192.0.2.1", fmt.Sprint("acct", i), t0)
			require.NoError(t, err)
		}
		_, err := l.begin("192.0.2.1", "other", t0)
		assert.ErrorContains(t, err, "from this address")
		_, err = l.begin("192.0.2.2", "other", t0)
		assert.NoError(t, err, "another address")
	})
	t.Run("IPv6 by /64", func(t *testing.T) {
		l := newLoginLimiter()
		for i := 0; i < loginPerAddress; i++ {
			_, err := l.begin(fmt.Sprintf("2001:db8:1:2::%x", i+1), fmt.Sprint("acct", i), t0)
			require.NoError(t, err)
		}
		_, err := l.begin("2001:db8:1:2:ffff::1", "other", t0)
		assert.ErrorContains(t, err, "from this address", "same /64")
		_, err = l.begin("2001:db8:1:3::1", "other", t0)
		assert.NoError(t, err, "another /64")
	})
	t.Run("successes not counted", func(t *testing.T) {
		l := newLoginLimiter()
		for i := 0; i < 3*loginPerAddress; i++ {
			a, err := l.begin("192.0.2.1", "admin", t0)
			require.NoError(t, err, "login %d", i)
			l.forget(a)
		}
	})
	t.Run("global", func(t *testing.T) {
		l := newLoginLimiter()
		checked := 0
		for i := 0; i < 2000; i++ {
			if _, err := l.begin(fmt.Sprintf("10.%d.%d.1", i/256, i%256), fmt.Sprint("acct", i), t0); err == nil {
				checked++
			} else {
				assert.ErrorContains(t, err, "at this console")
			}
		}
		assert.Equal(t, loginGlobal, checked)
		_, err := l.begin("10.200.0.1", "fresh", t0.Add(loginWindow))
		assert.ErrorContains(t, err, "at this console", "still inside the window")
		_, err = l.begin("10.200.0.1", "fresh", t0.Add(loginWindow+loginStep))
		assert.NoError(t, err, "the window passed")
	})
}

// TestFailTableBounded: a full table is never wiped. Live entries stay
// and new keys go uncounted (the global limit bounds them); once entries
// leave the window, the least recently counted one makes room.
func TestFailTableBounded(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	b := loginBucket(t0)
	ft := newFailTable(loginTableSize)
	for i := 0; i < 19; i++ {
		require.True(t, ft.add("victim-guesser", b))
	}
	for i := 0; i < 10_000; i++ {
		ft.add(fmt.Sprint("filler", i), b)
	}
	assert.Len(t, ft.m, loginTableSize)
	assert.Equal(t, 19, ft.count("victim-guesser", b), "10,000 other addresses do not clear the table")
	assert.False(t, ft.add("late", b), "no live entry is evicted")

	later := loginBucket(t0.Add(loginWindow + loginStep))
	require.True(t, ft.add("late", later))
	assert.Len(t, ft.m, loginTableSize)
	assert.NotContains(t, ft.m, "victim-guesser", "the least recently counted entry made room")
	assert.Contains(t, ft.m, "filler1")
}

// TestConsoleSessionsPerAccount is issue 37's report: 1,030 logins of one
// account ended every other session, the admin's included. Now they end
// only that account's own oldest sessions; a full table refuses new
// accounts rather than end others' sessions.
func TestConsoleSessionsPerAccount(t *testing.T) {
	clk := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newConsoleSessions()
	s.now = clk.now
	login := func(user string) (string, error) {
		return s.add(&consoleLogin{user: user, expires: clk.now().Add(consoleSessionTTL)})
	}
	admin, err := login("admin")
	require.NoError(t, err)
	var alice []string
	for i := 0; i < 1030; i++ {
		id, err := login("alice")
		require.NoError(t, err)
		alice = append(alice, id)
	}
	require.NotNil(t, s.login(admin), "the admin's session survives another account's logins")
	assert.Nil(t, s.login(alice[0]), "alice's oldest sessions went")
	for _, id := range alice[len(alice)-consoleMaxLoginsPerAccount:] {
		assert.NotNil(t, s.login(id))
	}
	assert.Len(t, s.logins, 1+consoleMaxLoginsPerAccount)

	// Fill the table with other accounts.
	for u := 0; len(s.logins) < consoleMaxLogins; u++ {
		_, err := login(fmt.Sprint("user", u))
		require.NoError(t, err)
	}
	_, err = login("newcomer")
	assert.ErrorIs(t, err, errSessionsFull, "a new account does not end another's session")
	second, err := login("admin")
	require.NoError(t, err, "an account with a session takes its own oldest's place")
	assert.Nil(t, s.login(admin))
	assert.NotNil(t, s.login(second))
	assert.NotNil(t, s.login(alice[len(alice)-1]))

	clk.step(consoleSessionTTL + time.Second)
	_, err = login("newcomer")
	assert.NoError(t, err, "expired sessions make room")
	assert.Len(t, s.logins, 1)
}
