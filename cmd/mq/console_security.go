package main

// Console security. Every request passes guard:
//
//   - On a loopback listener the Host header must name a loopback host
//     (localhost, 127.0.0.0/8, ::1), so a page whose DNS name is rebound
//     to 127.0.0.1 cannot read or drive the console.
//   - A state-changing request (anything but GET and HEAD under /api/) must
//     be same-origin: an Origin header, or a Referer when Origin is
//     absent, must equal this console's scheme://host (403 otherwise;
//     Sec-Fetch-Site: cross-site is refused too), and it must carry the
//     session's CSRF token in X-Quiver-CSRF. The token is
//     HMAC-SHA256(console key, session id), the session id lives in an
//     HttpOnly SameSite=Strict cookie, and the page gets both from GET
//     /api/session.
//   - With console.auth set (a bcrypt password hash, or "acl" for the ACL
//     accounts) every API call but session, login and logout needs a
//     logged-in session (401). An ACL login is checked against a broker
//     and the console then signs that session's requests with the
//     account's keys, so the account's permissions bound what it may do.
//     A login rotates the session id. Logins are throttled per address,
//     per account and per console (console_throttle.go), and sessions
//     are bounded per account and per console (consoleSessions).
//   - Responses forbid framing and inline scripts (CSP), so the page
//     cannot be clickjacked into confirming an action.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"

	"github.com/quivermq/quiver/internal/netlimit"
)

const (
	consoleCookie     = "quiver_console"
	consoleCSRFHeader = "X-Quiver-CSRF"
	consoleSessionTTL = 12 * time.Hour
	// consoleMaxLogins bounds the logged-in sessions of the console,
	// consoleMaxLoginsPerAccount those of one account.
	consoleMaxLogins           = 1024
	consoleMaxLoginsPerAccount = 16
	// consoleLoginProbeGroup is the group an ACL login's probe names
	// (GET_CONSUMER_LIST_BY_GROUP has no side effect).
	consoleLoginProbeGroup = "QUIVER_CONSOLE_LOGIN_PROBE"
)

// Console authentication modes (console.auth).
const (
	consoleAuthNone     = ""
	consoleAuthPassword = "password"
	consoleAuthACL      = "acl"
)

// consoleAuth is a parsed console.auth.
type consoleAuth struct {
	mode string
	hash []byte // bcrypt, for consoleAuthPassword
}

// parseConsoleAuth reads console.auth: empty (no login), "acl", or a
// bcrypt hash of the password.
func parseConsoleAuth(s string) (consoleAuth, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return consoleAuth{}, nil
	case s == consoleAuthACL:
		return consoleAuth{mode: consoleAuthACL}, nil
	case strings.HasPrefix(s, "$2"):
		if _, err := bcrypt.Cost([]byte(s)); err != nil {
			return consoleAuth{}, fmt.Errorf("console.auth: not a bcrypt hash: %w", err)
		}
		return consoleAuth{mode: consoleAuthPassword, hash: []byte(s)}, nil
	}
	return consoleAuth{}, errors.New(`console.auth: want "acl" or a bcrypt password hash (make one with: mq console hash-password)`)
}

// consoleLogin is a logged-in session.
type consoleLogin struct {
	user    string
	ak, sk  string // the ACL account of an acl login
	expires time.Time
}

// consoleSessions holds the console key, the logged-in sessions and the
// login throttle. Each account holds at most consoleMaxLoginsPerAccount
// sessions (a login beyond that ends the account's oldest one) and the
// console at most consoleMaxLogins; when the table is full of live
// sessions a login takes the place of its own account's oldest session
// or, when the account has none, is refused: one account never ends
// another's session.
type consoleSessions struct {
	key []byte
	// now is the clock (time.Now; tests step it).
	now      func() time.Time
	throttle *loginLimiter

	mu     sync.Mutex
	logins map[string]*consoleLogin
	byUser map[string][]string // session ids of each account, oldest first
}

func newConsoleSessions() *consoleSessions {
	return &consoleSessions{key: []byte(randToken()), now: time.Now, throttle: newLoginLimiter(),
		logins: map[string]*consoleLogin{}, byUser: map[string][]string{}}
}

// errSessionsFull refuses a login when every session slot is taken by
// other accounts' live sessions.
var errSessionsFull = fmt.Errorf("every one of the %d sessions is in use by other accounts; try again when one logs out or expires", consoleMaxLogins)

func randToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// csrf is the token of session id.
func (s *consoleSessions) csrf(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("csrf:" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// login returns the live login of session id, or nil.
func (s *consoleSessions) login(id string) *consoleLogin {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logins[id]
	if l == nil {
		return nil
	}
	if s.now().After(l.expires) {
		s.dropLocked(id)
		return nil
	}
	return l
}

// add stores l under a new session id and returns the id (see
// consoleSessions for the bounds).
func (s *consoleSessions) add(l *consoleLogin) (string, error) {
	id := randToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, old := range s.byUser[l.user] {
		if now.After(s.logins[old].expires) {
			s.dropLocked(old)
		}
	}
	if own := s.byUser[l.user]; len(own) >= consoleMaxLoginsPerAccount {
		s.dropLocked(own[0])
	}
	if len(s.logins) >= consoleMaxLogins {
		for old, ol := range s.logins {
			if now.After(ol.expires) {
				s.dropLocked(old)
			}
		}
	}
	if len(s.logins) >= consoleMaxLogins {
		own := s.byUser[l.user]
		if len(own) == 0 {
			return "", errSessionsFull
		}
		s.dropLocked(own[0])
	}
	s.logins[id] = l
	s.byUser[l.user] = append(s.byUser[l.user], id)
	return id, nil
}

func (s *consoleSessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(id)
}

func (s *consoleSessions) dropLocked(id string) {
	l := s.logins[id]
	if l == nil {
		return
	}
	delete(s.logins, id)
	ids := s.byUser[l.user]
	for i, v := range ids {
		if v == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(s.byUser, l.user)
	} else {
		s.byUser[l.user] = ids
	}
}

// clientIP is the host part of r's remote address.
func clientIP(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// sessionID is the request's session cookie, "" when it has none.
func sessionID(r *http.Request) string {
	ck, err := r.Cookie(consoleCookie)
	if err != nil || len(ck.Value) != 43 { // randToken's length
		return ""
	}
	return ck.Value
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(consoleSessionTTL.Seconds())})
}

type consoleCtxKey struct{}

// loginOf is the request's login (nil when none).
func loginOf(ctx context.Context) *consoleLogin {
	l, _ := ctx.Value(consoleCtxKey{}).(*consoleLogin)
	return l
}

// isLoopbackHost reports whether host (a Host header) names a loopback
// address.
func isLoopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin checks a state-changing request's origin against the console.
func sameOrigin(r *http.Request) error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	self := scheme + "://" + strings.ToLower(r.Host)
	if o := r.Header.Get("Origin"); o != "" {
		if !strings.EqualFold(o, self) {
			return fmt.Errorf("cross-origin request refused (Origin %q is not %s)", o, self)
		}
	} else if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || !strings.EqualFold(u.Scheme+"://"+u.Host, self) {
			return fmt.Errorf("cross-origin request refused (Referer %q is not on %s)", ref, self)
		}
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errors.New("cross-site request refused")
	}
	return nil
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// guard is the security layer around the console's handler.
func (c *consoleServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if c.loopback && !isLoopbackHost(r.Host) {
			writeJSONError(w, http.StatusForbidden, fmt.Sprintf("console: host %q refused: this console answers loopback names only", r.Host))
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Cache-Control", "no-store")
		id := sessionID(r)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := sameOrigin(r); err != nil {
				c.log.Warn("console: refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
				writeJSONError(w, http.StatusForbidden, "console: "+err.Error())
				return
			}
			tok := r.Header.Get(consoleCSRFHeader)
			if id == "" || tok == "" || !hmac.Equal([]byte(tok), []byte(c.sessions.csrf(id))) {
				writeJSONError(w, http.StatusForbidden, "console: missing or wrong CSRF token (GET /api/session, then send its csrf in "+consoleCSRFHeader+")")
				return
			}
		}
		var l *consoleLogin
		if id != "" {
			l = c.sessions.login(id)
		}
		switch r.URL.Path {
		case "/api/session", "/api/login", "/api/logout":
		default:
			if c.auth.mode != consoleAuthNone && l == nil {
				writeJSONError(w, http.StatusUnauthorized, "console: login required")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), consoleCtxKey{}, l)))
	})
}

// sessionInfo is GET /api/session's answer.
type sessionInfo struct {
	CSRF    string `json:"csrf"`
	Auth    string `json:"auth"`
	User    string `json:"user"`
	Admin   bool   `json:"admin"`
	Namesrv string `json:"namesrv"`
}

func (c *consoleServer) sessionInfo(id string) sessionInfo {
	si := sessionInfo{CSRF: c.sessions.csrf(id), Auth: c.auth.mode, Admin: c.allow, Namesrv: c.namesrv}
	if l := c.sessions.login(id); l != nil {
		si.User = l.user
	}
	return si
}

// handleSession answers GET /api/session, giving the client a session id
// when it has none.
func (c *consoleServer) handleSession(w http.ResponseWriter, r *http.Request) {
	id := sessionID(r)
	if id == "" {
		id = randToken()
		setSessionCookie(w, r, id)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.sessionInfo(id))
}

