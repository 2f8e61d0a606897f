package authtest_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/auth/authtest"
)

// sessions is an authenticator with sessions: a request carrying the
// token opens one for its address and user; a later request from that
// address naming the same user, or resending the same body, passes
// without the token. With copy unset it makes the mistake the contract
// forbids: it keeps the request's own map and body, which the router
// recycles for the next request.
type sessions struct {
	auth.AllowAll
	copy bool
	mu   sync.Mutex
	ext  map[string]map[string]string
	body map[string][]byte
}

const token = "letmein"

func newSessions(copy bool) *sessions {
	return &sessions{copy: copy, ext: map[string]map[string]string{}, body: map[string][]byte{}}
}

func (s *sessions) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := req.ExtFields["user"]
	if req.ExtFields["token"] == token && user != "" {
		ext, body := req.ExtFields, req.Body
		if s.copy {
			ext, body = maps.Clone(ext), bytes.Clone(body)
		}
		s.ext[req.RemoteAddr], s.body[req.RemoteAddr] = ext, body
		return auth.Principal{AccessKey: user}, nil
	}
	if sess := s.ext[req.RemoteAddr]; sess != nil && sess["token"] == token && sess["user"] == user && user != "" {
		return auth.Principal{AccessKey: user}, nil
	}
	if b, ok := s.body[req.RemoteAddr]; ok && len(req.Body) > 0 && bytes.Equal(b, req.Body) {
		return auth.Principal{AccessKey: "resent"}, nil
	}
	return auth.Principal{}, fmt.Errorf("%w: no token", auth.ErrUnauthenticated)
}

var sessionSeeds = []auth.Request{
	{Code: 10, RemoteAddr: "127.0.0.1:1", ExtFields: map[string]string{"token": token, "user": "alice", "topic": "T"}, Body: []byte("first body")},
	{Code: 11, RemoteAddr: "127.0.0.1:2", ExtFields: map[string]string{"token": token, "user": "bob"}, Body: []byte("second body")},
	{Code: 10, RemoteAddr: "127.0.0.1:1", ExtFields: map[string]string{"user": "alice", "topic": "T"}},
	{Code: 10, RemoteAddr: "127.0.0.1:2", ExtFields: map[string]string{"topic": "T"}, Body: []byte("second body")},
}

// recorder is a testing.TB that records failures instead of failing the
// test, so a check can be run against a plugin that must fail it.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fail()   { r.record("Fail") }
func (r *recorder) FailNow() {
	r.record("FailNow")
	runtime.Goexit()
}
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any) {
	r.record(fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.errors) > 0 }

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.errors = append(r.errors, s)
	r.mu.Unlock()
}

func runRecorded(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestCheckBorrowedInputs(t *testing.T) {
	tests := []struct {
		name     string
		copy     bool
		wantFail bool
	}{
		{name: "copies what it keeps", copy: true},
		{name: "keeps the request's map and body", copy: false, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSessions(tt.copy)
			r := runRecorded(t, func(tb testing.TB) { authtest.CheckBorrowedInputs(tb, s, s, sessionSeeds) })
			if !tt.wantFail {
				assert.Empty(t, r.errors, "the check fails a plugin that copies what it keeps")
				return
			}
			assert.True(t, r.Failed(), "the check passes a plugin that keeps borrowed maps and bodies")
			assert.Contains(t, strings.Join(r.errors, "\n"), "kept")
		})
	}
}

func TestSuitePassesSessionsThatCopy(t *testing.T) {
	authtest.Run(t, func(*testing.T) (auth.Authenticator, auth.Authorizer) { s := newSessions(true); return s, s },
		authtest.Rounds(50), authtest.WithRequests(sessionSeeds[:2]...))
}