var errBadLogin = errors.New("wrong credentials")

// handleLogin answers POST /api/login: password (console.auth a hash) or
// accessKey and secretKey (console.auth: acl).
func (c *consoleServer) handleLogin(w http.ResponseWriter, r *http.Request) {
	if c.auth.mode == consoleAuthNone {
		writeJSONError(w, http.StatusBadRequest, "console: no login configured (console.auth)")
		return
	}
	if err := netlimit.ParseForm(r, consoleFormMaxBody); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, netlimit.ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		writeJSONError(w, code, "console: "+err.Error())
		return
	}
	l := &consoleLogin{expires: c.sessions.now().Add(consoleSessionTTL)}
	switch c.auth.mode {
	case consoleAuthPassword:
		l.user = "admin"
	case consoleAuthACL:
		l.ak, l.sk = strings.TrimSpace(r.FormValue("accessKey")), r.FormValue("secretKey")
		l.user = l.ak
	}
	attempt, err := c.sessions.throttle.begin(clientIP(r), l.user, c.sessions.now())
	if err != nil {
		// Debug: throttled attempts come in floods (each checked guess is
		// logged at WARN below, at most loginGlobal a minute).
		c.log.Debug("console: login throttled", "remote", r.RemoteAddr, "user", l.user, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(loginWindow.Seconds())))
		writeJSONError(w, http.StatusTooManyRequests, "console: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	switch c.auth.mode {
	case consoleAuthPassword:
		if bcrypt.CompareHashAndPassword(c.auth.hash, []byte(r.FormValue("password"))) != nil {
			err = errBadLogin
		}
	case consoleAuthACL:
		err = c.checkACLLogin(ctx, l.ak, l.sk)
	}
	if err != nil {
		c.log.Warn("console: login refused", "remote", r.RemoteAddr, "user", l.user, "err", err)
		if errors.Is(err, errBadLogin) {
			writeJSONError(w, http.StatusUnauthorized, "console: login refused: "+err.Error())
			return
		}
		c.sessions.throttle.forget(attempt) // not a guess: nothing was checked
		writeJSONError(w, http.StatusBadGateway, "console: login not checked: "+err.Error())
		return
	}
	c.sessions.throttle.forget(attempt)
	if old := sessionID(r); old != "" {
		c.sessions.drop(old)
	}
	id, err := c.sessions.add(l)
	if err != nil {
		c.log.Warn("console: login refused", "remote", r.RemoteAddr, "user", l.user, "err", err)
		writeJSONError(w, http.StatusServiceUnavailable, "console: login refused: "+err.Error())
		return
	}
	setSessionCookie(w, r, id)
	c.log.Info("console: login", "remote", r.RemoteAddr, "user", l.user)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.sessionInfo(id))
}

// handleLogout answers POST /api/logout with a fresh anonymous session.
func (c *consoleServer) handleLogout(w http.ResponseWriter, r *http.Request) {
	if old := sessionID(r); old != "" {
		c.sessions.drop(old)
	}
	id := randToken()
	setSessionCookie(w, r, id)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.sessionInfo(id))
}

// checkACLLogin checks an ACL account's keys against the first master
// broker: a request signed with them must pass authentication, and one
// signed with a wrong secret must not (else the broker does not check the
// console's requests, ACL off or the console's address white-listed, and
// a login would prove nothing).
func (c *consoleServer) checkACLLogin(ctx context.Context, ak, sk string) error {
	if ak == "" || sk == "" {
		return errBadLogin
	}
	a := c.admWith(ak, sk)
	defer a.Close()
	ms, err := a.masters(ctx)
	if err != nil {
		return err
	}
	probe := func(secret string) (bool, error) {
		p := c.admWith(ak, secret)
		defer p.Close()
		lib, err := p.library()
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		return lib.Authenticated(ctx, ms[0].Addr, consoleLoginProbeGroup)
	}
	if ok, err := probe(randToken()); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("broker %s accepts a wrong secret from the console's address (ACL off, or the address white-listed): ACL logins cannot be checked", ms[0].Addr)
	}
	ok, err := probe(sk)
	if err != nil {
		return err
	}
	if !ok {
		return errBadLogin
	}
	return nil
}

// consoleHashCmd is `mq console hash-password`: it reads a password from
// stdin and prints the bcrypt hash console.auth takes.
func consoleHashCmd() *cobra.Command {
	return &cobra.Command{
		Use: "hash-password", Short: "Read a password on stdin and print its bcrypt hash for console.auth / --auth", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			pw := strings.TrimRight(line, "\r\n")
			if pw == "" {
				return errors.New("console: hash-password: give the password on stdin")
			}
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
			if err != nil {
				return fmt.Errorf("console: hash-password: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(h))
			return nil
		},
	}
}
